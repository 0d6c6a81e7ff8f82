//! Peer processes (the `graceful-peer` binary), started inside a cgroup and
//! optionally a network namespace before they run a line of their own.

use std::{
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::process::CommandExt,
    },
    path::PathBuf,
    process::{Command, Stdio},
};

use graceful_test_support::process::LineChild;

use crate::{cgroup::Cgroup, netns::NetNs};

/// Where the peer binary is: `GRACEFUL_PEER_BIN`, or
/// target/<profile>/graceful-peer (see [`crate::built`]).
pub fn peer_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("GRACEFUL_PEER_BIN") {
        return p.into();
    }
    let p = crate::built("graceful-peer");
    assert!(
        p.exists(),
        "{} not built: run `cargo xtask test`, or `cargo build -p graceful-tests` first",
        p.display()
    );
    p
}

pub struct Peer {
    line: LineChild,
}

impl Peer {
    /// Starts a peer in `cg`, inside `ns` if given.
    pub fn spawn(cg: &Cgroup, ns: Option<&NetNs>) -> Peer {
        let mut cmd = Command::new(peer_bin());
        cmd.stderr(Stdio::inherit());
        place(&mut cmd, cg, ns);
        let line = LineChild::spawn(&mut cmd).expect("spawn graceful-peer");
        Peer { line }
    }

    /// Sends one command; panics on `err`. Returns the words after `ok`.
    pub fn cmd(&mut self, line: &str) -> Vec<String> {
        let reply = self
            .line
            .request(line)
            .unwrap_or_else(|e| panic!("peer: {line:?}: {e}"));
        let mut words = reply.split_whitespace().map(str::to_string);
        match words.next().as_deref() {
            Some("ok") => words.collect(),
            _ => panic!("peer: {line:?} → {reply:?}"),
        }
    }

    /// `listen ADDR MODE`, returning the port.
    pub fn listen(&mut self, addr: &str, mode: &str) -> u16 {
        self.cmd(&format!("listen {addr} {mode}"))[0].parse().unwrap()
    }

    pub fn connect(&mut self, addr: &str, n: usize) {
        self.cmd(&format!("connect {addr} {n}"));
    }

    pub fn accepted(&mut self) -> u64 {
        self.cmd("accepted")[0].parse().unwrap()
    }

    /// Connections accepted by the listener on `port`.
    pub fn accepted_on(&mut self, port: u16) -> u64 {
        self.cmd(&format!("accepted {port}"))[0].parse().unwrap()
    }

    pub fn pid(&self) -> u32 {
        self.line.id()
    }

    /// A descriptor, in this process, of one of the peer's held accepted
    /// connections (`pidfd_getfd`): the same socket, for a test that reaches
    /// its storage. The socket stays open while this copy does.
    pub fn held_in_socket(&mut self) -> OwnedFd {
        let words = self.cmd("fds-in");
        let fd: i32 = words
            .first()
            .expect("no held accepted connection")
            .parse()
            .unwrap();
        // SAFETY: plain syscalls; each returned descriptor is owned once.
        unsafe {
            let pidfd = libc::syscall(libc::SYS_pidfd_open, self.pid() as libc::pid_t, 0);
            assert!(pidfd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
            let pidfd = OwnedFd::from_raw_fd(pidfd as i32);
            let copy = libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0);
            assert!(copy >= 0, "pidfd_getfd: {}", std::io::Error::last_os_error());
            OwnedFd::from_raw_fd(copy as i32)
        }
    }

    /// SIGKILL: the kernel closes everything the peer held.
    pub fn kill(mut self) {
        let child = self.line.child_mut();
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let child = self.line.child_mut();
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// `[addr]:port` or `addr:port`.
pub fn addr(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// Makes `cmd` start inside `cg` (and `ns`), before it runs a line of its
/// own, and die with the test process.
pub fn place(cmd: &mut Command, cg: &Cgroup, ns: Option<&NetNs>) {
    let ns_fd = ns.map(|n| n.fd());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = ns_fd {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    crate::cgroup::start_in(cmd, cg.dir());
}

/// A server in `server` (listening on loopback) holding `n` connections
/// from a client in `client`, returned once all are accepted.
pub fn held_connections(server: &Cgroup, client: &Cgroup, n: usize) -> (Peer, Peer) {
    let mut app = Peer::spawn(server, None);
    let port = app.listen("127.0.0.1:0", "hold");
    let mut clients = Peer::spawn(client, None);
    clients.connect(&addr("127.0.0.1", port), n);
    crate::wait_for(10, "accepts", || (app.accepted() == n as u64).then_some(()));
    (app, clients)
}
