//! An exec hook that the previous agent held, handed over mid-drain: its
//! `graceful-wait` still reads the same response, whose head and first
//! lines that agent wrote. This agent runs the drain again from the hook's
//! original start ([`Hooks::resume`]) and writes what is left of the
//! response itself, as HTTP/1.1 chunks of NDJSON: progress lines, then the
//! report (or the error), then the last chunk. The hook sees one response,
//! from two writers, and never reconnects.

use std::{os::fd::OwnedFd, sync::Arc};

use bytes::Bytes;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tracing::warn;

use super::protocol::{ErrorBody, Line};
use crate::{
    drain::hook::{Ending, Hook, Hooks, Started},
    serve::reply::line_bytes,
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

/// A handed-over exec hook, held again (at once, so that a handover or a
/// keeper carries it on), or the error its answer is.
pub struct Resumed {
    stream: tokio::net::UnixStream,
    started: Result<Started, String>,
}

impl Resumed {
    /// `hook`: pod `pod`'s, as its record reads (or why it does not);
    /// `None` if its connection cannot be served.
    pub fn hold(hooks: &Arc<Hooks>, pod: &str, hook: Result<Hook, String>, fd: OwnedFd) -> Option<Resumed> {
        let stream = match to_tokio(fd) {
            Ok(s) => s,
            Err(e) => {
                warn!(pod, error = %e, "handover: cannot serve a held exec hook");
                return None;
            }
        };
        let started = hook.and_then(|h| {
            hooks
                .resume(&h, std::os::fd::AsFd::as_fd(&stream))
                .map_err(|e| e.to_string())
        });
        Some(Resumed { stream, started })
    }
}

/// Runs the handed-over hook's drain to its release and answers it.
pub async fn exec(resumed: Resumed) {
    let Resumed { stream, started } = resumed;
    let (mut rd, mut wr) = stream.into_split();
    let started = match started {
        Ok(s) => s,
        Err(why) => {
            let line = line_bytes(&ErrorBody {
                error: format!("after a handover: {why}"),
            });
            let _ = wr.write_all(&[chunk(&line), LAST_CHUNK.to_vec()].concat()).await;
            return;
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let progress = move |p: &graceful_api::Point| {
        let _ = tx.send(line_bytes(&Line::Progress {
            ms: p.ms,
            inbound: p.inbound,
        }));
    };
    // Gone once the client closes, or a line cannot be written.
    let gone = async {
        let mut probe = [0u8; 1];
        loop {
            tokio::select! {
                Some(line) = rx.recv() => {
                    if wr.write_all(&chunk(&line)).await.is_err() {
                        return;
                    }
                }
                n = rd.read(&mut probe) => {
                    if matches!(n, Ok(0) | Err(_)) {
                        return;
                    }
                }
            }
        }
    };
    let ending = started.run(progress, gone).await;
    let line = match &ending {
        Ending::Released(released) => line_bytes(&Line::Report(Box::new(released.report.clone()))),
        Ending::Failed(e) => line_bytes(&ErrorBody { error: e.clone() }),
        Ending::Abandoned => return,
    };
    let _ = wr.write_all(&[chunk(&line), LAST_CHUNK.to_vec()].concat()).await;
    let _ = wr.shutdown().await;
    if let Ending::Released(released) = ending {
        released.publish();
    }
}

/// A handed-over exec hook whose record could not be read: its response
/// is mid-stream, so one error line and its end, which `graceful-wait`
/// takes as a failure of the agent and fails open with.
pub async fn fail_open(fd: OwnedFd, why: &str) {
    let Ok(mut s) = to_tokio(fd) else { return };
    let line = line_bytes(&ErrorBody {
        error: format!("after a handover: {why}"),
    });
    let _ = s.write_all(&[chunk(&line), LAST_CHUNK.to_vec()].concat()).await;
    let _ = s.shutdown().await;
}

fn to_tokio(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(s)
}
