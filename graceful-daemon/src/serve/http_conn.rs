//! One HTTP/1.1 connection, served by hyper, for the gate and the local
//! API alike. A client that has not sent a whole request head within
//! [`HEAD_TIMEOUT`] (a slowloris, or a stuck one) gets a `408` and one line
//! of JSON, then the connection closes: hyper's own header timeout would
//! close it without a word. A request hyper cannot parse gets its
//! automatic `400` (`414`, `431`) with one line of JSON too
//! ([`JsonErrors`]): hyper's own has an empty body.
//!
//! What one connection may hold of the agent is bounded: its read buffer
//! ([`MAX_BUF`]), the time a request head may take ([`HEAD_TIMEOUT`]), the
//! time a write may stay blocked on a client that does not read
//! ([`WRITE_TIMEOUT`]), and, where a server asks ([`Requests::One`]),
//! its number of requests.

use std::{
    convert::Infallible,
    future::Future,
    io,
    os::fd::{AsRawFd, RawFd},
    pin::Pin,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    task::{ready, Context, Poll},
    time::Duration,
};

use http::{Request, Response};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tracing::debug;

use crate::serve::reply::Body;

/// How long a client may take to send a request's head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a write may wait for a client to read: one that reads nothing
/// of a stream (a drain's lines, the event feed) for this long is cut.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// hyper's read buffer per connection (its default is about 400 KiB): a
/// request head of the gate, the hook's query or the API is a few hundred
/// bytes; 16 KiB leaves room for a client's long headers.
pub const MAX_BUF: usize = 16 * 1024;

/// How many requests a connection may make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requests {
    /// Kept alive for as many as the client sends.
    Many,
    /// One, answered with `connection: close`: for servers whose callers
    /// must not hold a connection between requests.
    One,
}

/// Serves `io` until it closes, calling `handle` for each request.
pub async fn serve<IO, H, F>(io: IO, what: &'static str, handle: H)
where
    IO: AsyncRead + AsyncWrite + AsRawFd + Unpin + Send + 'static,
    H: Fn(Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    serve_limited(io, what, Requests::Many, handle).await
}

/// [`serve`], with `requests` requests at most.
pub async fn serve_limited<IO, H, F>(io: IO, what: &'static str, requests: Requests, handle: H)
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
        .max_buf_size(MAX_BUF)
        .keep_alive(requests == Requests::Many)
        .serve_connection(TokioIo::new(JsonErrors::new(WriteDeadline::new(io))), svc);
    tokio::pin!(conn);
    let timer = tokio::time::sleep(HEAD_TIMEOUT);
    tokio::pin!(timer);
    let result = tokio::select! {
        r = &mut conn => r,
        _ = &mut timer => {
            if !started.load(Ordering::Relaxed) {
                // `conn` still owns the socket, so the fd is open.
                send_now(fd, &timed_out());
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

/// `io`, with hyper's automatic answers to requests it cannot parse
/// given a body: one JSON line, as every other error has. Those answers
/// are the only 4xx heads without a content type (every response of ours
/// has one), written whole in one write (hyper flattens its writes for an
/// `io` without vectored writes).
pub struct JsonErrors<IO> {
    io: IO,
    /// Our answer in place of hyper's, and how much of it is written.
    pending: Vec<u8>,
    at: usize,
}

impl<IO> JsonErrors<IO> {
    pub fn new(io: IO) -> JsonErrors<IO> {
        JsonErrors {
            io,
            pending: Vec::new(),
            at: 0,
        }
    }
}

impl<IO: AsyncWrite + Unpin> JsonErrors<IO> {
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.at < self.pending.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.pending[self.at..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.at += n;
        }
        self.pending.clear();
        self.at = 0;
        Poll::Ready(Ok(()))
    }
}

/// Our answer for `buf`, when it is one of hyper's bodiless error heads.
pub fn json_error_for(buf: &[u8]) -> Option<Vec<u8>> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&buf[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?;
    let code: u16 = status
        .strip_prefix("HTTP/1.1 ")
        .or_else(|| status.strip_prefix("HTTP/1.0 "))?
        .get(..3)?
        .parse()
        .ok()?;
    if !(400..500).contains(&code) || lines.any(|l| l.to_ascii_lowercase().starts_with("content-type:")) {
        return None;
    }
    let (reason, why) = match code {
        414 => ("URI Too Long", "request target too long"),
        431 => ("Request Header Fields Too Large", "request head too large"),
        _ => (
            "Bad Request",
            "malformed HTTP/1.1 request (request line or headers)",
        ),
    };
    let body = format!("{{\"error\":\"{why}: closing\"}}\n");
    Some(
        format!(
            "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for JsonErrors<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.drain(cx))?;
        let Some(ours) = json_error_for(buf) else {
            return Pin::new(&mut this.io).poll_write(cx, buf);
        };
        this.pending = ours;
        // Taken whole; what the socket does not take now goes with the flush.
        if let Poll::Ready(Err(e)) = this.drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.drain(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.drain(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for JsonErrors<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

/// `io` whose writes fail once one has waited [`WRITE_TIMEOUT`] for the
/// client to read: hyper has no write timeout of its own.
pub struct WriteDeadline<IO> {
    io: IO,
    blocked: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<IO> WriteDeadline<IO> {
    pub fn new(io: IO) -> WriteDeadline<IO> {
        WriteDeadline { io, blocked: None }
    }

    /// `poll`'s outcome, with the deadline started when it blocks and
    /// cleared when it makes progress.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.blocked = None;
            return poll;
        }
        let timer = self
            .blocked
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_TIMEOUT)));
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {} s", WRITE_TIMEOUT.as_secs()),
            )));
        }
        Poll::Pending
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch(cx, poll)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.io).poll_flush(cx);
        this.watch(cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for WriteDeadline<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests;

/// Answers `status` with `message` as one JSON line, at once and without
/// reading the request, then lets the connection close: for callers
/// turned away before anything is spent on them. What the socket buffer
/// does not take at once is dropped, never waited for.
pub fn answer_now(stream: &impl AsRawFd, status: http::StatusCode, message: &str) {
    send_now(stream.as_raw_fd(), &canned(status, message));
}

/// A whole response: `status` and `message` as one JSON line.
fn canned(status: http::StatusCode, message: &str) -> Vec<u8> {
    let body = crate::serve::reply::line_bytes(&graceful_api::drain::ErrorBody {
        error: message.to_string(),
    });
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    [head.as_bytes(), &body].concat()
}

/// The answer to a connection that sent no request head in time.
fn timed_out() -> Vec<u8> {
    canned(
        http::StatusCode::REQUEST_TIMEOUT,
        &format!(
            "request head not received within {} s: closing",
            HEAD_TIMEOUT.as_secs()
        ),
    )
}
