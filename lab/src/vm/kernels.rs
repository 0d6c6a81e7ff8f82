//! Debian kernel packages: which one to test, fetched with `apt-get
//! download` into a cache, checked against the archive's SHA256, unpacked
//! with `dpkg-deb -x`. The exact packages and versions are recorded.
//!
//! A kernel comes from the machine's own apt (bookworm here: `6.1`,
//! `6.12`) or from another suite through a private apt (`trixie:6.12`,
//! `sid:7.2`, `bullseye:5.10`; see `source.rs`). Sid's 7.x images are
//! split: `linux-image-<abi>` is an empty package that depends on
//! `linux-binary-<abi>` (`usr/lib/modules/<release>/vmlinuz`),
//! `linux-modules-<abi>` and `linux-base-<abi>` (config, System.map,
//! modules.builtin), so the image's own pinned dependencies are fetched too.

mod modules;
mod source;

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _};

use source::Archive;
use xtask::util::{self, output};

/// One kernel, unpacked.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// What was asked for: a series (`6.1`, `sid:7.2`) or a package name.
    pub spec: String,
    /// The image package (`linux-image-…`), and its version.
    pub package: String,
    pub version: String,
    pub sha256: String,
    /// Every package unpacked: the image and, where split, its parts.
    pub parts: Vec<Part>,
    /// `uname -r` of this kernel, e.g. `6.1.0-57-amd64`.
    pub release: String,
    pub vmlinuz: PathBuf,
    /// `CONFIG_DEBUG_INFO_BTF=y` in the package's config.
    pub btf_config: bool,
    /// The unpacked packages.
    dir: PathBuf,
    /// `lib/modules/<release>` or `usr/lib/modules/<release>` below `dir`.
    modules_dir: PathBuf,
}

/// One package of a kernel, as recorded.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Part {
    pub package: String,
    pub version: String,
    pub sha256: String,
}

/// What `apt-cache show --no-all-versions` says about a package.
#[derive(Debug, Clone)]
struct Candidate {
    package: String,
    version: String,
    size: u64,
    sha256: String,
    depends: String,
}

/// The stanzas `apt-cache show --no-all-versions <args>` prints.
fn show(archive: &Archive, args: &[String]) -> anyhow::Result<Vec<Candidate>> {
    let mut cmd = archive.cmd("apt-cache");
    cmd.args(["show", "--no-all-versions"]).args(args);
    let text = output(&mut cmd)?;
    let mut candidates = Vec::new();
    for stanza in text.split("\n\n").filter(|s| !s.trim().is_empty()) {
        let field = |name: &str| {
            stanza
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().to_string())
        };
        if let (Some(package), Some(version), Some(size), Some(sha256)) =
            (field("Package"), field("Version"), field("Size"), field("SHA256"))
        {
            candidates.push(Candidate {
                package,
                version,
                size: size.parse().context("apt-cache: bad Size")?,
                sha256,
                depends: field("Depends").unwrap_or_default(),
            });
        }
    }
    Ok(candidates)
}

/// The newest package for `what`: a series such as `6.1` (the newest
/// `linux-image-6.1.*-amd64`, without the cloud and rt flavours), or an
/// exact package name.
fn choose(archive: &Archive, spec: &str, what: &str) -> anyhow::Result<Candidate> {
    let names = if what.starts_with("linux-image-") {
        vec![what.to_string()]
    } else {
        anyhow::ensure!(
            what.split('.').all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit())),
            "--kernel {spec:?}: give a series such as 6.1 or sid:7.2, or a package name such as linux-image-6.1.0-57-amd64"
        );
        let pattern = format!("^linux-image-{}\\.", what.replace('.', "\\."));
        let mut cmd = archive.cmd("apt-cache");
        let found = output(cmd.args(["search", "--names-only", &pattern]))?;
        let names: Vec<String> = found
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| is_generic_amd64(n, what))
            .map(str::to_string)
            .collect();
        if names.is_empty() {
            bail!(
                "apt offers no linux-image-{what}.*-amd64 package: {}",
                archive.hint()
            );
        }
        names
    };
    let mut best: Option<Candidate> = None;
    for c in show(archive, &names)? {
        if best.as_ref().is_none_or(|b| version_gt(&c.version, &b.version)) {
            best = Some(c);
        }
    }
    best.with_context(|| format!("apt-cache show {} printed no version", names.join(" ")))
}

