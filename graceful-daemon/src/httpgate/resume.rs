//! A kubelet's httpGet hook that the previous agent held, handed over
//! before any byte of its answer was written: this agent runs the drain
//! again from the hook's original start and writes the whole answer
//! (`connection: close`) on the same connection.

use std::{os::fd::OwnedFd, sync::Arc};

use graceful_api::hook_query;
use http::StatusCode;
use http_body_util::BodyExt as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tracing::{info, warn};

use super::server::{respond, Ctx, InFlight};
use crate::{
    drain::scope::Subject,
    gate::server::refused,
    handover::{
        held::{Hold, Registry},
        wire::{HttpHook, Record},
    },
    reply::{error, Body},
};

/// A handed-over httpGet hook, registered as held.
pub struct Resumed {
    hook: HttpHook,
    stream: tokio::net::TcpStream,
    hold: Option<Hold>,
}

impl Resumed {
    /// Registers the hook as held (at once, so that a handover or a keeper
    /// carries it on); `None` if its connection cannot be served.
    pub fn hold(registry: &Arc<Registry>, hook: HttpHook, fd: OwnedFd) -> Option<Resumed> {
        let stream = match to_tokio(fd) {
            Ok(s) => s,
            Err(e) => {
                warn!(pod = %hook.pod, error = %e, "handover: cannot serve a held httpGet hook");
                return None;
            }
        };
        let hold = registry.resume(Record::HttpHook(hook.clone()), std::os::fd::AsFd::as_fd(&stream));
        Some(Resumed { hook, stream, hold })
    }
}

/// Runs the handed-over hook's drain to its release and answers it.
pub async fn http(ctx: Arc<Ctx>, resumed: Resumed) {
    let Resumed { hook, stream, hold } = resumed;
    let pod = hook.pod.clone();
    let (mut rd, mut wr) = stream.into_split();
    let prepared = match hook_query::parse(&hook.query, hook.started_unix_ms) {
        Err(e) => Err(error(StatusCode::BAD_REQUEST, format!("after a handover: {e}"))),
        Ok(q) => {
            // No namespace for the drain: the previous agent walked the
            // pod's sockets when it began (see `gate::resume`).
            let who = Subject {
                pod: hook.pod.clone(),
                container: hook.container.clone(),
                netns: None,
            };
            ctx.drainer
                .prepare(who, &q.request, hook.arrived_ns)
                .map_err(refused)
        }
    };
    let resp = match prepared {
        Err(resp) => resp,
        Ok(prepared) => {
            let counted = InFlight::new(&ctx.in_flight);
            let so_far = hold.as_ref().map(|h| h.progress());
            // The report carries on from what the previous agent saw.
            let prepared = prepared.carrying_on(hook.progress.clone());
            let run = ctx.drainer.clone().run(prepared, |p| {
                if let Some(s) = &so_far {
                    s.point(p);
                }
            });
            tokio::pin!(run);
            let mut probe = [0u8; 1];
            let result = loop {
                tokio::select! {
                    r = &mut run => break r,
                    n = rd.read(&mut probe) => {
                        // The kubelet sends nothing more; a close is its
                        // giving up (its hook's timeout).
                        if matches!(n, Ok(0) | Err(_)) {
                            return info!(pod = %pod, "drain abandoned: the kubelet closed the hook's connection");
                        }
                    }
                }
            };
            if let Some(h) = hold {
                h.release().await;
            }
            drop(counted);
            respond(result)
        }
    };
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

fn to_tokio(fd: OwnedFd) -> std::io::Result<tokio::net::TcpStream> {
    let s = std::net::TcpStream::from(fd);
    s.set_nonblocking(true)?;
    tokio::net::TcpStream::from_std(s)
}
