//! An OOM kill of the agent must not take its keeper along. On cgroup v2,
//! which current nodes run, the kubelet sets `memory.oom.group=1` on every
//! container (1.37's `kuberuntime_container_linux.go`, unless the node
//! says `singleProcessOOMKill`): the kernel's OOM killer then kills every
//! process of the container, the keeper with the agent, and every hook it
//! held is cut. The keeper sets its own container's `memory.oom.group` back
//! to 0 as it starts: the OOM killer then kills only the largest process
//! (the agent, several times the keeper's size), the keeper starts it
//! again with every listener and held hook kept, and the container's
//! `memory.max` still bounds both.
//!
//! The alternative, the keeper's `oom_score_adj` at -1000 (which the group
//! kill spares), needs `CAP_SYS_RESOURCE`, a capability the agent has no
//! other use for; this needs none it lacks: `CAP_SYS_ADMIN` (it has it) to
//! enter the node's cgroup namespace (a container's own refuses writes to
//! its root's files) and, where the host's cgroup tree is mounted read-only
//! into the container, to mount one of its own for the one write.

use std::{io, path::Path};

/// What the keeper found of its container's group kill.
#[derive(Debug, PartialEq, Eq)]
pub enum Spared {
    /// `memory.oom.group` was 1, and is 0 now (the container's cgroup).
    Set(String),
    /// It was 0 already.
    AlreadyOff,
    /// There is no group kill here: cgroup v1, or no memory controller on
    /// cgroup v2 (a hybrid host).
    NoGroupKill,
}

/// Sets the calling process's container's `memory.oom.group` to 0, using
/// `scratch` (a writable directory) for a mount of its own if the
/// hierarchy is mounted read-only. On a thread of its own: the namespace
/// it enters is that thread's alone.
pub fn spare_the_keeper(scratch: &Path) -> io::Result<Spared> {
    let scratch = scratch.to_path_buf();
    std::thread::spawn(move || {
        // From the node's cgroup namespace: paths from the top, and writes
        // a container's own namespace refuses at its root.
        let _ = crate::kernel::cgroupfs::enter_nodes_namespace();
        let own = own_cgroup()?;
        let mount = crate::kernel::cgroupfs::mount_point().map_err(io::Error::other)?;
        let file = mount.join(own.trim_start_matches('/')).join("memory.oom.group");
        match std::fs::read_to_string(&file) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Spared::NoGroupKill),
            Err(e) => return Err(e),
            Ok(v) if v.trim() == "0" => return Ok(Spared::AlreadyOff),
            Ok(_) => {}
        }
        match std::fs::write(&file, "0") {
            Ok(()) => Ok(Spared::Set(own)),
            Err(e) if e.raw_os_error() == Some(libc::EROFS) => write_through_own_mount(&scratch, &own),
            Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", file.display()))),
        }
    })
    .join()
    .unwrap_or_else(|_| Err(io::Error::other("the thread setting memory.oom.group panicked")))
}

/// The calling thread's cgroup (v2), as its namespace shows it.
fn own_cgroup() -> io::Result<String> {
    let text = std::fs::read_to_string("/proc/thread-self/cgroup")?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no cgroup v2 membership"))
}

/// The write through a cgroup2 mount of its own at `scratch/.cgroup2-PID`,
/// made, used and taken away again.
fn write_through_own_mount(scratch: &Path, own: &str) -> io::Result<Spared> {
    use std::ffi::CString;
    let dir = scratch.join(format!(".cgroup2-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let c = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).map_err(io::Error::other);
    let target = c(&dir)?;
    let fs = CString::new("cgroup2").expect("no NUL");
    // SAFETY: mount(2) with valid C strings and no data.
    let rc = unsafe {
        libc::mount(
            fs.as_ptr(),
            target.as_ptr(),
            fs.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    let result = if rc != 0 {
        Err(io::Error::last_os_error())
    } else {
        let file = dir.join(own.trim_start_matches('/')).join("memory.oom.group");
        let w = std::fs::write(&file, "0");
        // SAFETY: umount2(2) of the mount made above.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        w.map(|()| Spared::Set(own.to_string()))
    };
    let _ = std::fs::remove_dir(&dir);
    result.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("memory.oom.group through a mount at {}: {e}", dir.display()),
        )
    })
}
