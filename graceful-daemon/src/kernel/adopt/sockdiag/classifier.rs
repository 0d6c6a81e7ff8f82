//! The classifier: which side of a connection each dumped socket is,
//! inferred from the listeners of the same network namespace, and which
//! sockets are worth adopting at all.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use serde::Serialize;

use super::{
    dump::{state_bit, ALL_STATES},
    tcp_socket::{tcp_state, TcpSocket},
};

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

/// Whether a listener bound to `listen` accepts connections addressed to `local`.
fn listener_covers(listen: IpAddr, local: IpAddr) -> bool {
    match listen {
        // `::` without IPV6_V6ONLY also accepts IPv4; we assume dual-stack.
        IpAddr::V6(a) if a.is_unspecified() => true,
        IpAddr::V4(a) if a.is_unspecified() => local.to_canonical().is_ipv4(),
        _ => listen.to_canonical() == local.to_canonical(),
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

#[cfg(test)]
mod tests;
