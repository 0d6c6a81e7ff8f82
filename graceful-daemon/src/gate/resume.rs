//! An exec hook that the previous agent held, handed over mid-drain: its
//! `graceful-wait` still reads the same response, whose head and first
//! lines that agent wrote. This agent runs the drain again from the hook's
//! original start and writes what is left of the response itself, as
//! HTTP/1.1 chunks of NDJSON: progress lines, then the report (or the
//! error), then the last chunk. The hook sees one response, from two
//! writers, and never reconnects.

use std::{os::fd::OwnedFd, sync::Arc};

use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tracing::{info, warn};

use super::{
    api::{DrainRequest, ErrorBody, Line},
    identity::Caller,
    server::subject,
};
use crate::{
    drain::drainer::Drainer,
    handover::{
        held::{Hold, Registry},
        wire::{ExecHook, Record},
    },
    reply::line_bytes,
};

/// One chunk of a chunked body.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// The chunked body's end.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// A handed-over exec hook, registered as held.
pub struct Resumed {
    hook: ExecHook,
    stream: tokio::net::UnixStream,
    hold: Option<Hold>,
}

impl Resumed {
    /// Registers the hook as held (at once, so that a handover or a keeper
    /// carries it on); `None` if its connection cannot be served.
    pub fn hold(registry: &Arc<Registry>, hook: ExecHook, fd: OwnedFd) -> Option<Resumed> {
        let stream = match to_tokio(fd) {
            Ok(s) => s,
            Err(e) => {
                warn!(pod = %hook.pod, error = %e, "handover: cannot serve a held exec hook");
                return None;
            }
        };
        let hold = registry.resume(Record::ExecHook(hook.clone()), std::os::fd::AsFd::as_fd(&stream));
        Some(Resumed { hook, stream, hold })
    }
}

/// Runs the handed-over hook's drain to its release and answers it.
pub async fn exec(drainer: Arc<Drainer>, registry: Arc<Registry>, resumed: Resumed) {
    let Resumed { hook, stream, hold } = resumed;
    let pod = hook.pod.clone();
    let (mut rd, mut wr) = stream.into_split();
    let caller = Caller {
        pid: hook.pid as i32,
        pod: hook.pod.clone(),
        container: hook.container.clone(),
    };
    let prepared = DrainRequest::parse(hook.request.as_bytes())
        .map_err(|e| e.to_string())
        .and_then(|r| {
            drainer
                // No namespace: the previous agent walked the pod's
                // sockets when the drain began; a walk now would only hold
                // the drain's first look up, past closes that it must see.
                .prepare(subject(caller, false), &r, hook.arrived_ns)
                .map_err(|r| r.to_string())
        });
    let prepared = match prepared {
        Ok(p) => p,
        Err(why) => {
            let line = line_bytes(&ErrorBody {
                error: format!("after a handover: {why}"),
            });
            let _ = wr.write_all(&[chunk(&line), LAST_CHUNK.to_vec()].concat()).await;
            return;
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let open = registry.clone();
    let so_far = hold.as_ref().map(|h| h.progress());
    // The report carries on from what the previous agent saw.
    let prepared = prepared.carrying_on(hook.progress.clone());
    let run = drainer.clone().run(prepared, move |p| {
        if open.answering() {
            if let Some(s) = &so_far {
                s.point(p);
            }
            let _ = tx.send(line_bytes(&Line::Progress {
                ms: p.ms,
                inbound: p.inbound,
            }));
        }
    });
    tokio::pin!(run);
    let mut probe = [0u8; 1];
    let result = loop {
        tokio::select! {
            r = &mut run => break r,
            Some(line) = rx.recv() => {
                if wr.write_all(&chunk(&line)).await.is_err() {
                    return info!(pod = %pod, "drain abandoned: the client went away");
                }
            }
            n = rd.read(&mut probe) => {
                if matches!(n, Ok(0) | Err(_)) {
                    return info!(pod = %pod, "drain abandoned: the client went away");
                }
            }
        }
    };
    if let Some(h) = hold {
        h.release().await;
    }
    let line = match &result {
        Ok(released) => line_bytes(&Line::Report(Box::new(released.report.clone()))),
        Err(e) => line_bytes(&ErrorBody { error: e.to_string() }),
    };
    let _ = wr.write_all(&[chunk(&line), LAST_CHUNK.to_vec()].concat()).await;
    let _ = wr.shutdown().await;
    if let Ok(released) = result {
        released.publish();
    }
}

fn to_tokio(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(s)
}
