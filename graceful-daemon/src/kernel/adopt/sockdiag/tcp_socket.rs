//! One TCP socket as the kernel reports it, and the kernel's TCP state
//! numbers.

use std::net::SocketAddr;

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
