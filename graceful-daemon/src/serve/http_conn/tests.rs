use super::*;

#[test]
fn the_408_is_one_json_line_of_the_length_it_says() {
    let bytes = timed_out();
    let text = std::str::from_utf8(&bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(body.len(), length);
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert!(v["error"].as_str().unwrap().contains("5 s"));
    assert_eq!(HEAD_TIMEOUT, Duration::from_secs(5));
}

/// Serves one connection whose every request gets `status` (a JSON error
/// of ours), and returns what `request` got back.
async fn exchange(request: &[u8], status: http::StatusCode) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (server, client) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(serve(server, "test", move |_req| async move {
        crate::serve::reply::error(status, "ours")
    }));
    let (mut read, mut write) = client.into_split();
    let request = request.to_vec();
    // Apart: a head too large is refused before it is all read. Held
    // open after: hyper takes a half-close for a client gone.
    tokio::spawn(async move {
        let _ = write.write_all(&request).await;
        std::future::pending::<()>().await;
        drop(write);
    });
    // Read to the end; a head refused before it was all read (past the
    // buffer) ends in a reset once the answer is read: the agent closed
    // over the bytes it never read.
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = read.read(&mut buf).await {
            out.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("the connection closed");
    String::from_utf8(out).unwrap()
}

fn body_of(answer: &str) -> serde_json::Value {
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap_or_else(|| panic!("no length: {answer}"))
        .parse()
        .unwrap();
    assert_eq!(body.len(), length, "{answer}");
    assert!(body.ends_with('\n') && body.lines().count() == 1, "{answer}");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

#[tokio::test]
async fn a_request_hyper_cannot_parse_gets_one_json_line() {
    for (request, status) in [
        (&b"this is not http\r\n\r\n"[..], "400"),
        (b"GARBAGE\r\n\r\n", "400"),
        (b"GET / HTTP/1.1\r\nHost x\r\n\r\n", "400"),
        (
            b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "400",
        ),
    ] {
        let answer = exchange(request, http::StatusCode::OK).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{request:?}: {answer}"
        );
        let body = body_of(&answer);
        assert!(body["error"].as_str().unwrap().contains("malformed"), "{answer}");
    }
    // Headers past the connection's buffer (MAX_BUF): hyper's 431, with a
    // line too, as soon as the buffer is full.
    let mut big = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..2000 {
        big.extend_from_slice(format!("x-filler-{i}: {}\r\n", "y".repeat(200)).as_bytes());
    }
    big.extend_from_slice(b"\r\n");
    let answer = exchange(&big, http::StatusCode::OK).await;
    assert!(
        answer.starts_with("HTTP/1.1 431 "),
        "{}",
        &answer[..answer.len().min(300)]
    );
    body_of(&answer);
}

#[tokio::test]
async fn our_own_errors_pass_untouched() {
    let answer = exchange(
        b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        http::StatusCode::BAD_REQUEST,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert_eq!(body_of(&answer)["error"], "ours");
}
