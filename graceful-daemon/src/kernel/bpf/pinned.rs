//! The pins under a running agent. At start it opens every pin of its own
//! (the maps, and the links of the programs that stay attached) and holds
//! them for as long as it runs. A pin removed from under it (the directory
//! deleted by hand, a cleanup script) then detaches nothing and loses no
//! count, and [`Pinned::restore`] puts it back from the descriptor held.

use std::{
    ffi::CString,
    io,
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::ffi::OsStrExt as _,
    },
    path::{Path, PathBuf},
    sync::Mutex,
};

use super::paths::PinDir;
use crate::sync;

const BPF_OBJ_PIN: libc::c_long = 6;
const BPF_OBJ_GET: libc::c_long = 7;

/// The `bpf_attr` of `BPF_OBJ_PIN` and `BPF_OBJ_GET`.
#[repr(C)]
#[derive(Default)]
struct ObjAttr {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
}

fn sys_obj(cmd: libc::c_long, path: &Path, fd: u32) -> io::Result<libc::c_long> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let mut attr = ObjAttr {
        pathname: c.as_ptr() as u64,
        bpf_fd: fd,
        file_flags: 0,
    };
    // SAFETY: `attr` is a live bpf_attr prefix of the size passed, and its
    // path a NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            &mut attr as *mut ObjAttr,
            std::mem::size_of::<ObjAttr>(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// Every pin this agent owns, each with a descriptor of its object.
pub struct Pinned {
    pins: PinDir,
    held: Mutex<Vec<(PathBuf, OwnedFd)>>,
}

/// What [`Pinned::restore`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Pins that were gone and are back.
    pub repinned: Vec<PathBuf>,
    /// Pins that are gone and could not be put back, each with why.
    pub failed: Vec<String>,
    /// The pin directory itself was gone, and was made again.
    pub made_root: bool,
}

impl Pinned {
    /// Opens the pins of every map and of `links`.
    pub fn hold(pins: &PinDir, links: &[PathBuf]) -> io::Result<Pinned> {
        let paths = PinDir::map_names()
            .into_iter()
            .map(|n| pins.map(n))
            .chain(links.iter().cloned());
        let mut held = Vec::new();
        for path in paths {
            let fd = sys_obj(BPF_OBJ_GET, &path, 0).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot open the pin {}: {e}", path.display()))
            })?;
            // SAFETY: BPF_OBJ_GET returned a new descriptor we now own.
            held.push((path, unsafe { OwnedFd::from_raw_fd(fd as i32) }));
        }
        Ok(Pinned {
            pins: pins.clone(),
            held: Mutex::new(held),
        })
    }

    /// The pins that are gone.
    pub fn missing(&self) -> Vec<PathBuf> {
        sync::lock(&self.held)
            .iter()
            .map(|(p, _)| p.clone())
            .filter(|p| !p.exists())
            .collect()
    }

    /// Lets the link pinned at `path` go: removes the pin and closes the
    /// descriptor held, which detaches it. Absent already: nothing to do.
    pub fn release(&self, path: &Path) -> io::Result<()> {
        let mut held = sync::lock(&self.held);
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        held.retain(|(p, _)| p != path);
        Ok(())
    }

    /// Pins again whatever is gone, making its directories first.
    pub fn restore(&self) -> Restored {
        let mut done = Restored::default();
        let missing = self.missing();
        if missing.is_empty() {
            return done;
        }
        done.made_root = !self.pins.root().exists();
        for dir in [self.pins.maps(), self.pins.links()] {
            if let Err(e) = std::fs::create_dir_all(&dir) {
                done.failed.push(format!("cannot make {}: {e}", dir.display()));
                return done;
            }
        }
        for (path, fd) in sync::lock(&self.held).iter() {
            if path.exists() {
                continue;
            }
            match sys_obj(BPF_OBJ_PIN, path, fd.as_raw_fd() as u32) {
                Ok(_) => done.repinned.push(path.clone()),
                Err(e) => done
                    .failed
                    .push(format!("cannot pin {} again: {e}", path.display())),
            }
        }
        done
    }
}
