//! Making sure the bpffs is there, and telling whether it outlives us.
//!
//! The pins keep the counts across agent restarts only if the bpffs that
//! holds them outlives the agent's container: it must be the host's bpffs,
//! mounted into the pod. A bpffs the agent mounts in its own container (the
//! host has none at /sys/fs/bpf, or the pod spec lacks the volume) is the
//! container's alone: `HostToContainer` propagation is one-way, so the pins
//! die with the container and every restart starts from zero. [`residence`]
//! tells which, for `graceful doctor` and for the daemon's log.

use std::{
    ffi::CString,
    io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use super::paths::BPFFS;
use crate::kernel::cgroupfs::{self, Mount};

const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// Whether `path` lies on a bpffs.
pub fn is_bpffs(path: &Path) -> io::Result<bool> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid C string and st a valid out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)]
    Ok(st.f_type as i64 == BPF_FS_MAGIC)
}

/// Mounts a bpffs at `path` if none is there. Returns whether it mounted one.
pub fn ensure_mounted(path: &Path) -> io::Result<bool> {
    if path.exists() && is_bpffs(path)? {
        return Ok(false);
    }
    std::fs::create_dir_all(path)?;
    let target = CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    // SAFETY: all arguments are valid C strings or null.
    let rc = unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            target.as_ptr(),
            c"bpf".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(true)
}

/// What a node needs, in one clause.
const FIX: &str = "mount a bpffs on the host at /sys/fs/bpf, shared \
    (`mount -t bpf bpf /sys/fs/bpf && mount --make-shared /sys/fs/bpf`; systemd does this at boot), \
    and mount it into the pod with mountPropagation: HostToContainer";

/// Where the bpffs holding the pin directory lives, as far as restarts go.
#[derive(Debug, PartialEq, Eq)]
pub enum Residence {
    /// Not in a container that shares the host's pid namespace, or this
    /// process cannot tell (it cannot read `/proc/1/mountinfo`): the bpffs
    /// mount holding the pin directory, if there is one.
    Uncontained { bpffs: Option<PathBuf> },
    /// In a container, on the host's bpffs (pins outlive the container).
    /// `propagated`: the mount here is a slave or shared one, so it also
    /// receives what the host mounts there later.
    Host { mount: PathBuf, propagated: bool },
    /// In a container, on a bpffs of the container's own.
    Own { mount: PathBuf },
    /// In a container, on no bpffs; the daemon would mount a private one at
    /// [`BPFFS`].
    Missing,
    /// The pin directory is outside [`BPFFS`] and on no bpffs: the daemon
    /// refuses it, container or not.
    NotBpffs { pin_dir: PathBuf },
}

impl Residence {
    /// Whether pins made here die with this container.
    pub fn loses_pins(&self) -> bool {
        matches!(self, Self::Own { .. } | Self::Missing)
    }

    /// One line: what this means and, for a problem, what to do.
    pub fn describe(&self) -> String {
        match self {
            Self::Uncontained { bpffs: Some(m) } => format!("mounted at {}", m.display()),
            Self::Uncontained { bpffs: None } => format!(
                "not mounted at {BPFFS}: the daemon mounts it itself; in a pod, mount the host's {BPFFS} into the container"
            ),
            Self::Host { mount, propagated: true } => {
                format!("{} is the host's bpffs (pins outlive this container)", mount.display())
            }
            Self::Host { mount, propagated: false } => format!(
                "{} is the host's bpffs (pins outlive this container), but its mount here is private: \
                 a bpffs the host mounts there later is not seen; mount it with mountPropagation: HostToContainer",
                mount.display()
            ),
            Self::Own { mount } => format!(
                "{} is this container's own bpffs, not the host's: pins die with the container \
                 and every restart loses its counts; {FIX}",
                mount.display()
            ),
            Self::Missing => format!(
                "{BPFFS} is not a bpffs in this container: the daemon would mount a private one, \
                 whose pins die with the container; {FIX}"
            ),
            Self::NotBpffs { pin_dir } => format!(
                "pin directory {} is not on a bpffs: the daemon refuses it; choose a directory under {BPFFS}",
                pin_dir.display()
            ),
        }
    }
}

