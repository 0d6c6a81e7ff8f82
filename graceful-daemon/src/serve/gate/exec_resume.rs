//! An exec hook that the previous agent held, handed over mid-drain: its
//! `graceful-wait` still reads the same response, whose head and first
//! lines that agent wrote. This agent runs the drain again from the hook's
//! original start ([`Hooks::resume`]) and writes what is left of the
//! response itself, as HTTP/1.1 chunks of NDJSON: progress lines, then the
//! report (or the error), then the last chunk. The hook sees one response,
//! from two writers, and never reconnects.

use std::os::fd::OwnedFd;

use super::protocol::{ErrorBody, Line};
use crate::{
    drain::hook::{Ending, Reheld},
    serve::reply::line_bytes,
};
use bytes::Bytes;
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::UnixStream,
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

/// Runs the handed-over hook's drain to its release and answers it.
pub async fn exec(held: Reheld<UnixStream>) {
    let (mut rd, mut wr) = held.stream.into_split();
    let started = match held.started {
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
    let Ok(mut s) = open(fd) else { return };
    let line = line_bytes(&ErrorBody {
        error: format!("after a handover: {why}"),
    });
    let _ = s.write_all(&[chunk(&line), LAST_CHUNK.to_vec()].concat()).await;
    let _ = s.shutdown().await;
}

/// The connection of a held exec hook, as the gate serves it.
pub fn open(fd: OwnedFd) -> std::io::Result<UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true)?;
    UnixStream::from_std(s)
}
