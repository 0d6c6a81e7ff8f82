//! The local API's listeners: a TCP address and a unix socket, one task
//! per connection, the same handlers on both.

use std::{os::fd::AsRawFd, path::Path, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, UnixListener},
};
use tracing::warn;

use super::routes::{handle, Api};
use crate::http_conn;

fn serve_conn<IO>(api: Arc<Api>, io: IO)
where
    IO: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + 'static,
{
    tokio::spawn(http_conn::serve(io, "API", move |req| handle(api.clone(), req)));
}

/// A listener of either kind.
pub trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + 'static;
    fn next(&self) -> impl std::future::Future<Output = std::io::Result<Self::Io>> + Send;
}

impl Accept for TcpListener {
    type Io = tokio::net::TcpStream;
    async fn next(&self) -> std::io::Result<Self::Io> {
        self.accept().await.map(|(s, _)| s)
    }
}

impl Accept for UnixListener {
    type Io = tokio::net::UnixStream;
    async fn next(&self) -> std::io::Result<Self::Io> {
        self.accept().await.map(|(s, _)| s)
    }
}

/// Serves `api` on `listener` until the task is dropped.
pub async fn serve<L: Accept>(listener: L, api: Arc<Api>) {
    loop {
        match listener.next().await {
            Ok(s) => serve_conn(api.clone(), s),
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
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}
