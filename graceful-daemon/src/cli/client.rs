//! The CLI's side of the daemon's local API (its unix socket). A daemon
//! that is not running is not an error: the commands that can fall back to
//! the pinned maps do so, and say so in one line.

use std::{io, path::Path, time::Duration};

use graceful_api::{
    client::{self as http, Response},
    drain::ErrorBody,
};
use serde::de::DeserializeOwned;

/// How long one answer may take: the API answers from memory and the maps.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer read whole. The daemon's answers are one JSON line
/// as long as what it lists: `/v1/drains` holding 11,000 drains is about
/// 3 MB, far past the hook's 1 MiB line bound.
pub const MAX_ANSWER: usize = 1 << 30;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens on the socket: the daemon is not running here.
    #[error("no graceful daemon answers on {0}")]
    Down(String),
    /// The daemon answered with an error of its own.
    #[error("{0}")]
    Refused(String),
    /// The error is in the message, not a source: printed with its
    /// causes (`{:#}`), it would be said twice.
    #[error("the graceful daemon on {socket}: {error}")]
    Io { socket: String, error: io::Error },
}

fn open(socket: &Path, path: &str, read_timeout: Option<Duration>) -> Result<Response, ClientError> {
    let name = socket.display().to_string();
    let stream = match std::os::unix::net::UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Err(ClientError::Down(name))
        }
        Err(e) => {
            return Err(ClientError::Io {
                socket: name,
                error: e,
            })
        }
    };
    let io = |error| ClientError::Io {
        socket: name.clone(),
        error,
    };
    let mut resp = http::get(stream, path, read_timeout).map_err(io)?;
    if resp.status != 200 {
        let line = resp.next_line().map_err(io)?.unwrap_or_default();
        let msg = serde_json::from_str::<ErrorBody>(&line)
            .map(|e| e.error)
            .unwrap_or_else(|_| format!("HTTP {} from {path}: {line}", resp.status));
        return Err(ClientError::Refused(msg));
    }
    Ok(resp)
}

/// `GET path`, its JSON body decoded.
pub fn get<T: DeserializeOwned>(socket: &Path, path: &str) -> Result<T, ClientError> {
    let mut resp = open(socket, path, Some(READ_TIMEOUT))?;
    let io = |error| ClientError::Io {
        socket: socket.display().to_string(),
        error,
    };
    let line = resp.next_line_within(MAX_ANSWER).map_err(io)?.unwrap_or_default();
    serde_json::from_str(&line).map_err(|e| io(io::Error::new(io::ErrorKind::InvalidData, e)))
}

/// `GET path` as a stream of NDJSON lines, for as long as the daemon sends.
pub fn stream(socket: &Path, path: &str) -> Result<Response, ClientError> {
    open(socket, path, None)
}

#[cfg(test)]
mod tests;
