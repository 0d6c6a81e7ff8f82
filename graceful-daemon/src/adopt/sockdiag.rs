//! A minimal, dependency-free `NETLINK_SOCK_DIAG` (inet_diag) client for TCP.
//!
//! At start-up the agent has to adopt TCP sockets that were opened before its
//! eBPF programs were attached. The kernel's sock_diag interface is the only
//! race-free way to enumerate them *with* their cgroup v2 id
//! (`INET_DIAG_CGROUP_ID`, sent unconditionally since Linux 5.7) and their
//! socket cookie, which is the same 64-bit id eBPF programs get from
//! `bpf_get_socket_cookie()`, so dump entries and eBPF events can be joined.
//!
//! Everything here is written from the UAPI headers (`linux/netlink.h`,
//! `linux/sock_diag.h`, `linux/inet_diag.h`). Messages are built and parsed as
//! plain byte slices with explicit offsets instead of `#[repr(C)]` casts, so a
//! short or odd reply can never cause an out-of-bounds read or a panic.
//!
//! A dump is *not* an atomic snapshot: the kernel walks its hash tables in
//! chunks, one per `recv`, so sockets created or closed while the dump runs
//! may or may not be reported. Callers that need completeness must start their
//! live tracking first and dump afterwards, de-duplicating by cookie.

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde::Serialize;

/// Kernel TCP state numbers (`include/net/tcp_states.h`), as reported in
/// `inet_diag_msg.idiag_state`.
pub mod tcp_state {
    pub const ESTABLISHED: u8 = 1;
    pub const SYN_SENT: u8 = 2;
    pub const SYN_RECV: u8 = 3;
    pub const FIN_WAIT1: u8 = 4;
    pub const FIN_WAIT2: u8 = 5;
    pub const TIME_WAIT: u8 = 6;
    pub const CLOSE: u8 = 7;
    pub const CLOSE_WAIT: u8 = 8;
    pub const LAST_ACK: u8 = 9;
    pub const LISTEN: u8 = 10;
    pub const CLOSING: u8 = 11;
    /// Request sockets (half-open server side, before the final ACK). Note
    /// that dumps report them as [`SYN_RECV`], never with this number.
    pub const NEW_SYN_RECV: u8 = 12;
    /// Bound but neither listening nor connected. Linux >= 6.8 dumps such
    /// sockets when bit 13 of `idiag_states` is set, but reports them as
    /// [`CLOSE`] (seen on 6.18), so this number does not show up either.
    pub const BOUND_INACTIVE: u8 = 13;
}

// --- UAPI constants -------------------------------------------------------

/// `NETLINK_SOCK_DIAG` protocol number (linux/netlink.h).
const NETLINK_SOCK_DIAG: libc::c_int = 4;
/// `SOL_NETLINK` / `NETLINK_EXT_ACK`: ask for a human-readable error string.
const SOL_NETLINK: libc::c_int = 270;
const NETLINK_EXT_ACK: libc::c_int = 11;

const NLMSG_HDRLEN: usize = 16;
const NLMSG_NOOP: u16 = 0x1;
const NLMSG_ERROR: u16 = 0x2;
const NLMSG_DONE: u16 = 0x3;
const NLMSG_OVERRUN: u16 = 0x4;
const NLM_F_REQUEST: u16 = 0x01;
const NLM_F_DUMP: u16 = 0x100 | 0x200; // NLM_F_ROOT | NLM_F_MATCH
const NLM_F_DUMP_INTR: u16 = 0x10;
/// On NLMSG_ERROR: the echoed request was cut down to its header.
const NLM_F_CAPPED: u16 = 0x100;
/// On NLMSG_ERROR: extended-ack TLVs follow the (possibly capped) request.
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLMSGERR_ATTR_MSG: u16 = 1;

/// `SOCK_DIAG_BY_FAMILY` (linux/sock_diag.h): request and reply type.
const SOCK_DIAG_BY_FAMILY: u16 = 20;

/// `sizeof(struct inet_diag_req_v2)`: 4 bytes of header fields + sockid.
const INET_DIAG_REQ_V2_LEN: usize = 8 + INET_DIAG_SOCKID_LEN;
/// `sizeof(struct inet_diag_sockid)`: ports, 2x16 address bytes, if, cookie.
const INET_DIAG_SOCKID_LEN: usize = 2 + 2 + 16 + 16 + 4 + 8;
/// `sizeof(struct inet_diag_msg)`: 4 bytes + sockid + 5 u32.
const INET_DIAG_MSG_LEN: usize = 4 + INET_DIAG_SOCKID_LEN + 5 * 4;
/// `INET_DIAG_CGROUP_ID` response attribute (u64, host byte order).
const INET_DIAG_CGROUP_ID: u16 = 21;
/// rtattr/nlattr type bits that are flags, not part of the type number.
const NLA_TYPE_MASK: u16 = !(0x8000 | 0x4000);

/// Large enough for any dump chunk: the kernel sizes dump skbs after the
/// largest buffer seen in recvmsg, capped at ~32 KiB, so 64 KiB never
/// truncates. We still detect truncation via `MSG_TRUNC` instead of trusting it.
const RECV_BUF_LEN: usize = 64 * 1024;
/// A dump must make progress; a silent kernel must not hang start-up forever.
const RECV_TIMEOUT_SECS: u32 = 10;

