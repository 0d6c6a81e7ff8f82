//! The memory bench's cgroups: found on the cgroup2 mount, created, and
//! removed on drop (after their processes are gone).

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{bail, Context as _};

/// The cgroup2 mount point, from `/proc/self/mountinfo`.
pub fn mount_point() -> anyhow::Result<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    for line in info.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if right.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        if let Some(mp) = left.split_whitespace().nth(4) {
            return Ok(PathBuf::from(mp.replace("\\040", " ")));
        }
    }
    bail!("no cgroup2 mount in /proc/self/mountinfo")
}

/// Directories `<mount>/<prefix><i>`, removed on drop.
pub struct Cgroups {
    pub mount: PathBuf,
    pub dirs: Vec<PathBuf>,
}

impl Cgroups {
    /// Removes leftovers of an interrupted run, then creates `count` cgroups.
    pub fn create(prefix: &str, count: usize) -> anyhow::Result<Self> {
        let mount = mount_point()?;
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

/// rmdir, retried briefly: a cgroup stays busy until its last exited
/// process is fully released.
pub fn remove(dir: &Path) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) if tries < 100 => {
                let _ = e;
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
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
