//! Real cgroup v2 directories, removed (with everything in them) on drop.

use std::{
    fs::OpenOptions,
    os::{fd::AsRawFd as _, unix::fs::MetadataExt, unix::process::CommandExt as _},
    path::{Path, PathBuf},
    process::Command,
};

/// The cgroup2 mount, from /proc/self/mountinfo.
pub fn mount() -> PathBuf {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .expect("no cgroup2 mount: these tests need cgroup v2")
}

pub struct Cgroup {
    dir: PathBuf,
    /// Relative to the mount, starting with `/`.
    rel: String,
    /// Directories this guard created, innermost last.
    created: Vec<PathBuf>,
}

impl Cgroup {
    /// A new cgroup at `rel` (relative to the mount), creating parents as needed.
    pub fn create(rel: &str) -> Cgroup {
        let mount = mount();
        let rel = format!("/{}", rel.trim_start_matches('/'));
        let mut created = Vec::new();
        let mut dir = mount.clone();
        for part in rel.trim_start_matches('/').split('/') {
            dir.push(part);
            if !dir.exists() {
                std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
                created.push(dir.clone());
            }
        }
        Cgroup { dir, rel, created }
    }

    /// A new top-level test cgroup with a unique name.
    pub fn unique(kind: &str) -> Cgroup {
        Self::create(&crate::unique(kind))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self) -> &str {
        &self.rel
    }

    /// The cgroup id: the directory's inode.
    pub fn id(&self) -> u64 {
        std::fs::metadata(&self.dir).unwrap().ino()
    }

    fn kill_all(dir: &Path) {
        // cgroup.kill (5.14+) kills every process below at once.
        let _ = std::fs::write(dir.join("cgroup.kill"), "1");
        for _ in 0..200 {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            let populated = std::fs::read_to_string(dir.join("cgroup.events"))
                .map(|e| e.contains("populated 1"))
                .unwrap_or(false);
            if procs.trim().is_empty() && !populated {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        Self::kill_all(&self.dir);
        for dir in self.created.iter().rev() {
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

/// Makes `cmd`'s process join the cgroup `dir` (v1 or v2) between fork and
/// exec, before it runs a line of its own. The file is opened here; the
/// child only writes "0" (itself) to it.
pub fn start_in(cmd: &mut Command, dir: &Path) {
    let procs = dir.join("cgroup.procs");
    let file = OpenOptions::new()
        .write(true)
        .open(&procs)
        .unwrap_or_else(|e| panic!("open {}: {e}", procs.display()));
    // SAFETY: the closure only calls write(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::write(file.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
