//! The cgroup v2 hierarchy: where it is mounted, and cgroup id ↔ path.
//!
//! A cgroup's id is the inode number of its directory on the cgroup2 mount.
//! The mount is read from /proc/self/mountinfo: `/sys/fs/cgroup` on most
//! nodes, `/sys/fs/cgroup/unified` on hybrid hosts.

use std::{
    collections::HashMap,
    io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no cgroup2 filesystem is mounted (cgroup v1 only?): graceful needs cgroup v2, boot with systemd.unified_cgroup_hierarchy=1 or mount one with `mount -t cgroup2 none /sys/fs/cgroup/unified`")]
    NoCgroup2,
    #[error("cannot read /proc/self/mountinfo: {0}")]
    MountInfo(#[source] io::Error),
    #[error("cgroup {path} does not exist under the cgroup2 mount {mount}")]
    NoSuchCgroup { path: String, mount: PathBuf },
}

/// Where cgroup2 is mounted.
pub fn mount_point() -> Result<PathBuf, CgroupError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").map_err(CgroupError::MountInfo)?;
    parse_mountinfo(&text).ok_or(CgroupError::NoCgroup2)
}

/// The first cgroup2 mount in a mountinfo text. Its root must be `/`: a
/// mount of a sub-tree (inside a container) would give ids relative to the
/// wrong place.
pub fn parse_mountinfo(text: &str) -> Option<PathBuf> {
    let mut fallback = None;
    for m in mounts(text).filter(|m| m.fstype == "cgroup2") {
        if m.root == "/" {
            return Some(m.mount_point);
        }
        fallback.get_or_insert(m.mount_point);
    }
    fallback
}

/// One line of a mountinfo text (proc(5)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The mount's id, unique on the system: a mount namespace made as a
    /// copy of another gets new mounts, with new ids.
    pub id: u64,
    /// `major:minor` of the filesystem, the `st_dev` of the files on it:
    /// two mounts of one superblock (a bind mount, or the same bpffs seen
    /// from two mount namespaces) have the same.
    pub dev: String,
    /// The directory of the filesystem mounted here (`/` unless a sub-tree).
    pub root: String,
    pub mount_point: PathBuf,
    /// Propagation: `shared:N`, `master:N`, `propagate_from:N`,
    /// `unbindable`; none for a private mount.
    pub optional: Vec<String>,
    pub fstype: String,
}

/// Every mount of a mountinfo text, in its order: a later mount on the same
/// point covers the earlier ones. The crate's one mountinfo parser.
pub fn mounts(text: &str) -> impl Iterator<Item = Mount> + '_ {
    text.lines().filter_map(|line| {
        // id parent maj:min root mountpoint opts [optional...] - fstype source superopts
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split_whitespace().collect();
        if fields.len() < 5 {
            return None;
        }
        Some(Mount {
            id: fields[0].parse().ok()?,
            dev: fields[2].to_string(),
            root: unescape(fields[3]),
            mount_point: PathBuf::from(unescape(fields[4])),
            optional: fields
                .get(6..)
                .unwrap_or_default()
                .iter()
                .map(|f| f.to_string())
                .collect(),
            fstype: right.split_whitespace().next()?.to_string(),
        })
    })
}

/// mountinfo escapes spaces, tabs, newlines and backslashes as octal.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup2 hierarchy, from one mount.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    mount: PathBuf,
}

impl Hierarchy {
    pub fn discover() -> Result<Self, CgroupError> {
        Ok(Self {
            mount: mount_point()?,
        })
    }

    pub fn at(mount: impl Into<PathBuf>) -> Self {
        Self { mount: mount.into() }
    }

    pub fn mount(&self) -> &Path {
        &self.mount
    }

    /// The absolute directory of a cgroup path such as `/kubepods.slice/x`.
    pub fn dir(&self, rel: &str) -> PathBuf {
        self.mount.join(rel.trim_start_matches('/'))
    }

    /// The id of the cgroup at `rel` (relative to the mount, starting with `/`).
    pub fn id_of(&self, rel: &str) -> Result<u64, CgroupError> {
        let dir = self.dir(rel);
        std::fs::metadata(&dir)
            .map(|m| m.ino())
            .map_err(|_| CgroupError::NoSuchCgroup {
                path: rel.to_string(),
                mount: self.mount.clone(),
            })
    }

    /// Every cgroup's id and path (relative, starting with `/`). Cgroups
    /// that vanish during the walk are skipped.
    pub fn walk(&self) -> HashMap<u64, String> {
        let mut out = HashMap::new();
        let mut stack = vec![self.mount.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(meta) = std::fs::metadata(&dir) else {
                continue;
            };
            out.insert(meta.ino(), self.relative(&dir));
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
        out
    }

    /// `dir` relative to the mount, with a leading `/`.
    pub fn relative(&self, dir: &Path) -> String {
        let rel = dir.strip_prefix(&self.mount).unwrap_or(dir);
        format!("/{}", rel.to_string_lossy())
    }

    /// The cgroup path of a process, from /proc/<pid>/cgroup (the `0::` line).
    pub fn of_pid(pid: u32) -> io::Result<String> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
        text.lines()
            .find_map(|l| l.strip_prefix("0::"))
            .map(str::to_string)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "process has no cgroup v2 membership"))
    }
}

#[cfg(test)]
mod tests;
