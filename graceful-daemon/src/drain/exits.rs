//! "After containers": waits until named containers of a pod have exited,
//! that is, until their cgroups are empty.
//!
//! Two wake-ups, one truth. The kernel program `cgroup_populated` sends an
//! event the moment a watched cgroup's last process exits. inotify on
//! `cgroup.events` says the same, but up to 10 ms later (the kernel
//! rate-limits it) and from a workqueue; it stays as the fallback for a
//! kernel where the program cannot attach. Either only wakes this waiter:
//! the `populated` line of `cgroup.events` decides.
//!
//! Closing an inotify fd whose watches are still in place waits for an
//! SRCU grace period in the kernel: up to 15 ms measured here, spent after
//! the exit and before the release when it was closed on the way out. It is
//! closed off the release path instead ([`CloseLater`]).

use std::{
    io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use graceful_common::{event, watch, Event};
use tokio::{
    io::{unix::AsyncFd, Interest},
    sync::broadcast::{self, error::RecvError},
};

use crate::{kernel::bpf::Kernel, node::resolver::inotify::Inotify};

fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .map(|t| t.lines().any(|l| l.trim() == "populated 1"))
        // Gone: nothing runs there any more.
        .unwrap_or(false)
}

/// Closes the inotify fd on a blocking thread: see the module docs.
struct CloseLater(Option<AsyncFd<Inotify>>);

impl Drop for CloseLater {
    fn drop(&mut self) {
        let Some(fd) = self.0.take() else { return };
        // Deregister here, close there.
        let ino = fd.into_inner();
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(move || drop(ino))),
            Err(_) => drop(ino),
        }
    }
}

/// Waits for the next sign that one of `ids` emptied. Lagging behind the
/// ring counts as a sign: whatever was missed, the caller re-reads. With no
/// ring, never.
async fn emptied(rx: Option<&mut broadcast::Receiver<Event>>, ids: &[u64]) {
    let Some(rx) = rx else {
        return std::future::pending().await;
    };
    loop {
        match rx.recv().await {
            Ok(ev) if ev.kind == event::EMPTIED && ids.contains(&ev.cgroup_id) => return,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return,
            // The reader is gone: only inotify is left.
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}

/// Resolves once no process runs in any of `dirs` (cgroup directories).
/// Without `kernel`, inotify alone wakes it: the fallback, on its own (the
/// release-latency bench compares the two).
pub async fn all_exited(kernel: Option<&Kernel>, dirs: Vec<PathBuf>) -> io::Result<()> {
    // Subscribe and register before the first read, so no exit falls
    // between the read and the wait.
    let mut rx = kernel.map(|k| k.events.subscribe());
    // A cgroup already removed has no id to watch: it has exited.
    let ids: Vec<u64> = dirs
        .iter()
        .filter_map(|d| std::fs::metadata(d).ok().map(|m| m.ino()))
        .collect();
    let _watched = kernel.and_then(|k| match k.watch(&ids, watch::EXITS) {
        Ok(w) => Some(w),
        // The map is full: inotify still wakes us.
        Err(e) => {
            tracing::warn!(error = %e, "exit events unavailable; inotify only");
            None
        }
    });
    let ino = Inotify::new()?;
    for d in &dirs {
        // A cgroup removed meanwhile has no file to watch: it has exited.
        let _ = ino.add_watch(&d.join("cgroup.events"), libc::IN_MODIFY | libc::IN_DELETE_SELF);
    }
    // SAFETY: the Inotify owns its fd, which outlives the registration.
    let fd = unsafe { AsyncFd::register_with_interest(ino, Interest::READABLE) }.map_err(io::Error::from)?;
    let closer = CloseLater(Some(fd));
    let fd = closer.0.as_ref().expect("just set");
    let mut buf = [0u8; 4096];
    loop {
        if !dirs.iter().any(|d| populated(d)) {
            return Ok(());
        }
        tokio::select! {
            _ = emptied(rx.as_mut(), &ids) => {}
            guard = fd.readable() => {
                let mut guard = guard?;
                match guard.get_inner().read(&mut buf) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => guard.clear_ready(),
                    Err(e) => return Err(e),
                }
            }
        }
    }
}
