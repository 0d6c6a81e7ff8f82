//! The dump: a `NETLINK_SOCK_DIAG` socket, the request sent for each
//! address family, and the replies streamed to the caller one datagram at
//! a time.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{
    error::SockDiagError,
    netlink::{build_lookup, build_request, parse_datagram, Progress},
    tcp_socket::TcpSocket,
    uapi::{NETLINK_EXT_ACK, NETLINK_SOCK_DIAG, RECV_BUF_LEN, RECV_TIMEOUT_SECS, SOL_NETLINK},
};

/// Dumps every IPv4 and IPv6 TCP socket, in all states, of the calling
/// thread's network namespace (use [`crate::kernel::adopt::netns::run_in`] for others).
///
/// Blocking; in async code call it from `spawn_blocking`.
pub fn dump_tcp() -> Result<Vec<TcpSocket>, SockDiagError> {
    let mut out = Vec::new();
    for_each_tcp(ALL_STATES, |s| out.push(s))?;
    Ok(out)
}

/// Every TCP state, including states newer than this code (BOUND_INACTIVE).
pub const ALL_STATES: u32 = u32::MAX;

/// The `idiag_states` bit of a TCP state.
pub const fn state_bit(state: u8) -> u32 {
    1 << state
}

/// Calls `f` with every IPv4 and IPv6 TCP socket of the calling thread's
/// network namespace whose state is in `states` (a mask of [`state_bit`]s;
/// the kernel filters), as the dump streams in: nothing is held but one
/// datagram, so a namespace with a million sockets costs no more memory
/// than one with ten.
pub fn for_each_tcp(states: u32, mut f: impl FnMut(TcpSocket)) -> Result<(), SockDiagError> {
    let sock = NlSocket::open()?;
    let mut buf = vec![0u8; RECV_BUF_LEN];
    // AF_INET6 dumps only return sockets whose own family is AF_INET6 (the
    // kernel filters on sk_family), so the two dumps never overlap.
    for (seq, family) in [(1u32, libc::AF_INET as u8), (2, libc::AF_INET6 as u8)] {
        sock.dump_family(seq, family, states, &mut buf, &mut f)?;
    }
    Ok(())
}

fn family_name(family: u8) -> &'static str {
    match family as libc::c_int {
        libc::AF_INET => "IPv4",
        libc::AF_INET6 => "IPv6",
        _ => "unknown-family",
    }
}

struct NlSocket {
    fd: OwnedFd,
}

/// A sock_diag socket kept open for lookups of one socket at a time, in the
/// network namespace it was opened in (a netlink socket answers for the
/// namespace it was created in, whichever thread asks later).
pub struct Lookup {
    sock: NlSocket,
    buf: Vec<u8>,
    seq: u32,
}

impl Lookup {
    /// Opens it in the calling thread's network namespace.
    pub fn open() -> Result<Lookup, SockDiagError> {
        Ok(Lookup {
            sock: NlSocket::open()?,
            buf: vec![0u8; 8 * 1024],
            seq: 0,
        })
    }

    /// The TCP socket whose own address is `local` and whose peer is
    /// `remote` (of one family); `None` when there is none.
    pub fn find(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<Option<TcpSocket>, SockDiagError> {
        self.seq = self.seq.wrapping_add(1);
        let name = family_name(match local {
            SocketAddr::V4(_) => libc::AF_INET as u8,
            SocketAddr::V6(_) => libc::AF_INET6 as u8,
        });
        self.sock.send(&build_lookup(self.seq, local, remote), name)?;
        let mut found = None;
        loop {
            let len = self.sock.recv(&mut self.buf, name)?;
            let dgram = &self.buf[..len];
            match parse_datagram(dgram, self.seq, name, &mut |s| found = Some(s)) {
                Ok(_) if found.is_some() => return Ok(found),
                // No such socket: the lookup's NLMSG_ERROR is ENOENT.
                Err(SockDiagError::Kernel { source, .. }) if source.raw_os_error() == Some(libc::ENOENT) => {
                    return Ok(None)
                }
                Err(e) => return Err(e),
                // A datagram for an older request (a lookup that timed out).
                Ok(_) => continue,
            }
        }
    }
}

impl NlSocket {
    fn open() -> Result<Self, SockDiagError> {
        // SAFETY: plain syscall; the returned fd is owned by us from here on.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_SOCK_DIAG,
            )
        };
        if raw < 0 {
            return Err(SockDiagError::Open(io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a freshly created, valid fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Best effort: extended acks give readable error text (Linux >= 4.12).
        let one: libc::c_int = 1;
        // SAFETY: valid fd, pointer/len describe a live c_int.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                SOL_NETLINK,
                NETLINK_EXT_ACK,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        let tv = libc::timeval {
            // time_t is i64 on glibc and musl alike (the libc crate deprecates its alias for musl).
            tv_sec: RECV_TIMEOUT_SECS.into(),
            tv_usec: 0,
        };
        // SAFETY: as above, for a timeval.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(SockDiagError::Open(io::Error::last_os_error()));
        }
        Ok(Self { fd })
    }

    fn dump_family(
        &self,
        seq: u32,
        family: u8,
        states: u32,
        buf: &mut [u8],
        out: &mut impl FnMut(TcpSocket),
    ) -> Result<(), SockDiagError> {
        let name = family_name(family);
        self.send(&build_request(seq, family, states), name)?;
        loop {
            let len = self.recv(buf, name)?;
            if len == 0 {
                return Err(SockDiagError::Malformed {
                    family: name,
                    detail: "the socket returned end-of-file before NLMSG_DONE".into(),
                });
            }
            match parse_datagram(&buf[..len], seq, name, out)? {
                Progress::More => continue,
                Progress::Done => return Ok(()),
            }
        }
    }

    /// Sends one request to the kernel, retrying on EINTR.
    fn send(&self, req: &[u8], name: &'static str) -> Result<(), SockDiagError> {
        // The kernel is netlink port 0; the zeroed sockaddr_nl says so.
        // SAFETY: sockaddr_nl is plain old data; all-zero is valid.
        let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        loop {
            // SAFETY: valid fd; req/kernel are live for the call.
            let n = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    req.as_ptr().cast(),
                    req.len(),
                    0,
                    (&kernel as *const libc::sockaddr_nl).cast(),
                    std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
                )
            };
            if n >= 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(SockDiagError::Send {
                    family: name,
                    source: err,
                });
            }
        }
    }

    /// Receives one datagram, retrying on EINTR and refusing truncation.
    fn recv(&self, buf: &mut [u8], name: &'static str) -> Result<usize, SockDiagError> {
        loop {
            // MSG_TRUNC makes recv return the datagram's real length, so a
            // too-small buffer is detected instead of silently losing sockets.
            // SAFETY: valid fd; buf is a live, writable slice of buf.len() bytes.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_TRUNC,
                )
            };
            if n >= 0 {
                let n = n as usize;
                if n > buf.len() {
                    return Err(SockDiagError::Truncated { family: name, len: n });
                }
                return Ok(n);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    return Err(SockDiagError::Timeout { family: name })
                }
                _ => {
                    return Err(SockDiagError::Recv {
                        family: name,
                        source: err,
                    })
                }
            }
        }
    }
}

/// The kernel's socket cookie of an fd, to cross-check the dump's.
#[cfg(test)]
pub(crate) fn so_cookie(fd: &impl AsRawFd) -> u64 {
    let mut cookie = 0u64;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: valid fd, pointer/len describe a live u64.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "SO_COOKIE: {}", io::Error::last_os_error());
    cookie
}

#[cfg(test)]
mod tests;
