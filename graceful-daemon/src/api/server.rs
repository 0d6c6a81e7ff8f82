//! The local API's listeners: a TCP address, a unix socket, and a metrics
//! address, one task per connection, the same handlers on each (the
//! metrics address answers only `/metrics`, `/healthz` and `/readyz`:
//! [`Scope`]). The metrics address is the pod's own in the DaemonSet, so
//! any pod of the cluster can reach it: each peer address gets a fair
//! share of connections ([`crate::share`]), and the API as a whole a
//! bound, so a flood of scrapes cannot take the descriptors the gate needs.

use std::{os::fd::AsRawFd, path::Path, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, UnixListener},
};
use tracing::{debug, warn};

use super::routes::{handle, Api, Scope};
use crate::{
    http_conn,
    share::{Shares, Ticket},
};

fn serve_conn<IO>(api: Arc<Api>, scope: Scope, io: IO, ticket: Ticket)
where
    IO: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        http_conn::serve(io, "API", move |req| handle(api.clone(), scope, req)).await;
        drop(ticket);
    });
}

/// A listener of either kind.
pub trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + 'static;
    /// The next connection, and the caller it counts against.
    fn next(&self) -> impl std::future::Future<Output = std::io::Result<(Self::Io, String)>> + Send;
}

impl Accept for TcpListener {
    type Io = tokio::net::TcpStream;
    async fn next(&self) -> std::io::Result<(Self::Io, String)> {
        self.accept().await.map(|(s, peer)| (s, peer.ip().to_string()))
    }
}

impl Accept for UnixListener {
    type Io = tokio::net::UnixStream;
    /// Root's only (the socket is 0600): one caller.
    async fn next(&self) -> std::io::Result<(Self::Io, String)> {
        self.accept().await.map(|(s, _)| (s, "unix socket".to_string()))
    }
}

/// Serves `api`'s routes of `scope` on `listener` until the task is dropped.
pub async fn serve<L: Accept>(listener: L, api: Arc<Api>, scope: Scope, shares: Arc<Shares>) {
    loop {
        match listener.next().await {
            Ok((s, caller)) => match shares.connect(&caller) {
                Ok(ticket) => serve_conn(api.clone(), scope, s, ticket),
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
