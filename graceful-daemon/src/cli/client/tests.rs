use std::{
    io::{BufRead, BufReader, Write},
    os::unix::net::UnixListener,
    path::PathBuf,
};

use super::*;

/// A daemon stand-in on a socket of its own: answers one request with
/// `status` and `body`, chunked as hyper sends it.
fn answer_once(name: &str, status: &'static str, body: String) -> (PathBuf, std::thread::JoinHandle<()>) {
    let path = std::env::temp_dir().join(format!("graceful-client-{name}-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let l = UnixListener::bind(&path).unwrap();
    let t = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut line = String::new();
        while r.read_line(&mut line).unwrap() > 2 {
            line.clear();
        }
        let mut s = s;
        let _ = write!(
            s,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        for chunk in body.as_bytes().chunks(64 * 1024) {
            let _ = write!(s, "{:x}\r\n", chunk.len());
            let _ = s.write_all(chunk);
            let _ = s.write_all(b"\r\n");
        }
        let _ = s.write_all(b"0\r\n\r\n");
    });
    (path, t)
}

#[test]
fn an_answer_past_a_mebibyte_is_read_whole() {
    // 11,000 drains held, as `/v1/drains` lists them.
    let drain = r#"{"id":1,"pod":"0123456789abcdef0123456789abcdef","container":"cafe","scope":"pod","policy":"drained","max_ms":25000,"start_ns":1,"cgroups":[1,2]}"#;
    let body = format!(
        "{{\"active\":[{}],\"released\":[],\"terminating\":[],\"terminated\":[]}}\n",
        vec![drain; 11_000].join(",")
    );
    assert!(body.len() > 1 << 20);
    let (path, t) = answer_once("big", "200 OK", body);
    let v: serde_json::Value = get(&path, "/v1/drains").unwrap();
    assert_eq!(v["active"].as_array().unwrap().len(), 11_000);
    t.join().unwrap();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn an_io_error_is_said_once_with_its_causes() {
    let (path, t) = answer_once("cut", "200 OK", "{\"active\":".to_string());
    // A body cut short mid-line: an error of the stream.
    let e = get::<serde_json::Value>(&path, "/v1/drains").unwrap_err();
    t.join().unwrap();
    let _ = std::fs::remove_file(&path);
    let text = format!("{:#}", anyhow::Error::from(e));
    assert!(text.starts_with("the graceful daemon on "), "{text}");
    let tail = text.split_once(": ").unwrap().1;
    assert!(
        !tail.is_empty() && !tail.contains(&format!("{tail}: {tail}")),
        "{text}"
    );
    let cause = tail.rsplit(": ").next().unwrap();
    assert_eq!(text.matches(cause).count(), 1, "said twice: {text}");
}
