use super::*;

fn lines(raw: &[u8]) -> io::Result<(u16, Vec<String>)> {
    let mut r = read_head(raw)?;
    let mut out = Vec::new();
    while let Some(l) = r.next_line()? {
        out.push(l);
    }
    Ok((r.status, out))
}

#[test]
fn chunked_lines_split_across_chunks() {
    let raw = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n4\r\n1}\n{\r\n3\r\n}\n\n\r\n0\r\n\r\n";
    let (status, l) = lines(raw).unwrap();
    assert_eq!(status, 200);
    assert_eq!(l, vec!["{\"a\":1}", "{}", ""]);
}

#[test]
fn plain_bodies_and_errors() {
    let (status, l) = lines(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 12\r\n\r\n{\"error\":1}\n").unwrap();
    assert_eq!((status, l), (403, vec!["{\"error\":1}".to_string()]));
    assert!(lines(b"garbage").is_err());
    assert!(lines(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n").is_err());
    assert!(lines(b"HTTP/1.1 200 OK\r\n").is_err());
}

/// Whoever answers on the socket (an impostor, another server) cannot make
/// the hook buffer without end: a line that never ends, plain or chunked,
/// is an error once it passes the bound, after reading no more than that.
#[test]
fn an_endless_line_is_refused_at_the_bound() {
    use std::io::{BufReader, Read as _};
    let endless = |head: &'static [u8]| BufReader::new(head.chain(io::repeat(b'x')));
    let mut plain = read_head(endless(b"HTTP/1.1 200 OK\r\n\r\n")).unwrap();
    let e = plain.next_line_within(4096).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    // The default bound, 1 MiB, on an endless stream: an error, not memory.
    assert!(plain.next_line().is_err());
    // One chunk as large as a chunk size can say, all one line.
    let huge = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffff\r\n";
    let e = read_head(endless(huge))
        .unwrap()
        .next_line_within(4096)
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
}