// --- public types ---------------------------------------------------------

/// One TCP socket as reported by the kernel, faithfully (no address
/// normalisation: IPv4-mapped IPv6 addresses stay V6).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct TcpSocket {
    /// Socket cookie, the same value as `SO_COOKIE` / `bpf_get_socket_cookie`.
    pub cookie: u64,
    /// `AF_INET` or `AF_INET6` (the socket's own family, so a dual-stack
    /// socket carrying IPv4 traffic is `AF_INET6` with v4-mapped addresses).
    pub family: u8,
    /// Kernel TCP state number, see [`tcp_state`]. Mini-sockets report the
    /// state they stand for: request sockets say SYN_RECV, timewait sockets
    /// TIME_WAIT or (for orphaned FIN_WAIT2 connections) FIN_WAIT2.
    pub state: u8,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// cgroup v2 id (the inode of the cgroup2 directory); `None` for
    /// timewait and request mini-sockets (the kernel sends no attributes
    /// for them) and on kernels < 5.7. It is fixed when the socket is
    /// created: accepted sockets inherit their *listener's* cgroup, not the
    /// accepting process's.
    pub cgroup_id: Option<u64>,
    /// Socket inode; 0 for mini-sockets and for connections still sitting in
    /// a listener's accept queue (they have no file yet).
    pub inode: u32,
    /// Owner uid, as seen from the user namespace of the dumping process.
    pub uid: u32,
}

/// Errors from [`dump_tcp`]. Each message says what to check.
#[derive(Debug, thiserror::Error)]
pub enum SockDiagError {
    #[error(
        "cannot open a NETLINK_SOCK_DIAG socket: {0} \
         (needs CONFIG_INET_DIAG; in a restricted sandbox, check seccomp/LSM policy)"
    )]
    Open(#[source] io::Error),
    #[error("sending the {family} TCP sock_diag dump request failed: {source}")]
    Send {
        family: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("receiving the {family} TCP sock_diag dump failed: {source}")]
    Recv {
        family: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "the kernel sent no {family} TCP sock_diag data for {RECV_TIMEOUT_SECS}s; \
         the dump was abandoned (is the system overloaded?)"
    )]
    Timeout { family: &'static str },
    #[error("the kernel rejected the {family} TCP sock_diag dump: {source}{}{hint}",
        ext_ack.as_deref().map(|m| format!(" (kernel says: {m})")).unwrap_or_default())]
    Kernel {
        family: &'static str,
        #[source]
        source: io::Error,
        ext_ack: Option<String>,
        hint: &'static str,
    },
    #[error(
        "a {family} sock_diag datagram of {len} bytes did not fit the receive buffer; \
         this is a bug in graceful's sock_diag client"
    )]
    Truncated { family: &'static str, len: usize },
    #[error("the kernel reported lost {family} sock_diag data (NLMSG_OVERRUN); retry the dump")]
    Overrun { family: &'static str },
    #[error(
        "malformed {family} sock_diag reply: {detail}; \
         this kernel speaks a sock_diag dialect graceful does not understand"
    )]
    Malformed { family: &'static str, detail: String },
}

// --- dump -----------------------------------------------------------------

/// Dumps every IPv4 and IPv6 TCP socket, in all states, of the calling
/// thread's network namespace (use [`super::netns::run_in`] for others).
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
        let req = build_request(seq, family, states);
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
                break;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(SockDiagError::Send {
                    family: name,
                    source: err,
                });
            }
        }

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

/// nlmsghdr + inet_diag_req_v2 asking for every TCP socket of `family`.
fn build_request(seq: u32, family: u8, states: u32) -> Vec<u8> {
    let total = NLMSG_HDRLEN + INET_DIAG_REQ_V2_LEN;
    let mut b = Vec::with_capacity(total);
    // struct nlmsghdr
    b.extend_from_slice(&(total as u32).to_ne_bytes());
    b.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid: let the kernel fill it
                                              // struct inet_diag_req_v2
    b.push(family); // sdiag_family
    b.push(libc::IPPROTO_TCP as u8); // sdiag_protocol
    b.push(0); // idiag_ext: the base message + default attrs are enough
    b.push(0); // pad
               // idiag_states: one bit per TCP state (ALL_STATES: every one).
    b.extend_from_slice(&states.to_ne_bytes());
    // id: zero = no filtering by address/port/interface. idiag_cookie must
    // be INET_DIAG_NOCOOKIE only for exact lookups, not dumps.
    b.resize(total, 0);
    b
}

#[derive(Debug, PartialEq, Eq)]
enum Progress {
    More,
    Done,
}

fn rd_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn rd_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn align4(len: usize) -> usize {
    (len + 3) & !3
}

