//! The agent's clients' one HTTP/1.1 client, std only: one request over a
//! unix socket, and a response whose body (chunked or not) is read line by
//! line as it streams in. graceful-wait's hook (static, in every pod that
//! opts in), the `graceful` CLI against the local API, the tests and the
//! lab use it; the agent's servers are hyper. Linux only: it reaches the
//! abstract socket of a pod's network namespace.

use std::{
    io::{self, BufRead, BufReader, Write},
    os::unix::net::UnixStream,
    time::Duration,
};

pub struct Response<R = BufReader<UnixStream>> {
    pub status: u16,
    body: Body<R>,
}

enum Body<R> {
    Chunked { reader: R, left: usize, done: bool },
    Plain { reader: R },
}

/// Connects, retrying until `timeout` (the agent may be restarting).
/// A path that starts with `@` names an abstract socket: the one the agent
/// binds in the pod's own network namespace (`graceful.dev/gate: socket`).
pub fn connect(path: &str, timeout: Duration) -> io::Result<UnixStream> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match open(path) {
            Ok(s) => return Ok(s),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn open(path: &str) -> io::Result<UnixStream> {
    use std::os::{linux::net::SocketAddrExt as _, unix::net::SocketAddr};
    match path.strip_prefix('@') {
        Some(name) => UnixStream::connect_addr(&SocketAddr::from_abstract_name(name)?),
        None => UnixStream::connect(path),
    }
}

/// Sends `POST path` with a JSON body and reads the response head.
pub fn post(mut stream: UnixStream, path: &str, json: &str, read_timeout: Duration) -> io::Result<Response> {
    stream.set_read_timeout(Some(read_timeout))?;
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: graceful\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    );
    // An agent that turns a connection away answers at once and closes:
    // the request then meets a closed socket, but the answer is there to read.
    if let Err(e) = stream.write_all(req.as_bytes()) {
        if !matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
        ) {
            return Err(e);
        }
    }
    read_head(BufReader::new(stream))
}

/// Sends `GET path` and reads the response head. `read_timeout` bounds
/// each read (None: wait as long as a stream takes).
pub fn get(mut stream: UnixStream, path: &str, read_timeout: Option<Duration>) -> io::Result<Response> {
    stream.set_read_timeout(read_timeout)?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: graceful\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes())?;
    read_head(BufReader::new(stream))
}

/// Reads a response's status line and headers from `reader`.
pub fn read_head<R: BufRead>(mut reader: R) -> io::Result<Response<R>> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad status line {line:?}")))?;
    let mut chunked = false;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("transfer-encoding") && v.trim().eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let body = if chunked {
        Body::Chunked {
            reader,
            left: 0,
            done: false,
        }
    } else {
        Body::Plain { reader }
    };
    Ok(Response { status, body })
}

impl<R: BufRead> Response<R> {
    /// The next line of the body; `None` at its end. A line over 1 MiB,
    /// longer than any report, is someone else's server: an error.
    pub fn next_line(&mut self) -> io::Result<Option<String>> {
        self.next_line_within(1 << 20)
    }

    /// [`next_line`](Self::next_line), for a line of up to `max` bytes.
    pub fn next_line_within(&mut self, max: usize) -> io::Result<Option<String>> {
        let mut out = Vec::new();
        loop {
            let byte = match &mut self.body {
                Body::Plain { reader } => {
                    let mut b = [0u8; 1];
                    match reader.read(&mut b)? {
                        0 => None,
                        _ => Some(b[0]),
                    }
                }
                Body::Chunked { reader, left, done } => {
                    if *done {
                        None
                    } else {
                        if *left == 0 {
                            let mut size = String::new();
                            // A CRLF ends the previous chunk's data.
                            while size.trim().is_empty() {
                                size.clear();
                                if reader.read_line(&mut size)? == 0 {
                                    return Err(io::ErrorKind::UnexpectedEof.into());
                                }
                            }
                            if size.len() > 64 {
                                return Err(io::Error::new(
                                    io::ErrorKind::InvalidData,
                                    "chunk size line too long",
                                ));
                            }
                            let hex = size.trim().split(';').next().unwrap_or("");
                            *left = usize::from_str_radix(hex, 16)
                                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
                            if *left == 0 {
                                *done = true;
                            }
                        }
                        if *done {
                            None
                        } else {
                            let mut b = [0u8; 1];
                            reader.read_exact(&mut b)?;
                            *left -= 1;
                            Some(b[0])
                        }
                    }
                }
            };
            match byte {
                Some(b'\n') => return Ok(Some(String::from_utf8_lossy(&out).into_owned())),
                Some(_) if out.len() >= max => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("response line over {} MiB", max >> 20),
                    ))
                }
                Some(b) => out.push(b),
                None if out.is_empty() => return Ok(None),
                None => return Ok(Some(String::from_utf8_lossy(&out).into_owned())),
            }
        }
    }
}

#[cfg(test)]
mod tests;