/// Where the bpffs holding `pin_dir` lives, read from this process's
/// namespaces and mount tables.
pub fn residence(pin_dir: &Path) -> Residence {
    let ns = |p: &str| std::fs::metadata(p).ok().map(|m| m.ino());
    let (own_ns, init_ns) = (ns("/proc/self/ns/mnt"), ns("/proc/1/ns/mnt"));
    let Ok(own) = std::fs::read_to_string("/proc/self/mountinfo") else {
        // No mount table to read: say what statfs says, as on a host.
        let here = pin_dir.ancestors().find(|p| p.exists()).unwrap_or(Path::new("/"));
        return match is_bpffs(here) {
            Ok(true) => Residence::Uncontained {
                bpffs: Some(here.to_path_buf()),
            },
            _ if pin_dir.starts_with(BPFFS) => Residence::Uncontained { bpffs: None },
            _ => Residence::NotBpffs {
                pin_dir: pin_dir.to_path_buf(),
            },
        };
    };
    let own: Vec<Mount> = cgroupfs::mounts(&own).collect();
    let host: Option<Vec<Mount>> = (own_ns != init_ns || init_ns.is_none())
        .then(|| std::fs::read_to_string("/proc/1/mountinfo").ok())
        .flatten()
        .map(|t| cgroupfs::mounts(&t).collect());
    decide(&resolve(pin_dir), own_ns, init_ns, &own, host.as_deref())
}

/// The decision, from plain inputs: the pin directory (absolute), the
/// inodes of `/proc/self/ns/mnt` and `/proc/1/ns/mnt` (None if unreadable),
/// this process's mounts, and `/proc/1`'s mounts (None if unreadable).
///
/// "In a container" means: `/proc/1` lives in another mount namespace. With
/// the DaemonSet's `hostPID`, `/proc/1` is the host's init, and its mount
/// table is the host's. Where `/proc/1/ns/mnt` cannot be read (it takes
/// ptrace access to pid 1, which some sandboxes deny even to
/// CAP_SYS_PTRACE) the mount tables tell: a mount namespace is a copy with
/// mounts of its own, so it shares no mount id with the one it was copied
/// from.
pub fn decide(
    pin_dir: &Path,
    own_ns: Option<u64>,
    init_ns: Option<u64>,
    own: &[Mount],
    host: Option<&[Mount]>,
) -> Residence {
    let here = containing(own, pin_dir).filter(|m| m.fstype == "bpf");
    let contained = match (own_ns, init_ns, host) {
        (Some(a), Some(b), _) => a != b,
        (_, _, Some(host)) => !own.is_empty() && !host.iter().any(|h| own.iter().any(|m| m.id == h.id)),
        _ => false,
    };
    let host = host.filter(|_| contained);
    match (here, host) {
        (None, _) if !pin_dir.starts_with(BPFFS) => Residence::NotBpffs {
            pin_dir: pin_dir.to_path_buf(),
        },
        (here, None) => Residence::Uncontained {
            bpffs: here.map(|m| m.mount_point.clone()),
        },
        (None, Some(_)) => Residence::Missing,
        (Some(m), Some(host)) => {
            let mount = m.mount_point.clone();
            if host.iter().any(|h| h.fstype == "bpf" && h.dev == m.dev) {
                let propagated = m
                    .optional
                    .iter()
                    .any(|o| o.starts_with("master:") || o.starts_with("shared:"));
                Residence::Host { mount, propagated }
            } else {
                Residence::Own { mount }
            }
        }
    }
}

/// The mount holding `path`: the longest mount point it lies under, the
/// last one listed if several are mounted on the same point.
fn containing<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts.iter().filter(|m| path.starts_with(&m.mount_point)).fold(
        None,
        |best: Option<&Mount>, m| match best {
            Some(b) if b.mount_point.components().count() > m.mount_point.components().count() => Some(b),
            _ => Some(m),
        },
    )
}

/// `path` made absolute, with symlinks resolved as far as it exists.
fn resolve(path: &Path) -> PathBuf {
    for base in path.ancestors() {
        if let Ok(real) = base.canonicalize() {
            return real.join(path.strip_prefix(base).unwrap_or(Path::new("")));
        }
    }
    path.to_path_buf()
}

#[cfg(test)]
mod tests;
