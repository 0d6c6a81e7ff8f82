//! The demo's cgroups: created under the cgroup2 mount, removed again.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::Context as _;

/// The cgroups the demo made, in creation order, so it removes exactly those.
#[derive(Debug, Default)]
pub struct Created {
    pub dirs: Vec<PathBuf>,
}

impl Created {
    /// Creates `rel` (relative to `mount`, starting with `/`) and any missing
    /// parents; returns the absolute path.
    pub fn create(&mut self, mount: &Path, rel: &str) -> anyhow::Result<PathBuf> {
        let mut dir = mount.to_path_buf();
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            dir.push(part);
            if !dir.exists() {
                fs::create_dir(&dir).with_context(|| format!("cannot create cgroup {}", dir.display()))?;
                self.dirs.push(dir.clone());
            }
        }
        Ok(dir)
    }

    /// Removes every cgroup made, deepest first (each retried briefly: a
    /// cgroup stays busy for a moment after its last process exits).
    /// Returns one line per cgroup.
    pub fn remove_all(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(dir) = self.dirs.pop() {
            let result = graceful_test_support::cgroup::remove(&dir);
            lines.push(match result {
                Ok(()) => format!("removed cgroup {}", dir.display()),
                Err(e) => format!(
                    "could not remove cgroup {}: {e} (see its cgroup.procs)",
                    dir.display()
                ),
            });
        }
        lines
    }
}
