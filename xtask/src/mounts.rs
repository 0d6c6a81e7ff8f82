//! This process's mounts, from `/proc/self/mountinfo`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub point: PathBuf,
    pub fstype: String,
    /// The optional fields: `shared:N`, `master:N`, ... (empty: private).
    pub optional: Vec<String>,
}

impl Mount {
    pub fn is_shared(&self) -> bool {
        self.optional.iter().any(|o| o.starts_with("shared:"))
    }
}

/// mountinfo's octal escapes (`\040` for a space) decoded.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if let (b'\\', Some(d)) = (b[i], octal) {
            let v = u32::from(d[0] - b'0') * 64 + u32::from(d[1] - b'0') * 8 + u32::from(d[2] - b'0');
            out.push(v as u8);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn parse(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dash = f.iter().position(|x| *x == "-")?;
            Some(Mount {
                point: PathBuf::from(unescape(f.get(4)?)),
                fstype: f.get(dash + 1)?.to_string(),
                optional: f.get(6..dash)?.iter().map(|s| s.to_string()).collect(),
            })
        })
        .collect()
}

pub fn all() -> anyhow::Result<Vec<Mount>> {
    Ok(parse(
        &std::fs::read_to_string("/proc/self/mountinfo").context("cannot read /proc/self/mountinfo")?,
    ))
}

/// The topmost mount at `point`, if any.
pub fn at(point: &Path) -> Option<Mount> {
    all().ok()?.into_iter().rev().find(|m| m.point == point)
}

/// Where cgroup2 is mounted: `/sys/fs/cgroup`, or `/sys/fs/cgroup/unified`
/// on hybrid hosts.
pub fn cgroup2() -> anyhow::Result<PathBuf> {
    all()?
        .into_iter()
        .find(|m| m.fstype == "cgroup2")
        .map(|m| m.point)
        .context("no cgroup2 mount in /proc/self/mountinfo")
}

#[cfg(test)]
mod tests;
