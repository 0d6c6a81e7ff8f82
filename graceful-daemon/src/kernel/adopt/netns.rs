//! Finding every network namespace on the host and running code inside one.
//!
//! sock_diag only reports the sockets of the namespace the netlink socket was
//! created in, so adopting pre-existing connections means visiting each
//! network namespace in turn. Namespaces are found through the processes that
//! use them (`/proc/<pid>/task/<tid>/ns/net`; threads may have `setns`ed away
//! from their process) and through `ip netns` style bind mounts, which keep a
//! namespace alive with no process in it.
//!
//! Only namespaces visible from our pid namespace are found: the agent needs
//! the host pid namespace (`hostPID: true`) and a `/proc` without `hidepid`.

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `NS_GET_NSTYPE` = `_IO(0xb7, 0x3)` (linux/nsfs.h, Linux >= 4.11): returns
/// the `CLONE_NEW*` type of a namespace fd and fails on anything else.
const NS_GET_NSTYPE: libc::c_ulong = (0xb7 << 8) | 0x3;

/// Directories where `ip netns` (and CNI plugins) bind-mount named namespaces.
const NETNS_MOUNT_DIRS: [&str; 2] = ["/run/netns", "/var/run/netns"];

/// An open handle on a network namespace. Holding the fd keeps the namespace
/// alive even if every process in it exits or its bind mount is removed.
#[derive(Debug)]
pub struct NetNs {
    pub fd: OwnedFd,
    /// Device of the nsfs file system; with `inode` the namespace's identity.
    pub dev: u64,
    /// The namespace inode, as in `readlink /proc/PID/ns/net` = `net:[INODE]`.
    pub inode: u64,
    /// Where it was first found, for logs (e.g. `/proc/42/task/42/ns/net`).
    pub origin: PathBuf,
}

impl NetNs {
    /// Opens a namespace file (`/proc/PID/ns/net`, `/run/netns/NAME`, ...),
    /// checking that it really is a network namespace: a stale `/run/netns`
    /// entry whose bind mount is gone is a plain empty file.
    pub fn open(path: impl AsRef<Path>) -> io::Result<NetNs> {
        let path = path.as_ref();
        let file = File::open(path)?; // O_RDONLY | O_CLOEXEC
                                      // SAFETY: valid fd; NS_GET_NSTYPE takes no argument.
        let ty = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_NSTYPE as _) };
        if ty < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("{} is not a namespace file: {e}", path.display()),
            ));
        }
        if ty != libc::CLONE_NEWNET {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a network namespace", path.display()),
            ));
        }
        let meta = file.metadata()?; // fstat: identity of what we actually hold
        Ok(NetNs {
            fd: file.into(),
            dev: meta.dev(),
            inode: meta.ino(),
            origin: path.to_owned(),
        })
    }

    /// A second handle on the same namespace (a new descriptor).
    pub fn try_clone(&self) -> io::Result<NetNs> {
        Ok(NetNs {
            fd: self.fd.try_clone()?,
            dev: self.dev,
            inode: self.inode,
            origin: self.origin.clone(),
        })
    }

    /// The calling thread's current network namespace.
    pub fn current() -> io::Result<NetNs> {
        NetNs::open("/proc/thread-self/ns/net")
    }
}

impl AsFd for NetNs {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The result of a namespace scan.
#[derive(Debug, Default)]
pub struct NetNsScan {
    /// Distinct network namespaces, deduplicated by (dev, inode).
    pub namespaces: Vec<NetNs>,
    /// Paths that could not be inspected. Mostly processes and threads that
    /// exited mid-scan, or zombies (whose namespaces are already released),
    /// which is normal; a large number may point at missing privileges.
    pub errors: usize,
}

/// Enumerates every distinct network namespace on the host; see [`scan_netns`].
pub fn all_netns() -> Vec<NetNs> {
    let scan = scan_netns();
    tracing::debug!(
        namespaces = scan.namespaces.len(),
        skipped = scan.errors,
        "network namespace scan"
    );
    scan.namespaces
}

/// Walks `/proc/*/task/*/ns/net` and the `/run/netns` and `/var/run/netns`
/// bind mounts, opening each namespace once. Errors are counted, not returned:
/// the process table changes under the walk and that is expected.
pub fn scan_netns() -> NetNsScan {
    let mut scan = NetNsScan::default();
    let mut seen = HashSet::new();

    let mut candidates: Vec<PathBuf> = Vec::new();
    match std::fs::read_dir("/proc") {
        Ok(procs) => {
            for pid in procs.flatten() {
                let name = pid.file_name();
                let Some(name) = name.to_str() else { continue };
                if !name.bytes().all(|b| b.is_ascii_digit()) {
                    continue;
                }
                let Ok(tasks) = std::fs::read_dir(pid.path().join("task")) else {
                    scan.errors += 1; // exited between the two readdirs
                    continue;
                };
                for tid in tasks.flatten() {
                    candidates.push(tid.path().join("ns/net"));
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot list /proc; only bind-mounted namespaces are found");
            scan.errors += 1;
        }
    }
    for dir in NETNS_MOUNT_DIRS {
        // Usually absent (no `ip netns` in use) or a symlink to the other.
        if let Ok(entries) = std::fs::read_dir(dir) {
            candidates.extend(entries.flatten().map(|e| e.path()));
        }
    }

    for path in candidates {
        // stat() follows the magic link to the nsfs inode; it is far cheaper
        // than opening, and most threads share a handful of namespaces.
        let Ok(meta) = std::fs::metadata(&path) else {
            scan.errors += 1;
            continue;
        };
        if seen.contains(&(meta.dev(), meta.ino())) {
            continue;
        }
        // The thread may have been replaced by another between stat and
        // open; the fstat in NetNs::open gives the identity of the fd we
        // hold, so dedupe again on that.
        match NetNs::open(&path) {
            Ok(ns) => {
                if seen.insert((ns.dev, ns.inode)) {
                    scan.namespaces.push(ns);
                }
            }
            Err(_) => scan.errors += 1,
        }
    }
    scan
}

/// Runs `f` inside network namespace `ns` and returns its result.
///
/// `f` runs on a fresh, short-lived thread that `setns(CLONE_NEWNET)`s before
/// calling it, so the caller's thread (possibly an async runtime worker)
/// never changes namespace; sockets created by `f` belong to `ns` and keep
/// doing so after `f` returns. Errors are those of `setns` (EPERM without
/// CAP_SYS_ADMIN, EINVAL if the fd is not a network namespace) or of thread
/// creation. A panic in `f` is propagated to the caller.
///
/// Blocking; in async code call it from `spawn_blocking`.
pub fn run_in<T: Send>(ns: &NetNs, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    let fd = ns.as_fd();
    // A scoped thread may borrow from the caller, so `f` need not be 'static.
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("graceful-netns".into())
            .spawn_scoped(scope, move || {
                // SAFETY: `fd` is borrowed from `ns`, which outlives the scope.
                if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(f())
            })?;
        handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

#[cfg(test)]
mod tests;
