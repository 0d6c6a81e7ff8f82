//! The local API's listeners: a TCP address and a unix socket, one task
//! per connection, the same handlers on both.

use std::{convert::Infallible, path::Path, sync::Arc, time::Duration};

use hyper::{server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, UnixListener},
};
use tracing::{debug, warn};

use super::routes::{handle, Api};

/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

fn serve_conn<IO>(api: Arc<Api>, io: IO)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let svc = service_fn(move |req| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(handle(api, req).await) }
        });
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(READ_TIMEOUT)
            .serve_connection(TokioIo::new(io), svc);
        if let Err(e) = conn.await {
            debug!(error = %e, "API connection ended with an error");
        }
    });
}

/// A listener of either kind.
pub trait Accept: Send + 'static {
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
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