/// Parses one received datagram (which may hold several netlink messages).
fn parse_datagram(
    dgram: &[u8],
    seq: u32,
    name: &'static str,
    out: &mut impl FnMut(TcpSocket),
) -> Result<Progress, SockDiagError> {
    let malformed = |detail: String| SockDiagError::Malformed { family: name, detail };
    let mut off = 0usize;
    while dgram.len() - off >= NLMSG_HDRLEN {
        let msg_len = rd_u32(dgram, off).unwrap_or(0) as usize;
        let msg_type = rd_u16(dgram, off + 4).unwrap_or(0);
        let msg_flags = rd_u16(dgram, off + 6).unwrap_or(0);
        let msg_seq = rd_u32(dgram, off + 8).unwrap_or(0);
        if msg_len < NLMSG_HDRLEN || msg_len > dgram.len() - off {
            return Err(malformed(format!(
                "netlink message length {msg_len} at offset {off} of a {}-byte datagram",
                dgram.len()
            )));
        }
        let payload = &dgram[off + NLMSG_HDRLEN..off + msg_len];
        // Advance past the padded message; the last one may omit its padding.
        off = (off + align4(msg_len)).min(dgram.len());

        // Replies to an earlier, abandoned request on this socket: ignore.
        if msg_seq != seq {
            continue;
        }
        // inet_diag does not set this today; if it ever does, the tables
        // changed under the walk, which callers must tolerate anyway.
        if msg_flags & NLM_F_DUMP_INTR != 0 {
            tracing::debug!(family = name, "sock_diag dump interrupted by a table change");
        }
        match msg_type {
            NLMSG_NOOP => {}
            NLMSG_DONE => {
                // A dump's DONE carries the dump callback's final status.
                let status = rd_u32(payload, 0).map_or(0, |v| v as i32);
                if status < 0 {
                    return Err(kernel_error(name, -status, None));
                }
                return Ok(Progress::Done);
            }
            NLMSG_ERROR => {
                let errno = rd_u32(payload, 0).map_or(0, |v| v as i32);
                if errno == 0 {
                    continue; // an ACK; we never ask for one, harmless
                }
                let ext = ext_ack_message(payload, msg_flags);
                return Err(kernel_error(name, -errno, ext));
            }
            NLMSG_OVERRUN => return Err(SockDiagError::Overrun { family: name }),
            SOCK_DIAG_BY_FAMILY => match parse_inet_diag_msg(payload) {
                Some(sock) => out(sock),
                None => {
                    return Err(malformed(format!(
                        "inet_diag_msg of {} bytes (need {INET_DIAG_MSG_LEN}) or unknown address family {}",
                        payload.len(),
                        payload.first().copied().unwrap_or(0)
                    )))
                }
            },
            _ => {} // other control/unknown types carry nothing we need
        }
    }
    Ok(Progress::More)
}

fn kernel_error(name: &'static str, errno: i32, ext_ack: Option<String>) -> SockDiagError {
    let hint = match errno {
        libc::ENOENT => {
            "; the kernel has no TCP diag handler for this family: \
             load the tcp_diag module (`modprobe tcp_diag`) or enable CONFIG_INET_TCP_DIAG"
        }
        libc::EPERM | libc::EACCES => "; denied by an LSM or seccomp policy",
        libc::EINVAL => "; the kernel did not accept inet_diag_req_v2 (kernel too old?)",
        _ => "",
    };
    SockDiagError::Kernel {
        family: name,
        source: io::Error::from_raw_os_error(errno),
        ext_ack,
        hint,
    }
}

/// Pulls the NLMSGERR_ATTR_MSG string out of an NLMSG_ERROR payload, if any.
fn ext_ack_message(payload: &[u8], flags: u16) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    // struct nlmsgerr { int error; struct nlmsghdr msg; } then, unless
    // CAPPED, the rest of the echoed request, then the TLVs.
    let echoed = if flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        rd_u32(payload, 4)? as usize
    };
    let tlvs = payload.get(align4(4 + echoed)..)?;
    attrs(tlvs)
        .find(|(ty, _)| *ty == NLMSGERR_ATTR_MSG)
        .map(|(_, v)| {
            let v = v.split(|&c| c == 0).next().unwrap_or(v);
            String::from_utf8_lossy(v).into_owned()
        })
}

/// Iterates (type, payload) over a run of rtattr/nlattr TLVs, stopping at the
/// first one whose length does not fit rather than reading past the end.
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = rd_u16(b, 0)? as usize;
        let ty = rd_u16(b, 2)? & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            b = &[];
            return None;
        }
        let value = &b[4..len];
        b = b.get(align4(len)..).unwrap_or(&[]);
        Some((ty, value))
    })
}

