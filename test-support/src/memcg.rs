//! A memory cgroup for the agent under test: what a DaemonSet's memory
//! limit must hold. The kernel charges the agent's maps and every socket's
//! storage to the memory cgroup of the process that created the maps, on
//! top of its RSS.
//!
//! It is made where the agent looks for its own (graceful-common's
//! `mountinfo::memory_hierarchy`): the v1 memory hierarchy where memory is
//! accounted there (a hybrid host such as this one), else cgroup v2, with
//! the memory controller handed down from its root if it was not. Removed
//! on drop, once its processes are gone.

use std::{
    io,
    path::{Path, PathBuf},
};

/// What the OOM killer weighs a process by before its `oom_score_adj`,
/// in pages, as the kernel's `oom_badness` counts it: resident memory of
/// every kind (anonymous, file, shared), swap, and page tables. `pid` is a
/// number or `self`.
pub fn oom_weight(pid: &str) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: u64 = status
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| ["RssAnon", "RssFile", "RssShmem", "VmSwap", "VmPTE"].contains(k))
        .filter_map(|(_, v)| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
        .sum();
    Ok(kib / 4)
}

pub struct MemCgroup {
    dir: PathBuf,
    v2: bool,
}

fn err(what: String, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Where to make it, and whether that is cgroup v2.
fn root() -> io::Result<(PathBuf, bool)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let (mount, v2) = crate::mountinfo::memory_hierarchy(&info).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "no cgroup mount with a memory controller",
        )
    })?;
    if v2 {
        let control = mount.join("cgroup.subtree_control");
        let controllers = std::fs::read_to_string(&control).unwrap_or_default();
        if !controllers.split_whitespace().any(|c| c == "memory") {
            // A test machine's own root (the qemu guests): hand memory down.
            std::fs::write(&control, "+memory").map_err(|e| {
                err(
                    format!("enable the memory controller under {}", mount.display()),
                    e,
                )
            })?;
        }
    }
    Ok((mount, v2))
}

impl MemCgroup {
    /// The memory cgroup `name`; a leftover of an interrupted run is
    /// removed first (its rmdir fails, and says so, if it still holds
    /// processes).
    pub fn create(name: &str) -> io::Result<MemCgroup> {
        let (root, v2) = root()?;
        let dir = root.join(name);
        if dir.exists() {
            crate::cgroup::remove(&dir)
                .map_err(|e| err(format!("remove {} left by an earlier run", dir.display()), e))?;
        }
        std::fs::create_dir(&dir).map_err(|e| err(format!("create {}", dir.display()), e))?;
        Ok(MemCgroup { dir, v2 })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn version(&self) -> &'static str {
        if self.v2 {
            "v2"
        } else {
            "v1"
        }
    }

    fn file(&self, v2: &str, v1: &str) -> PathBuf {
        self.dir.join(if self.v2 { v2 } else { v1 })
    }

    fn read(&self, path: PathBuf) -> io::Result<u64> {
        let text = std::fs::read_to_string(&path).map_err(|e| err(format!("read {}", path.display()), e))?;
        text.trim()
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))
    }

    /// Bytes charged now: the processes' memory and the kernel memory they
    /// were charged for.
    pub fn usage(&self) -> io::Result<u64> {
        self.read(self.file("memory.current", "memory.usage_in_bytes"))
    }

    /// The most ever charged: what a limit must hold.
    pub fn peak(&self) -> io::Result<u64> {
        self.read(self.file("memory.peak", "memory.max_usage_in_bytes"))
    }

    /// The kernel memory part of [`MemCgroup::usage`].
    pub fn kernel(&self) -> io::Result<u64> {
        if !self.v2 {
            return self.read(self.dir.join("memory.kmem.usage_in_bytes"));
        }
        let stat = std::fs::read_to_string(self.dir.join("memory.stat"))?;
        stat.lines()
            .find_map(|l| l.strip_prefix("kernel ").and_then(|v| v.trim().parse().ok()))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no `kernel` line in memory.stat"))
    }

    /// The limit as the kernel keeps it (rounded to pages).
    pub fn limit(&self) -> io::Result<u64> {
        self.read(self.file("memory.max", "memory.limit_in_bytes"))
    }

    pub fn set_limit(&self, bytes: u64) -> io::Result<()> {
        let file = self.file("memory.max", "memory.limit_in_bytes");
        std::fs::write(&file, bytes.to_string()).map_err(|e| err(format!("write {}", file.display()), e))
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        if let Err(e) = crate::cgroup::remove(&self.dir) {
            eprintln!("cleanup: cannot remove {}: {e}", self.dir.display());
        }
    }
}
