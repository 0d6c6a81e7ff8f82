//! One HTTP/1.1 connection, served by hyper, for the gate and the local
//! API alike. A client that has not sent a whole request head within
//! [`HEAD_TIMEOUT`] (a slowloris, or a stuck one) gets a `408` and one line
//! of JSON, then the connection closes: hyper's own header timeout would
//! close it without a word.

use std::{
    convert::Infallible,
    future::Future,
    os::fd::{AsRawFd, RawFd},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use http::{Request, Response};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::debug;

use crate::reply::Body;

/// How long a client may take to send a request's head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

const TIMED_OUT: &[u8] = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n\
content-length: 58\r\nconnection: close\r\n\r\n{\"error\":\"request head not received within 5 s: closing\"}\n";

/// Serves `io` until it closes, calling `handle` for each request.
pub async fn serve<IO, H, F>(io: IO, what: &'static str, handle: H)
where
    IO: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let fd = io.as_raw_fd();
    let started = Arc::new(AtomicBool::new(false));
    let seen = started.clone();
    let handle = Arc::new(handle);
    let svc = service_fn(move |req| {
        seen.store(true, Ordering::Relaxed);
        let handle = handle.clone();
        async move { Ok::<_, Infallible>(handle(req).await) }
    });
    // hyper's own timeout covers later requests on a kept-alive connection;
    // the first is ours, so it can be answered.
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT + Duration::from_secs(1))
        .serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let timer = tokio::time::sleep(HEAD_TIMEOUT);
    tokio::pin!(timer);
    let result = tokio::select! {
        r = &mut conn => r,
        _ = &mut timer => {
            if !started.load(Ordering::Relaxed) {
                // `conn` still owns the socket, so the fd is open.
                send_now(fd, TIMED_OUT);
                debug!(what, "closed a connection that sent no request head in time");
                return;
            }
            conn.await
        }
    };
    if let Err(e) = result {
        debug!(what, error = %e, "connection ended with an error");
    }
}

/// Writes what the socket buffer takes at once, never blocking.
fn send_now(fd: RawFd, bytes: &[u8]) {
    // SAFETY: `fd` is an open socket for the duration of the call; the
    // buffer is live and its length is passed.
    unsafe {
        libc::send(
            fd,
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        );
    }
}

#[cfg(test)]
mod tests;

/// Answers `status` with `message` as one JSON line, at once and without
/// reading the request, then lets the connection close: for callers
/// turned away before anything is spent on them. What the socket buffer
/// does not take at once is dropped, never waited for.
pub fn answer_now(stream: &impl AsRawFd, status: http::StatusCode, message: &str) {
    let body = crate::reply::line_bytes(&crate::reply::ErrorBody {
        error: message.to_string(),
    });
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    send_now(stream.as_raw_fd(), &[head.as_bytes(), &body].concat());
}