/// Parses a `struct inet_diag_msg` plus its attributes.
fn parse_inet_diag_msg(p: &[u8]) -> Option<TcpSocket> {
    if p.len() < INET_DIAG_MSG_LEN {
        return None;
    }
    let family = p[0];
    let state = p[1];
    // struct inet_diag_sockid starts at 4. Ports and addresses are in
    // network byte order; interface and cookie are host order.
    let sport = u16::from_be_bytes([p[4], p[5]]);
    let dport = u16::from_be_bytes([p[6], p[7]]);
    let src: [u8; 16] = p[8..24].try_into().ok()?;
    let dst: [u8; 16] = p[24..40].try_into().ok()?;
    let ifindex = rd_u32(p, 40)?;
    let cookie = u64::from(rd_u32(p, 44)?) | (u64::from(rd_u32(p, 48)?) << 32);
    let uid = rd_u32(p, 64)?;
    let inode = rd_u32(p, 68)?;

    let (local, remote) = match family as libc::c_int {
        libc::AF_INET => {
            let ip = |a: &[u8; 16]| Ipv4Addr::new(a[0], a[1], a[2], a[3]);
            (
                SocketAddr::V4(SocketAddrV4::new(ip(&src), sport)),
                SocketAddr::V4(SocketAddrV4::new(ip(&dst), dport)),
            )
        }
        libc::AF_INET6 => {
            let mk = |a: [u8; 16], port| {
                let ip = Ipv6Addr::from(a);
                // idiag_if is the bound device; for link-local addresses that
                // is the scope, which SocketAddrV6 needs to be meaningful.
                let scope = if ip.is_unicast_link_local() { ifindex } else { 0 };
                SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope))
            };
            (mk(src, sport), mk(dst, dport))
        }
        _ => return None,
    };

    let cgroup_id = attrs(&p[INET_DIAG_MSG_LEN..])
        .filter(|(ty, _)| *ty == INET_DIAG_CGROUP_ID)
        .find_map(|(_, v)| Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?)));

    Some(TcpSocket {
        cookie,
        family,
        state,
        local,
        remote,
        cgroup_id,
        inode,
        uid,
    })
}

// --- classification -------------------------------------------------------

/// Which side of a connection a socket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A LISTEN socket.
    Listener,
    /// Accepted from a local listener (passive open): we serve it.
    Inbound,
    /// Anything else, i.e. presumably an active open (we are the client).
    Outbound,
}

/// A dumped socket worth adopting, with its inferred [`Role`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Classified {
    pub cookie: u64,
    pub cgroup_id: u64,
    pub state: u8,
    pub role: Role,
}

/// Strips the IPv4-mapped wrapper so `::ffff:a.b.c.d` compares equal to `a.b.c.d`.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether a listener bound to `listen` accepts connections addressed to `local`.
fn listener_covers(listen: IpAddr, local: IpAddr) -> bool {
    match listen {
        // `::` without IPV6_V6ONLY also accepts IPv4; we assume dual-stack.
        IpAddr::V6(a) if a.is_unspecified() => true,
        IpAddr::V4(a) if a.is_unspecified() => canonical(local).is_ipv4(),
        _ => canonical(listen) == canonical(local),
    }
}

/// Infers a socket's [`Role`] from the LISTEN sockets of the same dump (same
/// network namespace). `listeners` may contain any sockets; only those in
/// LISTEN state are considered.
///
/// Heuristic: a non-listening socket is [`Role::Inbound`] if some listener
/// has the same local port and a local address that is the same (v4-mapped
/// IPv6 and IPv4 compare equal) or unspecified (`0.0.0.0` covers IPv4, `::`
/// covers everything). SYN_SENT is always an active open, hence Outbound.
///
/// Limits (the kernel does not record which side opened a connection):
/// - An accepted connection whose listener has already been closed (e.g. a
///   server that stopped listening to drain, or a listener handed over to a
///   new process and closed) is reported **Outbound**.
/// - A client socket explicitly bound to a listener's port (SO_REUSEADDR /
///   SO_REUSEPORT, IP_TRANSPARENT) is reported **Inbound**. Kernel-chosen
///   ephemeral ports never collide with a bound listener port, so ordinary
///   clients are safe.
/// - IPV6_V6ONLY is not taken into account: a `::` listener is assumed to
///   cover IPv4 too, which can only turn a rare Outbound into Inbound.
/// - Transparent-proxy (TPROXY) accepts carry the original destination as
///   local address and port, so they look Outbound.
/// - Listeners in other network namespaces are invisible: classify each
///   namespace's dump on its own.
pub fn role_of(sock: &TcpSocket, listeners: &[&TcpSocket]) -> Role {
    role_among(sock, listeners.iter().copied())
}

fn role_among<'a>(sock: &TcpSocket, mut listeners: impl Iterator<Item = &'a TcpSocket>) -> Role {
    match sock.state {
        tcp_state::LISTEN => return Role::Listener,
        tcp_state::SYN_SENT => return Role::Outbound,
        _ => {}
    }
    let inbound = listeners.any(|l| {
        l.state == tcp_state::LISTEN
            && l.local.port() == sock.local.port()
            && listener_covers(l.local.ip(), sock.local.ip())
    });
    if inbound {
        Role::Inbound
    } else {
        Role::Outbound
    }
}

/// Classifies one namespace's dump (see [`role_of`] for the heuristic and
/// its limits). Returns only sockets that have a cgroup id and represent a
/// listener or a connection. Skipped:
/// - mini-sockets: TIME_WAIT and NEW_SYN_RECV. The kernel reports request
///   sockets as SYN_RECV and some timewait sockets as FIN_WAIT2, so they are
///   recognised by their missing cgroup id rather than by state;
/// - CLOSE / BOUND_INACTIVE sockets, i.e. bound but never connected.
///
/// Duplicate cookies, which a non-atomic dump can produce, are reported once.
pub fn classify(sockets: &[TcpSocket]) -> Vec<Classified> {
    let c = Classifier::new(sockets.iter().filter(|s| s.state == tcp_state::LISTEN).cloned());
    let mut seen = HashSet::new();
    sockets
        .iter()
        .filter_map(|s| c.classify(s))
        .filter(|c| seen.insert(c.cookie))
        .collect()
}

