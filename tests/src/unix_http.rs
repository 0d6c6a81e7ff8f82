//! Plain HTTP/1.1 on a unix socket (the gate's, the local API's), as bytes:
//! what a test sends is sent as is, malformed or not.

use std::{
    io::{Read as _, Write as _},
    os::unix::net::UnixStream,
    path::Path,
    time::Duration,
};

/// Sends `request` on the socket at `sock` and reads the answer to its end
/// (10 s at most). `None`: nothing accepts connections there.
pub fn exchange(sock: &Path, request: &[u8]) -> Option<String> {
    let mut s = UnixStream::connect(sock).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    // An answer may come before the whole request is read (a refusal).
    let _ = s.write_all(request);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    Some(out)
}

/// `GET path`, the whole answer.
pub fn get(sock: &Path, path: &str) -> Option<String> {
    exchange(
        sock,
        format!("GET {path} HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// `GET path`, its status.
pub fn status(sock: &Path, path: &str) -> Option<u16> {
    get(sock, path)?.split_whitespace().nth(1)?.parse().ok()
}
