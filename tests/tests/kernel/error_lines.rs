//! Every error, on the gate and the local API, is one JSON line: hyper's
//! own answers to what it cannot parse too, and a caller's huge value is
//! quoted clipped, not echoed whole.

use std::{
    io::{Read, Write},
    os::unix::net::UnixStream,
    path::Path,
    time::Duration,
};

use graceful_tests::agent::Agent;
use serde_json::Value;

use crate::require_root;

/// Raw bytes to a unix socket; everything that comes back.
fn raw(sock: &Path, request: &[u8]) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(request);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// The one JSON line of an answer's body.
fn error_of(answer: &str) -> String {
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    assert_eq!(body.lines().count(), 1, "not one line: {answer}");
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"));
    v["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_string()
}

#[test]
fn malformed_http_and_huge_ids_get_one_short_json_line() {
    require_root!();
    let agent = Agent::started_with_gate();
    for sock in [agent.gate_sock(), agent.api_sock()] {
        for bad in [
            &b"this is not http\r\n\r\n"[..],
            b"GET / HTTP/1.1\r\nHost x\r\n\r\n",
        ] {
            let out = raw(&sock, bad);
            assert!(out.starts_with("HTTP/1.1 400"), "{}: {out}", sock.display());
            assert!(error_of(&out).contains("malformed"), "{out}");
        }
    }
    // Within the 16 KiB a request head may take, the id is echoed clipped.
    let huge = "f".repeat(12_000);
    for path in [
        format!("/v1/pods/{huge}"),
        format!("/v1/pods/ns/{huge}"),
        format!("/{huge}"),
    ] {
        let out = raw(
            &agent.api_sock(),
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        );
        assert!(out.starts_with("HTTP/1.1 404"), "{}", &out[..out.len().min(300)]);
        let e = error_of(&out);
        assert!(
            e.len() < 600 && e.contains("bytes)"),
            "{} bytes: {}",
            e.len(),
            &e[..e.len().min(300)]
        );
    }
    // Past it, the head is not read on: 431, one line.
    let head = format!("GET /v1/pods/{} HTTP/1.1\r\nHost: x\r\n\r\n", "f".repeat(60_000));
    let out = raw(&agent.api_sock(), head.as_bytes());
    assert!(out.starts_with("HTTP/1.1 431"), "{}", &out[..out.len().min(300)]);
    assert!(error_of(&out).contains("too large"), "{out}");
}
