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
