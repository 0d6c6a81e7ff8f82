//! A kubelet's httpGet hook that the previous agent held, handed over
//! before any byte of its answer was written: this agent runs the drain
//! again from the hook's original start ([`Hooks::resume`]) and writes the
//! whole answer (`connection: close`) on the same connection.

use std::os::fd::OwnedFd;

use super::server::respond;
use crate::{
    drain::hook::{Reheld, Unresumed},
    serve::gate::server::refused_hook,
    serve::reply::{error, Body},
};
use http_body_util::BodyExt as _;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

/// Runs the handed-over hook's drain to its release and answers it.
pub async fn http(held: Reheld<TcpStream>) {
    let (mut rd, mut wr) = held.stream.into_split();
    let resp = match held.started {
        Err(Unresumed::Refused(r)) => refused_hook(r),
        Err(Unresumed::Unreadable(why)) => {
            error(http::StatusCode::BAD_REQUEST, format!("after a handover: {why}"))
        }
        Ok(started) => {
            // The kubelet sends nothing more; a close is its giving up
            // (its hook's timeout).
            let gone = async {
                let mut probe = [0u8; 1];
                while !matches!(rd.read(&mut probe).await, Ok(0) | Err(_)) {}
            };
            match respond(started.run(|_| {}, gone).await) {
                Some(resp) => resp,
                None => return,
            }
        }
    };
    let _ = wr.write_all(&serialize(resp).await).await;
    let _ = wr.shutdown().await;
}

/// A handed-over httpGet hook whose record could not be read: answered
/// `500` with why (the kubelet takes any answer as the hook's end).
pub async fn fail_open(fd: OwnedFd, why: &str) {
    let Ok(s) = open(fd) else { return };
    let resp = error(
        http::StatusCode::INTERNAL_SERVER_ERROR,
        format!("after a handover: {why}"),
    );
    let (_, mut wr) = s.into_split();
    let _ = wr.write_all(&serialize(resp).await).await;
    let _ = wr.shutdown().await;
}

/// A response as HTTP/1.1 bytes, closing the connection after it.
async fn serialize(resp: http::Response<Body>) -> Vec<u8> {
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        parts.status.as_u16(),
        parts.status.canonical_reason().unwrap_or("")
    );
    for (k, v) in &parts.headers {
        if let Ok(v) = v.to_str() {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    out.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    ));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// The connection of a held httpGet hook, as the gate serves it.
pub fn open(fd: OwnedFd) -> std::io::Result<TcpStream> {
    let s = std::net::TcpStream::from(fd);
    s.set_nonblocking(true)?;
    TcpStream::from_std(s)
}
