//! The memory bench's cgroups: found on the cgroup2 mount, created, and
//! removed on drop (after their processes are gone).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use graceful_test_support::cgroup::remove;

/// Directories `<mount>/<prefix><i>`, removed on drop.
pub struct Cgroups {
    pub mount: PathBuf,
    pub dirs: Vec<PathBuf>,
}

impl Cgroups {
    /// Removes leftovers of an interrupted run, then creates `count` cgroups.
    pub fn create(prefix: &str, count: usize) -> anyhow::Result<Self> {
        let mount = crate::mounts::cgroup2()?;
        for entry in std::fs::read_dir(&mount)? {
            let path = entry?.path();
            if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
            {
                remove(&path).with_context(|| {
                    format!(
                        "remove {} left by an earlier run (are its processes still alive?)",
                        path.display()
                    )
                })?;
            }
        }
        let mut cg = Self {
            mount,
            dirs: Vec::with_capacity(count),
        };
        for i in 0..count {
            let dir = cg.mount.join(format!("{prefix}{i}"));
            std::fs::create_dir(&dir).with_context(|| format!("create cgroup {}", dir.display()))?;
            cg.dirs.push(dir);
        }
        Ok(cg)
    }

    /// The cgroup's path as graceful reports it: relative to the mount, with a leading `/`.
    pub fn relative(&self, dir: &Path) -> String {
        format!("/{}", dir.strip_prefix(&self.mount).unwrap_or(dir).display())
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        for dir in self.dirs.drain(..) {
            if let Err(e) = remove(&dir) {
                eprintln!("cleanup: cannot remove {}: {e}", dir.display());
            }
        }
    }
}
