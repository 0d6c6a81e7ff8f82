//! The local API's listeners: a TCP address, a unix socket, and a metrics
//! address, one task per connection, the same handlers on each (the
//! metrics address answers only `/metrics`, `/healthz` and `/readyz`:
//! [`Scope`]).
//!
//! Each listener counts its connections in a budget of its own
//! ([`Budget`]), so that no caller of one can take another's:
//! - the loopback address and the unix socket (the CLI, `kubectl graceful`
//!   through a port-forward): one table, by peer;
//! - the metrics address, on the pod network, which any pod of the cluster
//!   can reach: the kubelet's probes (a process outside every pod, on one
//!   of the node's addresses, as the node's kernel tells its socket) count
//!   in a table no pod can enter; everyone else, a hostNetwork pod
//!   included, shares the public one, a few connections per peer address,
//!   and gets one request per connection there, so that a connection kept
//!   alive holds no slot between scrapes.

use std::{os::fd::AsRawFd, path::Path, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, UnixListener},
};
use tracing::{debug, warn};

use super::routes::{handle, Api, Scope};
use crate::{
    node::addrs::{NodeAddrs, NodeCaller},
    node::resolver::index::Owner,
    serve::http_conn::{self, Requests},
    share::{Limits, Shares, Ticket},
};

/// How a listener's connections are counted.
#[derive(Clone)]
pub enum Budget {
    /// One table, by peer (an address, or the unix socket).
    One(Arc<Shares>),
    /// The metrics address: the probes apart from everyone else.
    Probes(Arc<ProbeBudget>),
}

/// The metrics address's two tables.
pub struct ProbeBudget {
    /// The node's addresses and its sockets.
    pub node: Arc<NodeAddrs>,
    /// Whose a cgroup is (the resolver's view).
    pub owner: Box<dyn Fn(u64) -> Option<Owner> + Send + Sync>,
    /// Processes outside every pod on one of the node's addresses.
    pub reserved: Arc<Shares>,
    /// Everyone else.
    pub public: Arc<Shares>,
}

impl ProbeBudget {
    /// The kubelet's probes: one connection each, a few at a time (a
    /// readiness and a liveness probe of this pod, and of a surge pod
    /// beside it), with room for their retries.
    pub const RESERVED: Limits = Limits {
        total: 16,
        per_caller: 16,
    };
    /// Everyone else on the pod network: a scraper needs one connection
    /// per scrape; a peer past [`PUBLIC_PER_PEER`] is turned away.
    pub const PUBLIC: Limits = Limits {
        total: 128,
        per_caller: PUBLIC_PER_PEER,
    };
}

/// Connections one peer address may hold on the metrics address.
pub const PUBLIC_PER_PEER: usize = 4;

/// Where one connection counts: its ticket, and how many requests it may
/// make.
struct Admitted {
    ticket: Ticket,
    requests: Requests,
}

impl Budget {
    /// Admits a connection from `peer` (an address, or the unix socket's
    /// name) that arrived at `local`; the refusal to answer at once.
    fn admit(&self, peer: &Peer) -> Result<Admitted, crate::share::Busy> {
        match (self, peer) {
            (Budget::One(s), p) => Ok(Admitted {
                ticket: s.connect(&p.key())?,
                requests: Requests::Many,
            }),
            (Budget::Probes(b), p) => {
                let host = matches!(p, Peer::Tcp { peer, local }
                    if b.node.is_node(peer.ip())
                        && matches!(b.node.caller(*peer, *local, &b.owner), NodeCaller::Host { .. }));
                let ticket = if host {
                    b.reserved.connect("the node")?
                } else {
                    b.public.connect(&p.key())?
                };
                Ok(Admitted {
                    ticket,
                    requests: Requests::One,
                })
            }
        }
    }
}

/// Who connected.
pub enum Peer {
    Tcp {
        peer: std::net::SocketAddr,
        local: std::net::SocketAddr,
    },
    Unix,
}

impl Peer {
    fn key(&self) -> String {
        match self {
            // An IPv4 peer of a dual-stack listener (`::ffff:10.0.0.5`)
            // keeps the share of its IPv4 address.
            Peer::Tcp { peer, .. } => peer.ip().to_canonical().to_string(),
            Peer::Unix => "unix socket".into(),
        }
    }
}

fn serve_conn<IO>(api: Arc<Api>, scope: Scope, io: IO, admitted: Admitted)
where
    IO: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        http_conn::serve_limited(io, "API", admitted.requests, move |req| {
            handle(api.clone(), scope, req)
        })
        .await;
        drop(admitted.ticket);
    });
}

/// A listener of either kind.
pub trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + 'static;
    /// The next connection, and who it is from.
    fn next(&self) -> impl std::future::Future<Output = std::io::Result<(Self::Io, Peer)>> + Send;
}

impl Accept for TcpListener {
    type Io = tokio::net::TcpStream;
    async fn next(&self) -> std::io::Result<(Self::Io, Peer)> {
        let (s, peer) = self.accept().await?;
        let local = s.local_addr()?;
        Ok((s, Peer::Tcp { peer, local }))
    }
}

impl Accept for UnixListener {
    type Io = tokio::net::UnixStream;
    /// Root's only (the socket is 0600): one caller.
    async fn next(&self) -> std::io::Result<(Self::Io, Peer)> {
        self.accept().await.map(|(s, _)| (s, Peer::Unix))
    }
}

/// Serves `api`'s routes of `scope` on `listener` until the task is dropped.
pub async fn serve<L: Accept>(listener: L, api: Arc<Api>, scope: Scope, budget: Budget) {
    loop {
        match listener.next().await {
            Ok((s, peer)) => match budget.admit(&peer) {
                Ok(admitted) => serve_conn(api.clone(), scope, s, admitted),
                Err(busy) => {
                    let status = busy.status();
                    api.node.metrics.error("api_busy");
                    debug!(error = %busy, "API: refused a connection past its share");
                    http_conn::answer_now(&s, status, &busy.to_string());
                }
            },
            Err(e) => {
                warn!(error = %e, "API accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Binds the unix socket at `path`, replacing a stale one, readable and
/// writable by root only (the API shows every pod on the node).
pub fn bind_unix(path: &Path) -> anyhow::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {} for the API socket: {e}", dir.display()))?;
    }
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path)
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e} (set --api-socket)", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| anyhow::anyhow!("cannot make {} root's only: {e}", path.display()))?;
    Ok(l)
}

#[cfg(test)]
mod tests;