/// The states worth adopting: everything but the mini-sockets and the
/// never-connected (see [`classify`]).
pub const ADOPTABLE_STATES: u32 = ALL_STATES
    & !state_bit(tcp_state::TIME_WAIT)
    & !state_bit(tcp_state::NEW_SYN_RECV)
    & !state_bit(tcp_state::CLOSE)
    & !state_bit(tcp_state::BOUND_INACTIVE);

/// Classifies one socket at a time against a namespace's listeners, so a
/// dump can be classified as it streams in (dump the listeners first:
/// `state_bit(tcp_state::LISTEN)`).
pub struct Classifier {
    by_port: HashMap<u16, Vec<TcpSocket>>,
}

impl Classifier {
    pub fn new(listeners: impl IntoIterator<Item = TcpSocket>) -> Self {
        let mut by_port: HashMap<u16, Vec<TcpSocket>> = HashMap::new();
        for l in listeners.into_iter().filter(|s| s.state == tcp_state::LISTEN) {
            by_port.entry(l.local.port()).or_default().push(l);
        }
        Classifier { by_port }
    }

    /// `s` with its role, or `None` when it is not worth adopting (see
    /// [`classify`]). Duplicates are the caller's to drop.
    pub fn classify(&self, s: &TcpSocket) -> Option<Classified> {
        if matches!(
            s.state,
            tcp_state::TIME_WAIT | tcp_state::NEW_SYN_RECV | tcp_state::CLOSE | tcp_state::BOUND_INACTIVE
        ) {
            return None;
        }
        let cgroup_id = s.cgroup_id?;
        let listeners = self.by_port.get(&s.local.port()).into_iter().flatten();
        Some(Classified {
            cookie: s.cookie,
            cgroup_id,
            state: s.state,
            role: role_among(s, listeners),
        })
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
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::process::Command;

    /// This thread's cgroup v2 id (inode of its cgroup2 directory), if a
    /// cgroup2 hierarchy is mounted.
    fn own_cgroup_id() -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        // "... mount-point opts - fstype source superopts"
        let mount = mountinfo.lines().find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            if post.split(' ').next()? != "cgroup2" {
                return None;
            }
            pre.split(' ').nth(4).map(String::from)
        })?;
        let cg = std::fs::read_to_string("/proc/thread-self/cgroup").ok()?;
        let rel = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
        let dir = format!("{mount}{}", rel.trim_end_matches('/'));
        Some(std::fs::metadata(dir).ok()?.ino())
    }

    struct Fixture {
        listener: TcpListener,
        clients: Vec<TcpStream>,
        accepted: Vec<TcpStream>,
        /// Connected but deliberately left in the accept queue.
        pending: TcpStream,
    }

    fn fixture(addr: &str, n: usize) -> Fixture {
        let listener = TcpListener::bind(addr).unwrap();
        let target = listener.local_addr().unwrap();
        let mut clients = Vec::new();
        let mut accepted = Vec::new();
        for _ in 0..n {
            clients.push(TcpStream::connect(target).unwrap());
            accepted.push(listener.accept().unwrap().0);
        }
        let pending = TcpStream::connect(target).unwrap();
        Fixture {
            listener,
            clients,
            accepted,
            pending,
        }
    }

    fn ss_established(port: u16) -> usize {
        let out = Command::new("ss")
            .args(["-tnH", "state", "established"])
            .arg(format!("( sport = :{port} or dport = :{port} )"))
            .output()
            .expect("running ss");
        assert!(out.status.success(), "ss failed: {out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count()
    }

    fn find(dump: &[TcpSocket], local: SocketAddr, remote: SocketAddr) -> &TcpSocket {
        let hits: Vec<_> = dump
            .iter()
            .filter(|s| s.local == local && s.remote == remote)
            .collect();
        assert_eq!(hits.len(), 1, "{local} -> {remote}: {hits:?}");
        hits[0]
    }

    fn check_fixture(f: &Fixture, dump: &[TcpSocket], family: u8, cgroup: Option<u64>) {
        let laddr = f.listener.local_addr().unwrap();
        let port = laddr.port();
        let unspec = match laddr {
            SocketAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            SocketAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
        };
        let uid = unsafe { libc::geteuid() };
        let check = |s: &TcpSocket, state: u8, cookie: u64, what: &str| {
            assert_eq!(s.state, state, "{what}: {s:?}");
            assert_eq!(s.family, family, "{what}: {s:?}");
            assert_eq!(s.cookie, cookie, "{what}: cookie differs from SO_COOKIE");
            assert_ne!(s.cookie, 0, "{what}");
            assert!(s.cgroup_id.is_some(), "{what}: no cgroup id: {s:?}");
            if let Some(cg) = cgroup {
                assert_eq!(s.cgroup_id, Some(cg), "{what}: wrong cgroup");
            }
            assert_eq!(s.uid, uid, "{what}");
        };

        let l = find(dump, laddr, unspec);
        check(l, tcp_state::LISTEN, so_cookie(&f.listener), "listener");
        assert_ne!(l.inode, 0);
        for (c, a) in f.clients.iter().zip(&f.accepted) {
            let (cl, cr) = (c.local_addr().unwrap(), c.peer_addr().unwrap());
            let cs = find(dump, cl, cr);
            check(cs, tcp_state::ESTABLISHED, so_cookie(c), "client");
            assert_ne!(cs.inode, 0);
            let as_ = find(dump, cr, cl);
            check(as_, tcp_state::ESTABLISHED, so_cookie(a), "accepted");
            assert_ne!(as_.inode, 0);
        }
        // The not-yet-accepted server side exists, ESTABLISHED, without inode.
        let p = &f.pending;
        let queued = find(dump, p.peer_addr().unwrap(), p.local_addr().unwrap());
        assert_eq!(queued.state, tcp_state::ESTABLISHED);
        assert_eq!(queued.inode, 0, "accept-queue socket has no file yet");
        assert!(queued.cgroup_id.is_some());

        let ours = dump
            .iter()
            .filter(|s| s.state == tcp_state::ESTABLISHED)
            .filter(|s| s.local.port() == port || s.remote.port() == port)
            .count();
        // n clients + n accepted + pending client + its queued server side.
        assert_eq!(ours, 2 * f.clients.len() + 2);
        assert_eq!(ours, ss_established(port), "dump disagrees with ss");
    }

    #[test]
    fn dump_sees_loopback_v4_and_v6() {
        let v4 = fixture("127.0.0.1:0", 3);
        let v6 = fixture("[::1]:0", 2);
        let cgroup = own_cgroup_id();
        let dump = dump_tcp().expect("dump_tcp");
        check_fixture(&v4, &dump, libc::AF_INET as u8, cgroup);
        check_fixture(&v6, &dump, libc::AF_INET6 as u8, cgroup);
        // Cookies are unique among full sockets.
        let mut cookies: Vec<_> = dump
            .iter()
            .filter(|s| s.state != tcp_state::TIME_WAIT && s.state != tcp_state::NEW_SYN_RECV)
            .map(|s| s.cookie)
            .collect();
        let n = cookies.len();
        cookies.sort_unstable();
        cookies.dedup();
        assert_eq!(cookies.len(), n, "duplicate cookies in one dump");
    }

    #[test]
    fn classify_roles_on_real_sockets() {
        for addr in ["127.0.0.1:0", "[::1]:0"] {
            let f = fixture(addr, 2);
            let dump = dump_tcp().expect("dump_tcp");
            let roles: HashMap<u64, Role> = classify(&dump).into_iter().map(|c| (c.cookie, c.role)).collect();
            assert_eq!(roles.get(&so_cookie(&f.listener)), Some(&Role::Listener));
            for c in &f.clients {
                assert_eq!(roles.get(&so_cookie(c)), Some(&Role::Outbound), "{addr}");
            }
            assert_eq!(roles.get(&so_cookie(&f.pending)), Some(&Role::Outbound));
            for a in &f.accepted {
                assert_eq!(roles.get(&so_cookie(a)), Some(&Role::Inbound), "{addr}");
            }
        }
    }

    #[test]
    fn dual_stack_listener_accepts_v4_as_mapped_v6() {
        // An IPv4 client of a `::` listener: the accepted side is an AF_INET6
        // socket with a v4-mapped local address, and must count as Inbound.
        let Ok(listener) = TcpListener::bind("[::]:0") else {
            return; // IPv6 disabled on this host
        };
        let port = listener.local_addr().unwrap().port();
        let client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let dump = dump_tcp().unwrap();
        let acc = dump.iter().find(|s| s.cookie == so_cookie(&accepted)).unwrap();
        assert_eq!(acc.family, libc::AF_INET6 as u8);
        assert_eq!(
            acc.local.ip(),
            IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()),
            "reported faithfully as v4-mapped"
        );
        let cli = dump.iter().find(|s| s.cookie == so_cookie(&client)).unwrap();
        assert_eq!(cli.family, libc::AF_INET as u8);
        let roles: HashMap<u64, Role> = classify(&dump).into_iter().map(|c| (c.cookie, c.role)).collect();
        assert_eq!(roles[&acc.cookie], Role::Inbound);
        assert_eq!(roles[&cli.cookie], Role::Outbound);
    }

    #[test]
    fn request_sockets_are_syn_recv_without_cgroup() {
        // With TCP_DEFER_ACCEPT the server drops the client's bare final ACK,
        // so the server side stays a request mini-socket while the client is
        // already ESTABLISHED.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let secs: libc::c_int = 30;
        // SAFETY: valid fd, pointer/len describe a live c_int.
        let rc = unsafe {
            libc::setsockopt(
                l.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_DEFER_ACCEPT,
                (&secs as *const libc::c_int).cast(),
                4,
            )
        };
        assert_eq!(rc, 0);
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (cl, cr) = (c.local_addr().unwrap(), c.peer_addr().unwrap());
        let dump = dump_tcp().unwrap();
        let req = find(&dump, cr, cl);
        assert_eq!(req.state, tcp_state::SYN_RECV, "not NEW_SYN_RECV: {req:?}");
        assert_eq!((req.cgroup_id, req.inode), (None, 0));
        assert!(classify(&dump).iter().all(|x| x.cookie != req.cookie));
    }

    fn sock(state: u8, local: &str, remote: &str, cgroup: Option<u64>, cookie: u64) -> TcpSocket {
        let local: SocketAddr = local.parse().unwrap();
        TcpSocket {
            cookie,
            family: if local.is_ipv4() {
                libc::AF_INET
            } else {
                libc::AF_INET6
            } as u8,
            state,
            local,
            remote: remote.parse().unwrap(),
            cgroup_id: cgroup,
            inode: 1,
            uid: 0,
        }
    }

    #[test]
    fn role_heuristic_rules() {
        use tcp_state::*;
        let any6 = sock(LISTEN, "[::]:80", "[::]:0", Some(1), 1);
        let any4 = sock(LISTEN, "0.0.0.0:81", "0.0.0.0:0", Some(1), 2);
        let one4 = sock(LISTEN, "10.0.0.1:82", "0.0.0.0:0", Some(1), 3);
        let ls = [&any6, &any4, &one4];
        let role = |s: &str, st| role_of(&sock(st, s, "10.9.9.9:5555", Some(1), 9), &ls);
        assert_eq!(role_of(&any6, &ls), Role::Listener);
        assert_eq!(role("10.0.0.5:80", ESTABLISHED), Role::Inbound); // :: covers v4
        assert_eq!(role("[::ffff:10.0.0.5]:80", ESTABLISHED), Role::Inbound);
        assert_eq!(role("[fe80::1]:80", CLOSE_WAIT), Role::Inbound);
        assert_eq!(role("10.0.0.5:81", FIN_WAIT1), Role::Inbound);
        assert_eq!(role("[2001:db8::1]:81", ESTABLISHED), Role::Outbound); // 0.0.0.0 is v4 only
        assert_eq!(role("[::ffff:10.0.0.5]:81", ESTABLISHED), Role::Inbound);
        assert_eq!(role("10.0.0.1:82", ESTABLISHED), Role::Inbound);
        assert_eq!(role("[::ffff:10.0.0.1]:82", ESTABLISHED), Role::Inbound);
        assert_eq!(role("10.0.0.2:82", ESTABLISHED), Role::Outbound); // other address
        assert_eq!(role("10.0.0.1:83", ESTABLISHED), Role::Outbound); // no listener
        assert_eq!(role("10.0.0.5:80", SYN_SENT), Role::Outbound); // active open
                                                                   // Non-LISTEN entries in `listeners` are ignored.
        let est = sock(ESTABLISHED, "10.0.0.1:84", "10.0.0.2:1", Some(1), 4);
        assert_eq!(
            role_of(&sock(ESTABLISHED, "10.0.0.1:84", "10.0.0.3:1", None, 5), &[&est]),
            Role::Outbound
        );
    }

    #[test]
    fn classify_filters_and_dedupes() {
        use tcp_state::*;
        let dump = vec![
            sock(LISTEN, "0.0.0.0:80", "0.0.0.0:0", Some(7), 1),
            sock(ESTABLISHED, "10.0.0.1:80", "10.0.0.2:1000", Some(7), 2),
            sock(ESTABLISHED, "10.0.0.1:80", "10.0.0.2:1000", Some(7), 2), // dup
            sock(ESTABLISHED, "10.0.0.1:40000", "10.0.0.3:443", Some(8), 3),
            sock(ESTABLISHED, "10.0.0.1:40001", "10.0.0.3:443", None, 4), // no cgroup
            sock(TIME_WAIT, "10.0.0.1:80", "10.0.0.2:999", Some(7), 5),
            sock(NEW_SYN_RECV, "10.0.0.1:80", "10.0.0.2:998", Some(7), 6),
            sock(BOUND_INACTIVE, "10.0.0.1:40002", "0.0.0.0:0", Some(7), 7),
            sock(CLOSE_WAIT, "10.0.0.1:80", "10.0.0.2:997", Some(9), 8),
        ];
        let got = classify(&dump);
        let want = vec![
            Classified {
                cookie: 1,
                cgroup_id: 7,
                state: LISTEN,
                role: Role::Listener,
            },
            Classified {
                cookie: 2,
                cgroup_id: 7,
                state: ESTABLISHED,
                role: Role::Inbound,
            },
            Classified {
                cookie: 3,
                cgroup_id: 8,
                state: ESTABLISHED,
                role: Role::Outbound,
            },
            Classified {
                cookie: 8,
                cgroup_id: 9,
                state: CLOSE_WAIT,
                role: Role::Inbound,
            },
        ];
        assert_eq!(got, want);
    }

    // --- parser robustness, no kernel involved ---

    fn nlmsg(ty: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDRLEN + payload.len();
        let mut b = Vec::new();
        b.extend_from_slice(&(len as u32).to_ne_bytes());
        b.extend_from_slice(&ty.to_ne_bytes());
        b.extend_from_slice(&flags.to_ne_bytes());
        b.extend_from_slice(&seq.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(payload);
        b.resize(align4(b.len()), 0);
        b
    }

    fn diag_msg_v4(cookie: u64, attrs: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; INET_DIAG_MSG_LEN];
        p[0] = libc::AF_INET as u8;
        p[1] = tcp_state::ESTABLISHED;
        p[4..6].copy_from_slice(&8080u16.to_be_bytes());
        p[6..8].copy_from_slice(&443u16.to_be_bytes());
        p[8..12].copy_from_slice(&[10, 0, 0, 1]);
        p[24..28].copy_from_slice(&[10, 0, 0, 2]);
        p[44..48].copy_from_slice(&(cookie as u32).to_ne_bytes());
        p[48..52].copy_from_slice(&((cookie >> 32) as u32).to_ne_bytes());
        p[64..68].copy_from_slice(&1000u32.to_ne_bytes());
        p[68..72].copy_from_slice(&4242u32.to_ne_bytes());
        p.extend_from_slice(attrs);
        p
    }

    fn rta(ty: u16, v: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
        b.extend_from_slice(&ty.to_ne_bytes());
        b.extend_from_slice(v);
        b.resize(align4(b.len()), 0);
        b
    }

    #[test]
    fn parses_handmade_multipart_reply() {
        let cookie = 0x1122_3344_5566_7788u64;
        let mut attrs = rta(20 /* INET_DIAG_PAD */, &[]);
        attrs.extend(rta(INET_DIAG_CGROUP_ID, &77u64.to_ne_bytes()));
        let mut d = nlmsg(SOCK_DIAG_BY_FAMILY, 2, 5, &diag_msg_v4(cookie, &attrs));
        d.extend(nlmsg(SOCK_DIAG_BY_FAMILY, 2, 4, &diag_msg_v4(1, &[]))); // stale seq
        d.extend(nlmsg(NLMSG_DONE, 2, 5, &0i32.to_ne_bytes()));
        let mut out = Vec::new();
        assert_eq!(
            parse_datagram(&d, 5, "IPv4", &mut |s| out.push(s)).unwrap(),
            Progress::Done
        );
        assert_eq!(
            out,
            vec![TcpSocket {
                cookie,
                family: libc::AF_INET as u8,
                state: tcp_state::ESTABLISHED,
                local: "10.0.0.1:8080".parse().unwrap(),
                remote: "10.0.0.2:443".parse().unwrap(),
                cgroup_id: Some(77),
                inode: 4242,
                uid: 1000,
            }]
        );
    }

    #[test]
    fn odd_messages_are_errors_not_panics() {
        let mut out = Vec::new();
        // Short inet_diag_msg.
        let d = nlmsg(SOCK_DIAG_BY_FAMILY, 2, 1, &[2, 1, 0]);
        assert!(matches!(
            parse_datagram(&d, 1, "IPv4", &mut |s| out.push(s)),
            Err(SockDiagError::Malformed { .. })
        ));
        // nlmsg_len pointing past the datagram.
        let mut d = nlmsg(NLMSG_DONE, 2, 1, &0i32.to_ne_bytes());
        d[0] = 200;
        assert!(parse_datagram(&d, 1, "IPv4", &mut |s| out.push(s)).is_err());
        // A truncated attribute is ignored, the socket kept without cgroup.
        let bad_attr = [12u8, 0, 21, 0, 1, 2];
        let d = nlmsg(SOCK_DIAG_BY_FAMILY, 2, 1, &diag_msg_v4(3, &bad_attr));
        assert_eq!(
            parse_datagram(&d, 1, "IPv4", &mut |s| out.push(s)).unwrap(),
            Progress::More
        );
        assert_eq!(out.last().unwrap().cgroup_id, None);
        // Kernel error with an extended-ack message.
        let mut err = (-libc::ENOENT).to_ne_bytes().to_vec();
        err.extend_from_slice(&nlmsg(SOCK_DIAG_BY_FAMILY, 0, 1, &[])[..NLMSG_HDRLEN]);
        err.extend(rta(NLMSGERR_ATTR_MSG, b"no handler\0"));
        let d = nlmsg(NLMSG_ERROR, NLM_F_CAPPED | NLM_F_ACK_TLVS, 1, &err);
        let e = parse_datagram(&d, 1, "IPv6", &mut |s| out.push(s)).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("no handler") && text.contains("modprobe tcp_diag"),
            "{text}"
        );
        // Trailing garbage shorter than a header is tolerated.
        assert_eq!(
            parse_datagram(&[1, 2, 3], 1, "IPv4", &mut |s| out.push(s)).unwrap(),
            Progress::More
        );
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let mut out = Vec::new();
            let _ = parse_datagram(&bytes, 0, "IPv4", &mut |s| out.push(s));
            let _ = parse_inet_diag_msg(&bytes);
            let _ = ext_ack_message(&bytes, NLM_F_ACK_TLVS);
        }

        #[test]
        fn parser_never_panics_on_mutated_messages(
            cut in 0usize..200,
            flip in proptest::collection::vec((0usize..200, proptest::num::u8::ANY), 0..8),
        ) {
            let attrs = rta(INET_DIAG_CGROUP_ID, &5u64.to_ne_bytes());
            let mut d = nlmsg(SOCK_DIAG_BY_FAMILY, 2, 0, &diag_msg_v4(1, &attrs));
            d.extend(nlmsg(NLMSG_DONE, 2, 0, &0i32.to_ne_bytes()));
            for (i, v) in flip {
                if let Some(b) = d.get_mut(i) { *b = v; }
            }
            d.truncate(cut.min(d.len()));
            let mut out = Vec::new();
            let _ = parse_datagram(&d, 0, "IPv4", &mut |s| out.push(s));
        }
    }
}
