//! Debian's archive through a private apt: its own sources list, lists and
//! cache under one directory of ours, so packages and sources of other
//! suites (bookworm's `deb-src`, bookworm-backports) can be fetched without
//! touching the machine's apt configuration. The kernel matrix downloads
//! its kernel packages through it; nothing is installed.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _};

use xtask::util::output;

/// The archive this machine reaches (its own sources list names it too).
pub const ARCHIVE: &str = "http://deb.debian.org/debian";

/// An apt of our own, rooted at `dir`.
pub struct PrivateApt {
    dir: PathBuf,
}

impl PrivateApt {
    /// An apt whose only sources are `lines` (sources.list syntax). Its
    /// lists are fetched on the first use (or when `lines` change).
    pub fn new(dir: &Path, lines: &[String]) -> anyhow::Result<PrivateApt> {
        let apt = PrivateApt {
            dir: dir.to_path_buf(),
        };
        for d in ["lists/partial", "cache/archives/partial", "etc/preferences.d"] {
            fs::create_dir_all(dir.join(d))
                .with_context(|| format!("cannot create {}", dir.join(d).display()))?;
        }
        let list = dir.join("etc/sources.list");
        let text = lines.join("\n") + "\n";
        let fresh = fs::read_to_string(&list).ok().as_deref() == Some(text.as_str())
            && fs::read_dir(dir.join("lists"))?
                .flatten()
                .any(|e| e.file_name() != "partial");
        if !fresh {
            fs::write(&list, text).with_context(|| format!("cannot write {}", list.display()))?;
            output(apt.cmd("apt-get").arg("update"))
                .context("apt-get update with a private sources list (is Debian's archive reachable?)")?;
        }
        Ok(apt)
    }

    /// Fetches the lists again (`apt-get update`), so that "newest" means today's.
    pub fn update(&self) -> anyhow::Result<()> {
        output(self.cmd("apt-get").arg("update"))
            .context("apt-get update with a private sources list (is Debian's archive reachable?)")
            .map(drop)
    }

    /// `program` (apt-get, apt-cache) reading only our sources, lists and cache.
    pub fn cmd(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        let d = |p: &str| self.dir.join(p).display().to_string();
        for (k, v) in [
            ("Dir::Etc::SourceList", d("etc/sources.list")),
            ("Dir::Etc::SourceParts", "/dev/null".into()),
            ("Dir::Etc::Preferences", "/dev/null".into()),
            ("Dir::Etc::PreferencesParts", d("etc/preferences.d")),
            ("Dir::State::Lists", d("lists")),
            ("Dir::Cache", d("cache")),
            // Fetch as root into our directory: the _apt user cannot write it.
            ("APT::Sandbox::User", "root".into()),
        ] {
            cmd.arg("-o").arg(format!("{k}={v}"));
        }
        cmd.args(["-q"]).env("DEBIAN_FRONTEND", "noninteractive");
        cmd
    }
}

/// The installed version of `package` on this machine (`dpkg-query`).
pub fn installed_version(package: &str) -> anyhow::Result<String> {
    let v = output(Command::new("dpkg-query").args(["-W", "-f", "${Version}", package]))
        .with_context(|| format!("{package} is not installed (`cargo xtask setup` installs it)"))?;
    if v.trim().is_empty() {
        bail!("{package} is not installed (`cargo xtask setup` installs it)");
    }
    Ok(v.trim().to_string())
}
