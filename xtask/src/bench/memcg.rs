//! A memory cgroup of the bench's own for the agent: what a DaemonSet's
//! memory limit has to hold. The kernel charges the agent's maps and every
//! socket's storage to the memory cgroup of the process that created the
//! maps, on top of the agent's own RSS, so RSS alone undersizes the limit.
//!
//! cgroup v2 when its root hands the memory controller down, else the v1
//! memory hierarchy (this machine's hybrid layout). Removed on drop, once
//! the agent is stopped.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use super::cgroup::remove;

const NAME: &str = "graceful-bench-agent";

pub struct AgentMemcg {
    dir: PathBuf,
    v2: bool,
}

impl AgentMemcg {
    pub fn create() -> anyhow::Result<Self> {
        let (root, v2) = memory_root()?;
        let dir = root.join(NAME);
        // A leftover of an interrupted run: empty by now, or its rmdir fails
        // and says which cgroup holds processes.
        if dir.exists() {
            remove(&dir).with_context(|| format!("remove {} left by an earlier run", dir.display()))?;
        }
        std::fs::create_dir(&dir).with_context(|| format!("create memory cgroup {}", dir.display()))?;
        Ok(Self { dir, v2 })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Everything charged to the cgroup, in bytes: the agent's memory and
    /// the kernel memory it was charged for.
    pub fn charged(&self) -> anyhow::Result<u64> {
        self.read(if self.v2 {
            "memory.current"
        } else {
            "memory.usage_in_bytes"
        })
    }

    /// The most ever charged to the cgroup, in bytes: what a limit must hold.
    pub fn peak(&self) -> anyhow::Result<u64> {
        self.read(if self.v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        })
    }

    /// The kernel memory part of [`AgentMemcg::charged`], in bytes.
    pub fn kernel(&self) -> anyhow::Result<u64> {
        if !self.v2 {
            return self.read("memory.kmem.usage_in_bytes");
        }
        let stat = std::fs::read_to_string(self.dir.join("memory.stat"))?;
        stat.lines()
            .find_map(|l| l.strip_prefix("kernel ").and_then(|v| v.trim().parse().ok()))
            .context("no `kernel` line in memory.stat")
    }

    pub fn version(&self) -> &'static str {
        if self.v2 {
            "v2"
        } else {
            "v1"
        }
    }

    fn read(&self, file: &str) -> anyhow::Result<u64> {
        let path = self.dir.join(file);
        std::fs::read_to_string(&path)
            .with_context(|| format!("read {}", path.display()))?
            .trim()
            .parse()
            .with_context(|| format!("parse {}", path.display()))
    }
}

impl Drop for AgentMemcg {
    fn drop(&mut self) {
        if let Err(e) = remove(&self.dir) {
            eprintln!("cleanup: cannot remove {}: {e}", self.dir.display());
        }
    }
}

/// Where a memory cgroup can be made: the cgroup2 root if it hands the
/// memory controller to its children, else the v1 memory hierarchy.
fn memory_root() -> anyhow::Result<(PathBuf, bool)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mut v1 = None;
    for line in info.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mut r = right.split_whitespace();
        let (fstype, options) = (r.next(), r.nth(1));
        let Some(mount) = left
            .split_whitespace()
            .nth(4)
            .map(|m| PathBuf::from(m.replace("\\040", " ")))
        else {
            continue;
        };
        match fstype {
            Some("cgroup2") => {
                let delegated = std::fs::read_to_string(mount.join("cgroup.subtree_control"))
                    .is_ok_and(|s| s.split_whitespace().any(|c| c == "memory"));
                if delegated {
                    return Ok((mount, true));
                }
            }
            Some("cgroup") if options.is_some_and(|o| o.split(',').any(|x| x == "memory")) => {
                v1.get_or_insert(mount);
            }
            _ => {}
        }
    }
    match v1 {
        Some(m) => Ok((m, false)),
        None => bail!("no memory cgroup controller: neither a cgroup2 root that delegates memory nor a v1 memory hierarchy"),
    }
}
