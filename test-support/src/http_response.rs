//! One HTTP/1.1 response, read from a connection the client may keep: the
//! status line, the head (`Content-Length`, `Connection: close`), then
//! the body. What the load generator, the app that asks OPA and the
//! node's held clients read. No chunked bodies: none of the servers they
//! talk to sends one to their requests.

use std::io::{BufRead, Read};

pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
    /// Whether the connection may carry another request (HTTP/1.1 keeps
    /// it unless the server said `Connection: close`).
    pub reusable: bool,
}

fn eof() -> std::io::Error {
    std::io::ErrorKind::UnexpectedEof.into()
}

/// Reads one whole response from `conn`.
pub fn read(conn: &mut impl BufRead) -> std::io::Result<Response> {
    let mut line = String::new();
    if conn.read_line(&mut line)? == 0 {
        return Err(eof());
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let (mut length, mut reusable) = (0u64, true);
    loop {
        line.clear();
        if conn.read_line(&mut line)? == 0 {
            return Err(eof());
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse().unwrap_or(0);
            } else if name.eq_ignore_ascii_case("connection") && value.eq_ignore_ascii_case("close") {
                reusable = false;
            }
        }
    }
    let mut body = Vec::with_capacity(length as usize);
    conn.take(length).read_to_end(&mut body)?;
    if (body.len() as u64) < length {
        return Err(eof());
    }
    Ok(Response {
        status,
        body,
        reusable,
    })
}
