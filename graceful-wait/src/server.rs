//! Whether what answers on the gate socket is graceful's agent. The
//! kernel says who listens (SO_PEERCRED, recorded when it listened): the
//! agent runs as root, in the node's pid namespace, which a pod's does not
//! see (the kernel gives its pid as 0 there). A listener of another uid,
//! or one this pod's own processes can see (a process of the pod, bound
//! where the agent should be), is not the agent: the hook fails open at
//! once with one line that names it, and never waits on it. What keeps a
//! pod of another namespace from binding the socket at all is the gate
//! directory mounted read-only (the chart's admission policy refuses a
//! pod that mounts it otherwise).

use std::{io, os::fd::AsRawFd, os::unix::net::UnixStream};

/// The listener's credentials, as the kernel gives them to this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Its pid in this process's pid namespace; 0 when it is outside it.
    pub pid: i32,
    pub uid: u32,
}

#[repr(C)]
struct Ucred {
    pid: i32,
    uid: u32,
    gid: u32,
}

extern "C" {
    // libc's, which std links already: the one call not worth a crate.
    fn getsockopt(fd: i32, level: i32, name: i32, value: *mut std::ffi::c_void, len: *mut u32) -> i32;
}

const SOL_SOCKET: i32 = 1;
const SO_PEERCRED: i32 = 17;

/// Who listens at the other end of `s`.
pub fn listener(s: &UnixStream) -> io::Result<Listener> {
    let mut c = Ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<Ucred>() as u32;
    // SAFETY: `c` and `len` are live and sized for SO_PEERCRED's struct ucred.
    let rc = unsafe {
        getsockopt(
            s.as_raw_fd(),
            SOL_SOCKET,
            SO_PEERCRED,
            (&mut c as *mut Ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Listener {
        pid: c.pid,
        uid: c.uid,
    })
}

/// Whether `l` may be the agent: root, and not a process of this pod's
/// own pid namespace (`same_ns`: whether a visible pid shares it).
pub fn check(l: Listener, same_ns: impl FnOnce(i32) -> bool) -> Result<(), String> {
    if l.uid != 0 {
        return Err(format!(
            "the gate socket is served by uid {}, not root: not graceful's agent",
            l.uid
        ));
    }
    if l.pid > 0 && same_ns(l.pid) {
        return Err(format!(
            "the gate socket is served by pid {} of this pod's own processes, not graceful's agent",
            l.pid
        ));
    }
    Ok(())
}

/// Whether pid `pid` (as this process sees it) is a process of this
/// pod's own pid namespace. In the node's own (a hostPID pod, the agent's
/// tests), where the agent runs too, no pid is.
pub fn in_my_pid_ns(pid: i32) -> bool {
    if in_the_nodes_pid_ns() {
        return false;
    }
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    match (ns(&pid.to_string()), ns("self")) {
        (Some(a), Some(b)) => a == b,
        // Unreadable: take it as ours, the side that fails open.
        _ => true,
    }
}

/// Whether this process runs in the node's pid namespace: the only one
/// where the kernel's threads show (pid 2 is `kthreadd`, with no parent).
fn in_the_nodes_pid_ns() -> bool {
    std::fs::read_to_string("/proc/2/status")
        .is_ok_and(|s| s.lines().next() == Some("Name:\tkthreadd") && s.lines().any(|l| l == "PPid:\t0"))
}

#[cfg(test)]
mod tests;
