//! The agent's TCP listeners: an address as written (`127.0.0.1:9465`),
//! or `:PORT`, every address of the network namespace it is made in
//! ([`any_address`]): IPv6 and IPv4 on one dual-stack socket, or IPv4
//! alone where the namespace has no IPv6 (a kernel booted with
//! `ipv6.disable=1`). Go's `net.Listen("tcp", ":9464")` binds the same, as
//! the exporters Prometheus scrapes do, so a pod's port answers on
//! whichever family the cluster gave the pod: IPv4, IPv6, or both in
//! either order. The httpGet gate binds so in every pod; the local API,
//! the metrics address and a retired agent's probes as their flags say.
//!
//! IPV6_V6ONLY is cleared on the socket itself rather than left to the
//! namespace's `net.ipv6.bindv6only`, which a namespace may set.

use std::{
    io,
    net::{Ipv4Addr, Ipv6Addr, SocketAddrV6, TcpListener},
};

use rustix::net::{self, sockopt, AddressFamily, SocketFlags, SocketType};

/// std's own backlog for `TcpListener::bind`.
const BACKLOG: i32 = 128;

/// A tokio listener on `addr`: `:PORT` on every address ([`any_address`]),
/// or the address and port as written.
pub async fn tcp(addr: &str) -> io::Result<tokio::net::TcpListener> {
    let Some(port) = addr.strip_prefix(':') else {
        return tokio::net::TcpListener::bind(addr).await;
    };
    let port = port
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let listener = any_address(port)?;
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

/// Binds `port` on every address of the calling thread's network
/// namespace. Only a kernel without IPv6 (EAFNOSUPPORT) falls back to
/// IPv4 alone; any other error (a port taken among them) is the caller's
/// to report, so a listener never answers one family silently where the
/// cluster may use the other.
pub fn any_address(port: u16) -> io::Result<TcpListener> {
    match dual_stack(port) {
        Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
            tracing::debug!(port, "no IPv6 in this network namespace: listening on IPv4 alone");
            TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))
        }
        r => r,
    }
}

fn dual_stack(port: u16) -> io::Result<TcpListener> {
    let fd = net::socket_with(
        AddressFamily::INET6,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    // As std does: a previous listener's connections in TIME_WAIT do not
    // keep the port, while another listener still does.
    sockopt::set_socket_reuseaddr(&fd, true)?;
    sockopt::set_ipv6_v6only(&fd, false)?;
    net::bind(&fd, &SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0))?;
    net::listen(&fd, BACKLOG)?;
    Ok(TcpListener::from(fd))
}

#[cfg(test)]
mod tests;
