//! The cgroup v2 hierarchy: where it is mounted, and cgroup id ↔ path.
//!
//! A cgroup's id is the inode number of its directory on the cgroup2 mount.
//! The mount is read from /proc/self/mountinfo: `/sys/fs/cgroup` on most
//! nodes, `/sys/fs/cgroup/unified` on hybrid hosts. Where in it the
//! kubelet's pods may be is [`roots`].

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

pub use graceful_common::mountinfo::{mounts, Mount};

pub mod roots;

use roots::PodRoots;

/// Enters the node's cgroup namespace (pid 1's, seen with `hostPID`), so
/// that `/proc/<pid>/cgroup` reads as paths from the hierarchy's top, as
/// the pod cgroup roots are written: a container's own namespace shows
/// other pods as `/../..` paths, and where in the tree they sit could not
/// be told. Call before any thread starts: every thread made after
/// inherits it. Already in the initial namespace (a host process, or a
/// pod on a node whose runtime makes none), there is nothing to enter and
/// pid 1's namespace is not even opened: a host where pid 1 cannot be
/// traced refuses that open.
pub fn enter_nodes_namespace() -> io::Result<()> {
    use std::os::fd::AsRawFd;
    /// The initial cgroup namespace's inode (the kernel's
    /// `PROC_CGROUP_INIT_INO`): fixed, on every kernel with cgroup namespaces.
    const INITIAL: u64 = 0xEFFF_FFFB;
    if std::fs::metadata("/proc/self/ns/cgroup").is_ok_and(|m| m.ino() == INITIAL) {
        return Ok(());
    }
    let ns = std::fs::File::open("/proc/1/ns/cgroup")?;
    // SAFETY: setns on an open namespace file, for this (the only) thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWCGROUP) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Where cgroup2 is mounted.
pub fn mount_point() -> Result<PathBuf, CgroupError> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").map_err(CgroupError::MountInfo)?;
    graceful_common::mountinfo::cgroup2(&text).ok_or(CgroupError::NoCgroup2)
}

/// The cgroup2 hierarchy, from one mount, and where in it the kubelet
/// makes pods.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    mount: PathBuf,
    roots: PodRoots,
}

impl Hierarchy {
    pub fn discover() -> Result<Self, CgroupError> {
        Ok(Self::at(mount_point()?))
    }

    pub fn at(mount: impl Into<PathBuf>) -> Self {
        Self {
            mount: mount.into(),
            roots: PodRoots::default(),
        }
    }

    /// The same hierarchy, its pods under `roots`.
    pub fn with_pod_roots(self, roots: PodRoots) -> Self {
        Self { roots, ..self }
    }

    pub fn mount(&self) -> &Path {
        &self.mount
    }

    /// Where its pod cgroups may be.
    pub fn pod_roots(&self) -> &PodRoots {
        &self.roots
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
