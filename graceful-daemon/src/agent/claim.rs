//! One agent per node. For as long as it runs, the agent holds an
//! exclusive `flock` on its pin directory and on a lock file beside its API
//! socket; before it binds a socket, it asks whether something already
//! answers there. A second agent refuses to start, naming the holder, and
//! never re-binds a live agent's sockets. A dead agent's locks die with it,
//! so its stale sockets are still replaced.
//!
//! The gate socket gets no lock file: its directory is mounted into pods,
//! and a lock a pod can take is a lock a pod can hold against the node's
//! next agent. The node is claimed from the pin directory's lock, which
//! only a process with the node's bpffs can take: whatever listens on the
//! gate socket while this agent holds it is no agent, and is replaced
//! (said in one line), never obeyed.

use std::{
    fs::File,
    io,
    os::{fd::AsRawFd, unix::fs::MetadataExt as _},
    path::{Path, PathBuf},
};

use crate::{kernel::bpf::paths::PinDir, serve::gate::listener::answering};

/// The locks this agent holds; released when it is dropped (or the
/// process dies).
#[derive(Debug)]
pub struct Claim {
    /// The pin directory's first, then the API socket's.
    _locks: Vec<File>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("another graceful agent ({}) holds {}: one agent per node; stop it first, or give this one its own --pin-dir and --api-socket", holder(*.pid), .path.display())]
    Held { path: PathBuf, pid: Option<u32> },
    #[error("another graceful agent ({}) answers on {}: one agent per node; stop it first, or give this one its own --gate-dir and --api-socket", holder(*.pid), .path.display())]
    Serving { path: PathBuf, pid: Option<u32> },
    #[error("cannot lock {}: {source}", .path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(p) => format!("pid {p}"),
        None => "pid not visible from here".into(),
    }
}

/// The lock file beside the API socket at `socket`.
pub fn api_lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    socket.with_file_name(name)
}

/// Takes the node's claim: the pin directory (which must exist) and the
/// API socket's lock, then checks that no live agent answers on the API
/// socket. A listener on `gate_socket` is no agent (an agent holds the
/// pins' lock while it serves): it is named, and its socket replaced when
/// the gate binds.
pub fn take(pins: &PinDir, api_socket: &Path, gate_socket: Option<&Path>) -> Result<Claim, ClaimError> {
    let mut locks = vec![lock(pins.root(), false)?];
    if let Some(dir) = api_socket.parent() {
        std::fs::create_dir_all(dir).map_err(|source| ClaimError::Lock {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    locks.push(lock(&api_lock_path(api_socket), true)?);
    if let Some(pid) = answering(api_socket) {
        return Err(ClaimError::Serving {
            path: api_socket.to_path_buf(),
            pid,
        });
    }
    if let Some(pid) = gate_socket.and_then(answering) {
        tracing::error!(
            gate = %gate_socket.unwrap_or(Path::new("")).display(),
            holder = %holder(pid),
            "something that holds no pins listens on the gate socket: not an agent; the gate replaces its socket"
        );
    }
    Ok(Claim { _locks: locks })
}

impl Claim {
    /// Takes the pin directory's lock again, on a directory made anew
    /// after the old one was removed under the agent (its lock went with it).
    pub fn relock_pins(&mut self, pins: &PinDir) -> Result<(), ClaimError> {
        self._locks[0] = lock(pins.root(), false)?;
        Ok(())
    }
}

/// Whether an agent holds the pin directory's lock: `Some(pid)` if so.
/// For `graceful uninstall`, which must not pull the pins from under a
/// running agent.
pub fn pins_held(pins: &PinDir) -> Result<Option<Option<u32>>, ClaimError> {
    match lock(pins.root(), false) {
        Ok(_) => Ok(None),
        Err(ClaimError::Held { pid, .. }) => Ok(Some(pid)),
        Err(e) => Err(e),
    }
}

/// An exclusive, non-blocking `flock` on `path` (a directory, or a file
/// created if `create`).
fn lock(path: &Path, create: bool) -> Result<File, ClaimError> {
    let err = |source| ClaimError::Lock {
        path: path.to_path_buf(),
        source,
    };
    let file = if create {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
    } else {
        File::open(path)
    }
    .map_err(err)?;
    // SAFETY: `file` is open for the duration of the call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(file);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
        return Err(err(e));
    }
    Err(ClaimError::Held {
        path: path.to_path_buf(),
        pid: file.metadata().ok().and_then(|m| flock_holder(m.dev(), m.ino())),
    })
}

/// The pid holding a `flock` on the file `dev`/`ino`, from `/proc/locks`.
fn flock_holder(dev: u64, ino: u64) -> Option<u32> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    let want = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    holder_in(&text, &want)
}

/// In `/proc/locks` text, the pid of the granted FLOCK on `file`
/// (`major:minor:inode`, as the kernel prints it).
fn holder_in(text: &str, file: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        // `1: FLOCK  ADVISORY  WRITE 1234 00:1f:5678 0 EOF`; a waiter's
        // line has `->` after the number.
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(1) == Some(&"FLOCK") && f.get(5) == Some(&file))
            .then(|| f.get(4)?.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests;
