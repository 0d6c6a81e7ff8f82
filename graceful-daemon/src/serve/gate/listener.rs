//! The gate's socket: bound so that any pod's process may connect (who it
//! is comes from SO_PEERCRED), and kept bound. If the file is removed
//! under the agent, the agent binds it again; if something else answers
//! there, it says so and the gate counts as not listening.

use std::{
    io,
    os::{
        fd::AsRawFd as _,
        unix::{fs::MetadataExt as _, net::UnixStream},
    },
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
};

use tokio::net::UnixListener;

/// Binds the gate socket at `path`, replacing a stale one.
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt as _;
    let named = |e: io::Error| io::Error::new(e.kind(), format!("cannot listen on {}: {e}", path.display()));
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(named(e)),
        _ => {}
    }
    let listener = UnixListener::bind(path).map_err(named)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot open {} to pods (chmod 666): {e}", path.display()),
        )
    })?;
    Ok(listener)
}

/// Whether something accepts connections on the unix socket at `path`:
/// `Some(its pid)` if it does (`None` inside when the kernel cannot say).
/// A socket nobody listens on (a dead agent's) answers `ECONNREFUSED`.
pub fn answering(path: &Path) -> Option<Option<u32>> {
    let s = UnixStream::connect(path).ok()?;
    Some(peer_pid(&s))
}

/// The listener's pid, as SO_PEERCRED recorded it when it listened.
fn peer_pid(s: &UnixStream) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live and sized for SO_PEERCRED.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid as u32)
}

/// The gate socket's path and whether the agent's listener is what it
/// names, for `/healthz`.
#[derive(Debug)]
pub struct Socket {
    pub path: PathBuf,
    listening: AtomicBool,
}

/// What a look at the socket's path found.
pub enum Look {
    /// The path names our listener.
    Ours,
    /// Gone, or a dead listener's: bind it again.
    Rebind,
    /// Another live listener (its pid): leave it.
    Taken(Option<u32>),
}

impl Socket {
    pub fn new(path: PathBuf) -> Socket {
        Socket {
            path,
            listening: AtomicBool::new(true),
        }
    }

    pub fn listening(&self) -> bool {
        self.listening.load(Ordering::Relaxed)
    }

    pub fn set_listening(&self, up: bool) {
        self.listening.store(up, Ordering::Relaxed);
    }

    /// Whether the path still names `ours` (the inode of our listener's
    /// socket file, as bound).
    pub fn look(&self, ours: u64) -> Look {
        match std::fs::metadata(&self.path) {
            Ok(m) if m.ino() == ours => Look::Ours,
            Ok(_) => match answering(&self.path) {
                Some(pid) => Look::Taken(pid),
                None => Look::Rebind,
            },
            Err(_) => Look::Rebind,
        }
    }
}

/// The inode of the socket file at `path`, as just bound.
pub fn inode(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.ino()).unwrap_or(0)
}
