//! cgroup v2 directories: found on the cgroup2 mount, made, emptied and
//! removed; and processes started inside one from their first instruction.

use std::{
    fs::OpenOptions,
    io::{self, Write as _},
    os::unix::{fs::MetadataExt, process::CommandExt as _},
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

/// The cgroup2 mount: `/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on
/// hybrid hosts.
pub fn mount() -> io::Result<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")?;
    crate::mountinfo::cgroup2(&text).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "no cgroup2 mount in /proc/self/mountinfo",
        )
    })
}

/// A cgroup made by this guard: its missing parents too. Dropping it kills
/// what runs inside and removes the directories it made, innermost first.
pub struct Cgroup {
    dir: PathBuf,
    /// Relative to the mount, starting with `/`.
    rel: String,
    created: Vec<PathBuf>,
}

impl Cgroup {
    /// The cgroup at `rel` (relative to the mount), made with its parents.
    pub fn create(rel: &str) -> io::Result<Cgroup> {
        let mount = mount()?;
        let rel = format!("/{}", rel.trim_start_matches('/'));
        let mut created = Vec::new();
        let mut dir = mount;
        for part in rel.trim_start_matches('/').split('/') {
            dir.push(part);
            if !dir.exists() {
                std::fs::create_dir(&dir)
                    .map_err(|e| io::Error::new(e.kind(), format!("mkdir {}: {e}", dir.display())))?;
                created.push(dir.clone());
            }
        }
        Ok(Cgroup { dir, rel, created })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path as graceful reports it: relative to the mount, with a leading `/`.
    pub fn path(&self) -> &str {
        &self.rel
    }

    /// The cgroup id: the directory's inode number.
    pub fn id(&self) -> u64 {
        std::fs::metadata(&self.dir).map(|m| m.ino()).unwrap_or(0)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        kill_all(&self.dir);
        for dir in self.created.iter().rev() {
            if let Err(e) = remove(dir) {
                eprintln!("cleanup: cannot remove {}: {e}", dir.display());
            }
        }
    }
}

/// Kills every process in `dir` and below (`cgroup.kill`, Linux 5.14+), and
/// waits (2 s at most) until it is empty.
pub fn kill_all(dir: &Path) {
    let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    for _ in 0..200 {
        if !populated(dir) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a process runs in `dir` or below (a missing cgroup: no).
pub fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|e| e.lines().any(|l| l.trim() == "populated 1"))
        .unwrap_or(false)
}

/// rmdir, retried for 2 s: a cgroup stays busy until its last exited
/// process is fully released. A cgroup already gone is fine.
pub fn remove(dir: &Path) -> io::Result<()> {
    let mut tries = 0;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(_) if tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Makes `cmd`'s process join the cgroup `dir` (v1 or v2) between fork and
/// exec, so everything it does already belongs there. The file is opened
/// here; the child only writes "0" (itself) to it.
pub fn start_in(cmd: &mut Command, dir: &Path) -> io::Result<()> {
    let procs = dir.join("cgroup.procs");
    let file = OpenOptions::new()
        .write(true)
        .open(&procs)
        .map_err(|e| io::Error::new(e.kind(), format!("open {}: {e}", procs.display())))?;
    // SAFETY: the closure only calls write(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || (&file).write_all(b"0"));
    }
    Ok(())
}

/// The pids in `dir` and every cgroup below it.
pub fn pids_in(dir: &Path) -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(t) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(t.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(rd.flatten().filter(|e| e.path().is_dir()).map(|e| e.path()));
        }
    }
    out
}