/// `linux-image-<series>.…-amd64`, not `-cloud-amd64`, `-rt-amd64`, `-unsigned` or `-dbg`.
fn is_generic_amd64(name: &str, series: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("linux-image-")
        .and_then(|r| r.strip_suffix("-amd64"))
    else {
        return false;
    };
    let Some(abi) = rest.strip_prefix(series).and_then(|r| r.strip_prefix('.')) else {
        return false;
    };
    // 6.1: `0-57`; 6.12: `117+deb12`. Flavours add a word: `0-57-cloud`.
    abi.starts_with(|c: char| c.is_ascii_digit()) && !abi.ends_with("-cloud") && !abi.ends_with("-rt")
}

/// The parts a split image pins in its `Depends`: `linux-binary-<abi>`,
/// `linux-modules-<abi>`, `linux-base-<abi>`, each `(= version)`, as
/// `name=version`. Empty for an image that holds the kernel itself.
fn split_parts(image: &str, depends: &str) -> Vec<String> {
    let Some(abi) = image.strip_prefix("linux-image-") else {
        return Vec::new();
    };
    depends
        .split(',')
        .flat_map(|d| d.split('|'))
        .filter_map(|d| {
            let (name, rest) = d.trim().split_once(' ')?;
            let version = rest.trim().strip_prefix("(=")?.strip_suffix(')')?.trim();
            ["linux-binary-", "linux-modules-", "linux-base-"]
                .iter()
                .any(|p| name.strip_prefix(p) == Some(abi))
                .then(|| format!("{name}={version}"))
        })
        .collect()
}

/// Debian version order, by `dpkg --compare-versions`.
fn version_gt(a: &str, b: &str) -> bool {
    Command::new("dpkg")
        .args(["--compare-versions", a, "gt", b])
        .status()
        .is_ok_and(|s| s.success())
}

fn sha256(path: &Path) -> anyhow::Result<String> {
    let out = output(Command::new("sha256sum").arg(path))?;
    Ok(out.split_whitespace().next().unwrap_or_default().to_string())
}

/// apt-get download's file name stem: the epoch's colon is escaped.
fn stem(c: &Candidate) -> String {
    format!("{}_{}_amd64", c.package, c.version.replace(':', "%3a"))
}

/// `c`'s .deb in `cache`, downloaded unless there and intact.
fn download(archive: &Archive, c: &Candidate, cache: &Path) -> anyhow::Result<PathBuf> {
    let deb = cache.join(format!("{}.deb", stem(c)));
    let intact = |deb: &Path| -> anyhow::Result<bool> {
        Ok(fs::metadata(deb).is_ok_and(|m| m.len() == c.size) && sha256(deb)? == c.sha256)
    };
    if intact(&deb)? {
        return Ok(deb);
    }
    println!(
        "==> apt-get download {}={} (into {})",
        c.package,
        c.version,
        cache.display()
    );
    let _ = fs::remove_file(&deb);
    let mut cmd = archive.cmd("apt-get");
    cmd.arg("download")
        .arg(format!("{}={}", c.package, c.version))
        .current_dir(cache);
    util::run(&mut cmd)?;
    if !intact(&deb)? {
        bail!(
            "{} does not match the archive's size and SHA256 for {} {}",
            deb.display(),
            c.package,
            c.version
        );
    }
    Ok(deb)
}

