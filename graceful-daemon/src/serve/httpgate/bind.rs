//! A listening socket bound inside a pod's network namespace: the httpGet
//! gate's on every address of it ([`crate::listen::any_address`]), or the socket gate's
//! abstract unix socket, [`graceful_api::POD_SOCKET`].

use std::{io, net::TcpListener, os::unix::net::UnixListener};

use crate::{
    continuity::handover::wire::Endpoint,
    kernel::adopt::netns::{run_in, NetNs},
};

/// Why a listener could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// Something in the pod listens on the port already.
    #[error("port {0} is taken in the pod's network namespace: set graceful.dev/gate-port to a port nothing in the pod uses")]
    Taken(u16),
    /// Something in the pod has bound the socket gate's name already.
    #[error("@{} is bound already in the pod's network namespace, by something not this agent: use graceful.dev/gate: http for this pod", graceful_api::POD_SOCKET)]
    NameTaken,
    #[error("cannot listen on {at} in the pod's network namespace ({origin}): {source}")]
    Other {
        at: Endpoint,
        origin: String,
        source: io::Error,
    },
}

/// Binds `port` in `ns`. The socket is created on a thread that entered
/// `ns`, so it belongs to the namespace (and, like every socket of the
/// agent, to the agent's cgroup, never the pod's). Non-blocking, for tokio.
pub fn listen_in(ns: &NetNs, port: u16) -> Result<TcpListener, BindError> {
    let other = |source: io::Error| BindError::Other {
        at: Endpoint::Port(port),
        origin: ns.origin.display().to_string(),
        source,
    };
    let bound = run_in(ns, || crate::listen::any_address(port)).map_err(other)?;
    let listener = bound.map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => BindError::Taken(port),
        _ => other(e),
    })?;
    listener.set_nonblocking(true).map_err(other)?;
    Ok(listener)
}

/// Binds the socket gate, [`graceful_api::POD_SOCKET`], in `ns`: an
/// abstract unix socket, so it belongs to the namespace (any process of
/// the pod may connect; who it is comes from SO_PEERCRED), leaves nothing
/// on a filesystem, and goes with the namespace. Non-blocking, for tokio.
pub fn socket_in(ns: &NetNs) -> Result<UnixListener, BindError> {
    use std::os::{linux::net::SocketAddrExt as _, unix::net::SocketAddr};
    let other = |source: io::Error| BindError::Other {
        at: Endpoint::Socket,
        origin: ns.origin.display().to_string(),
        source,
    };
    let bound = run_in(ns, || {
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(graceful_api::POD_SOCKET)?)
    })
    .map_err(other)?;
    let listener = bound.map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => BindError::NameTaken,
        _ => other(e),
    })?;
    listener.set_nonblocking(true).map_err(other)?;
    Ok(listener)
}
