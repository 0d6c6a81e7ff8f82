//! Where a kernel package comes from: the machine's own apt sources
//! (bookworm and bookworm-security on this image), or one other Debian
//! suite through a private apt of ours (`debian::PrivateApt`), so that
//! trixie's, sid's or bullseye's kernels are fetched without touching the
//! machine's apt configuration.

use std::{path::Path, process::Command};

use anyhow::Context as _;

use crate::debian::{PrivateApt, ARCHIVE};

/// Debian's security archive; sid has none.
const SECURITY: &str = "http://deb.debian.org/debian-security";

/// `--kernel`'s value: `[<suite>:]<series or package>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// A Debian suite (`trixie`, `sid`, `bullseye`); none: the machine's apt.
    pub suite: Option<String>,
    /// A series such as `6.12`, or an exact package name.
    pub what: String,
}

pub fn parse(spec: &str) -> anyhow::Result<Spec> {
    let (suite, what) = match spec.split_once(':') {
        Some((s, w)) => (Some(s), w),
        None => (None, spec),
    };
    if let Some(s) = suite {
        anyhow::ensure!(
            !s.is_empty() && s.bytes().all(|c| c.is_ascii_lowercase() || c == b'-'),
            "--kernel {spec:?}: the part before ':' is a Debian suite, such as trixie, sid or bullseye"
        );
    }
    anyhow::ensure!(!what.is_empty(), "--kernel {spec:?} names no series or package");
    Ok(Spec {
        suite: suite.map(str::to_string),
        what: what.to_string(),
    })
}

/// The sources.list lines for `suite`: the suite and, but for sid, its
/// security updates (where bookworm's and trixie's newest kernels are).
pub fn sources(suite: &str) -> Vec<String> {
    let mut lines = vec![format!("deb {ARCHIVE} {suite} main")];
    if !matches!(suite, "sid" | "unstable" | "experimental") {
        lines.push(format!("deb {SECURITY} {suite}-security main"));
    }
    lines
}

/// The apt that answers for one spec.
pub enum Archive {
    Machine,
    Suite { name: String, apt: PrivateApt },
}

impl Archive {
    /// The machine's apt, or a private one under `dir/<suite>` (its lists
    /// fetched on first use, and again when `update`).
    pub fn open(suite: Option<&str>, dir: &Path, update: bool) -> anyhow::Result<Archive> {
        let Some(name) = suite else {
            return Ok(Archive::Machine);
        };
        let apt = PrivateApt::new(&dir.join(name), &sources(name))
            .with_context(|| format!("a private apt for Debian {name}"))?;
        if update {
            apt.update()?;
        }
        Ok(Archive::Suite {
            name: name.to_string(),
            apt,
        })
    }

    /// `program` (apt-get, apt-cache) with this archive's sources.
    pub fn cmd(&self, program: &str) -> Command {
        match self {
            Archive::Machine => {
                let mut cmd = Command::new(program);
                // Fetch as root into our cache: the _apt user cannot write it.
                cmd.args(["-q", "-o", "APT::Sandbox::User=root"]);
                cmd
            }
            Archive::Suite { apt, .. } => apt.cmd(program),
        }
    }

    /// Where to look when a package is missing.
    pub fn hint(&self) -> String {
        match self {
            Archive::Machine => "check that /etc/apt/sources.list has bookworm and bookworm-security, \
                                 then run `apt-get update` (or pass --apt-update)"
                .into(),
            Archive::Suite { name, .. } => format!(
                "the private sources list for {name} ({}) offers none; pass --apt-update to fetch its lists again",
                sources(name).join("; ")
            ),
        }
    }
}
