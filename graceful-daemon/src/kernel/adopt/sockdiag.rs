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
//!
//! - `tcp_socket`: one TCP socket as the kernel reports it ([`TcpSocket`]),
//!   and the TCP state numbers ([`tcp_state`]);
//! - `error`: what can go wrong ([`SockDiagError`]);
//! - `uapi`: the kernel's numbers and sizes, and the receive limits;
//! - `netlink`: the dump request built and the replies parsed;
//! - `dump`: the netlink socket, and the dumps streamed through it
//!   ([`dump_tcp`], [`for_each_tcp`]), and one socket looked up by its
//!   addresses ([`Lookup`]);
//! - `classifier`: which side of a connection a socket is ([`classify`],
//!   [`Classifier`]).

mod classifier;
mod dump;
mod error;
mod netlink;
mod tcp_socket;
mod uapi;

pub use classifier::{classify, role_of, Classified, Classifier, Role, ADOPTABLE_STATES};
#[cfg(test)]
pub(crate) use dump::so_cookie;
pub use dump::{dump_tcp, for_each_tcp, state_bit, Lookup, ALL_STATES};
pub use error::SockDiagError;
pub use tcp_socket::{tcp_state, TcpSocket};
