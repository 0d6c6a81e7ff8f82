//! "After containers": waits until named containers of a pod have exited,
//! that is, until their cgroups are empty. The kernel notifies a change of
//! `cgroup.events` (`populated 1` → `populated 0`) through inotify, so
//! this wakes when it happens, not on a timer.

use std::{io, path::PathBuf};

use tokio::io::{unix::AsyncFd, Interest};

use crate::resolver::inotify::Inotify;

fn populated(dir: &std::path::Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|t| t.lines().any(|l| l.trim() == "populated 1"))
        // Gone: nothing runs there any more.
        .unwrap_or(false)
}

/// Resolves once no process runs in any of `dirs` (cgroup directories).
pub async fn all_exited(dirs: Vec<PathBuf>) -> io::Result<()> {
    let ino = Inotify::new()?;
    for d in &dirs {
        // A cgroup removed meanwhile has no file to watch: it has exited.
        let _ = ino.add_watch(&d.join("cgroup.events"), libc::IN_MODIFY | libc::IN_DELETE_SELF);
    }
    // SAFETY: the Inotify owns its fd, which outlives the registration.
    let fd = unsafe { AsyncFd::register_with_interest(ino, Interest::READABLE) }.map_err(io::Error::from)?;
    let mut buf = [0u8; 4096];
    loop {
        if !dirs.iter().any(|d| populated(d)) {
            return Ok(());
        }
        let mut guard = fd.readable().await?;
        match guard.get_inner().read(&mut buf) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => guard.clear_ready(),
            Err(e) => return Err(e),
        }
    }
}
