//! The demo's cgroups: created under the cgroup2 mount, removed again.

use std::{
    fs,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};

/// Where cgroup2 is mounted, from /proc/self/mountinfo: `/sys/fs/cgroup` on
/// most machines, `/sys/fs/cgroup/unified` on hybrid hosts.
pub fn mount_point() -> anyhow::Result<PathBuf> {
    let text = fs::read_to_string("/proc/self/mountinfo").context("cannot read /proc/self/mountinfo")?;
    for line in text.lines() {
        // id parent maj:min root mountpoint opts [optional...] - fstype source superopts
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split_whitespace().collect();
        if right.split_whitespace().next() == Some("cgroup2") && fields.len() >= 5 && fields[3] == "/" {
            return Ok(PathBuf::from(fields[4].replace("\\040", " ")));
        }
    }
    bail!("no cgroup2 filesystem is mounted: graceful needs cgroup v2 (mount one with `mount -t cgroup2 none /sys/fs/cgroup/unified`)")
}

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

    /// Removes every cgroup made, deepest first. A cgroup can stay busy for
    /// a moment after its last process exits, so each is retried briefly.
    /// Returns one line per cgroup.
    pub fn remove_all(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(dir) = self.dirs.pop() {
            let start = Instant::now();
            let result = loop {
                match fs::remove_dir(&dir) {
                    Ok(()) => break Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break Ok(()),
                    Err(e) if start.elapsed() < Duration::from_secs(3) => {
                        let _ = e;
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(e) => break Err(e),
                }
            };
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
