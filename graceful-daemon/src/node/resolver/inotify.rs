//! A minimal inotify wrapper over libc: directory watches and event parsing.
//! Only what the cgroup watcher needs, so no extra crate.

use std::{
    ffi::{CString, OsStr},
    io,
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
        unix::ffi::OsStrExt,
    },
    path::Path,
};

/// What the watcher asks for on every cgroup directory: child cgroups
/// appearing and disappearing. `IN_ONLYDIR` makes adding a watch on something
/// that is not a directory fail instead of watching a file.
pub const DIR_MASK: u32 = libc::IN_CREATE | libc::IN_DELETE | libc::IN_ONLYDIR;

pub struct Inotify {
    fd: OwnedFd,
}

impl Inotify {
    /// A non-blocking instance, closed on exec.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the fd is owned from here on.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd that nothing else owns.
        Ok(Self {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Watches `dir`; returns the watch descriptor. Watching the same inode
    /// again returns the same descriptor, so this is idempotent.
    pub fn add_watch(&self, dir: &Path, mask: u32) -> io::Result<i32> {
        let c = CString::new(dir.as_os_str().as_bytes())?;
        // SAFETY: valid fd and NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(wd)
    }

    /// Drops a watch. Removing a cgroup does not drop the watches on it (no
    /// IN_IGNORED comes, unlike on disk filesystems; seen on 6.18), so the
    /// watcher must, or the marks pile up and pin dead cgroups' inodes.
    pub fn rm_watch(&self, wd: i32) -> io::Result<()> {
        // SAFETY: plain syscall on our fd.
        if unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads whatever events are queued into `buf`; `WouldBlock` when none.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

impl AsRawFd for Inotify {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// One event: the watch it came from, what happened, and the child's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event<'a> {
    pub wd: i32,
    pub mask: u32,
    pub name: &'a OsStr,
}

/// The events in a buffer filled by [`Inotify::read`]. The kernel only
/// returns whole events; a truncated tail (which it never produces) ends
/// the iteration rather than being read past.
pub fn events(buf: &[u8]) -> impl Iterator<Item = Event<'_>> {
    const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
    let mut rest = buf;
    std::iter::from_fn(move || {
        if rest.len() < HEADER {
            return None;
        }
        let field = |i: usize| u32::from_ne_bytes(rest[i..i + 4].try_into().unwrap());
        let (wd, mask, len) = (field(0) as i32, field(4), field(12) as usize);
        if rest.len() < HEADER + len {
            return None;
        }
        // The name is NUL-padded to an alignment boundary.
        let raw = &rest[HEADER..HEADER + len];
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        let ev = Event {
            wd,
            mask,
            name: OsStr::from_bytes(&raw[..end]),
        };
        rest = &rest[HEADER + len..];
        Some(ev)
    })
}

/// Encodes one event the way the kernel does; tests use it to feed the
/// watcher events (an overflow, say) the kernel cannot be made to produce
/// on demand.
pub fn encode(wd: i32, mask: u32, name: &[u8]) -> Vec<u8> {
    let len = if name.is_empty() {
        0
    } else {
        (name.len() + 1).div_ceil(16) * 16
    };
    let mut out = Vec::with_capacity(16 + len);
    out.extend_from_slice(&wd.to_ne_bytes());
    out.extend_from_slice(&mask.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&(len as u32).to_ne_bytes());
    out.extend_from_slice(name);
    out.resize(16 + len, 0);
    out
}

#[cfg(test)]
mod tests;