/// Chooses, downloads (unless cached and intact) and unpacks the kernel
/// for `spec`. Private apts live under `apt_dir`; `update` fetches their
/// lists again.
pub fn fetch(spec: &str, cache: &Path, apt_dir: &Path, update: bool) -> anyhow::Result<Kernel> {
    let parsed = source::parse(spec)?;
    let archive = Archive::open(parsed.suite.as_deref(), apt_dir, update)?;
    let image = choose(&archive, spec, &parsed.what)?;
    let mut all = vec![image.clone()];
    for part in split_parts(&image.package, &image.depends) {
        let found = show(&archive, std::slice::from_ref(&part))?;
        all.push(
            found
                .into_iter()
                .next()
                .with_context(|| format!("{} depends on {part}, which apt does not offer", image.package))?,
        );
    }
    fs::create_dir_all(cache).with_context(|| format!("cannot create {}", cache.display()))?;
    let mut debs = Vec::new();
    for c in &all {
        debs.push(download(&archive, c, cache)?);
    }

    // One directory for all the parts; the marker says which were unpacked.
    let dir = cache.join(stem(&image));
    let marker = dir.join(".graceful-parts");
    let names = all.iter().map(stem).collect::<Vec<_>>().join("\n") + "\n";
    if fs::read_to_string(&marker).ok().as_deref() != Some(names.as_str()) {
        let tmp = cache.join(format!("{}.partial", stem(&image)));
        let _ = fs::remove_dir_all(&tmp);
        for deb in &debs {
            util::run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&tmp))?;
        }
        fs::write(tmp.join(".graceful-parts"), &names)?;
        let _ = fs::remove_dir_all(&dir);
        fs::rename(&tmp, &dir)?;
    }
    let (release, vmlinuz, modules_dir, config) = locate(&dir).with_context(|| {
        format!(
            "{} {} unpacked into {}",
            image.package,
            image.version,
            dir.display()
        )
    })?;
    let config = fs::read_to_string(config).unwrap_or_default();
    Ok(Kernel {
        spec: spec.to_string(),
        package: image.package.clone(),
        version: image.version.clone(),
        sha256: image.sha256.clone(),
        parts: all
            .into_iter()
            .map(|c| Part {
                package: c.package,
                version: c.version,
                sha256: c.sha256,
            })
            .collect(),
        btf_config: config.lines().any(|l| l == "CONFIG_DEBUG_INFO_BTF=y"),
        release,
        vmlinuz,
        dir,
        modules_dir,
    })
}

/// The release, vmlinuz, modules directory and config in an unpacked
/// kernel: `boot/vmlinuz-<release>` and `lib/modules/<release>` (bookworm,
/// trixie, bullseye), or `usr/lib/modules/<release>/{vmlinuz,config}` (sid's split packages).
fn locate(dir: &Path) -> anyhow::Result<(String, PathBuf, PathBuf, PathBuf)> {
    let modules = |release: &str| {
        ["lib/modules", "usr/lib/modules"]
            .iter()
            .map(|m| dir.join(m).join(release))
            .find(|d| d.join("kernel").is_dir())
            .with_context(|| format!("no lib/modules/{release}/kernel or usr/lib/modules/{release}/kernel"))
    };
    let boot = fs::read_dir(dir.join("boot")).into_iter().flatten().flatten();
    if let Some(vmlinuz) = boot.map(|e| e.path()).find(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
    }) {
        let release = vmlinuz.file_name().unwrap().to_string_lossy()["vmlinuz-".len()..].to_string();
        let config = dir.join(format!("boot/config-{release}"));
        return Ok((release.clone(), vmlinuz, modules(&release)?, config));
    }
    let under = dir.join("usr/lib/modules");
    let release = fs::read_dir(&under)
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| e.path().join("vmlinuz").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .context("no boot/vmlinuz-* and no usr/lib/modules/*/vmlinuz")?;
    let m = modules(&release)?;
    Ok((
        release.clone(),
        under.join(&release).join("vmlinuz"),
        m,
        under.join(&release).join("config"),
    ))
}

#[cfg(test)]
mod tests;
