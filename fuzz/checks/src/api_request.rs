//! The local API's request path: whatever bytes a client sends, through
//! the agent's own connection ([`http_conn::serve`]: hyper's HTTP/1 parser,
//! [`JsonErrors`](graceful::serve::http_conn::JsonErrors) for hyper's own 4xx)
//! to route selection ([`Route::parse`], [`find`]). The handlers proper
//! need a running agent (kernel maps, the resolver); the target's handler
//! answers with the route it chose, or the route's own error.
//!
//! Every input is used twice:
//! - as the bytes of a connection (a unix socket pair, as `serve` needs a
//!   descriptor), whose write side then closes: every answer that comes
//!   back must be a whole HTTP response, and every 4xx/5xx body one JSON
//!   line with an `error`;
//! - split at its first space into a method and a path (lossy UTF-8), for
//!   `Route::parse` and `find` on strings hyper would never pass.

use std::sync::{Arc, LazyLock, Mutex};

use graceful::{
    node::resolver::counts::{find, PodView},
    serve::http_conn,
    serve::local_api::routes::Route,
    serve::reply,
};
use graceful_api::MAX_ECHO;
use http::{Method, StatusCode};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::UnixStream,
    runtime::Runtime,
};

static RT: LazyLock<Runtime> = LazyLock::new(|| {
    // libFuzzer's main is not Rust's: a write to a closed socket must
    // fail with EPIPE, not kill the process.
    // SAFETY: setting a signal's disposition to ignore.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
});

/// Two pods whose uids share a prefix, and a named one.
static PODS: LazyLock<Vec<PodView>> = LazyLock::new(|| {
    let pod = |uid: &str, ns: Option<&str>, name: Option<&str>| {
        serde_json::from_value(serde_json::json!({
            "uid": uid, "namespace": ns, "name": name, "qos": "burstable",
            "state": "Running", "inbound_live": 1, "outbound_live": 0, "listeners": 1,
            "containers": [], "driver": "systemd", "cgroup_id": null, "path": null,
        }))
        .unwrap()
    };
    vec![
        pod(
            "0a1b2c3d-0000-4000-8000-000000000001",
            Some("default"),
            Some("web"),
        ),
        pod(
            "0a1b2c3d-0000-4000-8000-000000000002",
            Some("kube-system"),
            Some("dns"),
        ),
        pod("ffeeddcc-1111-4111-8111-111111111111", None, None),
    ]
});

/// The longest message `Route::parse` or `find` gives: a quoted value is
/// at most `MAX_ECHO` characters (4 bytes each), then its length; the
/// fixed text around it is short.
const MAX_MESSAGE: usize = 4 * MAX_ECHO + 256;

/// The target: panics if `data` breaks what this file asserts.
pub fn check(data: &[u8]) {
    routes(data);
    connection(data);
}

fn routes(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (method, path) = text.split_once(' ').unwrap_or(("GET", &text));
    let method = Method::from_bytes(method.as_bytes()).unwrap_or(Method::GET);
    match Route::parse(&method, path) {
        Ok(route) => {
            assert!(method == Method::GET || method == Method::HEAD);
            if let Route::Pod(want) = route {
                assert_eq!(format!("/v1/pods/{want}"), path);
                match find(&PODS, want) {
                    Ok(p) => {
                        if let Some((ns, name)) = want.split_once('/') {
                            assert_eq!(
                                (p.namespace.as_deref(), p.name.as_deref()),
                                (Some(ns), Some(name))
                            );
                        }
                    }
                    Err(e) => check_message(&e),
                }
            }
        }
        Err((code, e)) => {
            assert!(code == StatusCode::NOT_FOUND || code == StatusCode::METHOD_NOT_ALLOWED);
            check_message(&e);
        }
    }
}

fn check_message(e: &str) {
    assert!(!e.is_empty());
    assert!(e.len() <= MAX_MESSAGE, "{} bytes: {e:?}", e.len());
}

/// What the target's handler answers: the route, or the route's error.
fn answer(method: &Method, path: &str) -> http::Response<reply::Body> {
    match Route::parse(method, path) {
        Ok(Route::Pod(want)) => match find(&PODS, want) {
            Ok(p) => reply::json(StatusCode::OK, &serde_json::json!({ "uid": p.uid })),
            Err(e) => reply::error(StatusCode::NOT_FOUND, e),
        },
        Ok(r) => reply::json(StatusCode::OK, &serde_json::json!({ "route": format!("{r:?}") })),
        Err((code, e)) => reply::error(code, e),
    }
}

fn connection(data: &[u8]) {
    let (out, heads) = RT.block_on(async {
        let (client, server) = UnixStream::pair().unwrap();
        // Whether each request the handler saw was a HEAD (its answer has
        // no body), in order.
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        let served = tokio::spawn(http_conn::serve(server, "fuzz", move |req| {
            seen.lock().unwrap().push(req.method() == Method::HEAD);
            let r = answer(req.method(), req.uri().path());
            async move { r }
        }));
        let (mut rd, mut wr) = client.into_split();
        let send = async move {
            // The agent may close first (a 400): its answer is still read.
            let _ = wr.write_all(data).await;
            let _ = wr.shutdown().await;
            wr
        };
        let mut out = Vec::new();
        let read = rd.read_to_end(&mut out);
        let (_wr, _) = tokio::join!(send, read);
        served.await.unwrap();
        let heads = heads.lock().unwrap().clone();
        (out, heads)
    });
    check_responses(&out, &heads);
}

/// `out` is whole HTTP/1.1 responses, one after the other; each 4xx/5xx
/// body is one JSON line with a non-empty `error`.
fn check_responses(out: &[u8], heads: &[bool]) {
    let mut rest = out;
    let mut answered = 0;
    while !rest.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            other => panic!(
                "not an HTTP response ({other:?}): {:?}",
                String::from_utf8_lossy(rest)
            ),
        };
        let code = resp.code.unwrap();
        let header = |name: &str| {
            resp.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| std::str::from_utf8(h.value).unwrap().trim().to_ascii_lowercase())
        };
        let length = header("content-length").map(|l| l.parse::<usize>().unwrap());
        let chunked = header("transfer-encoding").is_some_and(|t| t.contains("chunked"));
        rest = &rest[n..];
        if (100..200).contains(&code) {
            continue;
        }
        let head = heads.get(answered).copied().unwrap_or(false);
        answered += 1;
        let body: Vec<u8> = if head || code == 204 || code == 304 {
            Vec::new()
        } else if chunked {
            let (body, used) = dechunk(rest);
            rest = &rest[used..];
            body
        } else {
            let length = length.unwrap_or_else(|| panic!("a {code} with no length"));
            assert!(
                rest.len() >= length,
                "a {code} cut short: {length} bytes announced, {} sent",
                rest.len()
            );
            let (body, after) = rest.split_at(length);
            rest = after;
            body.to_vec()
        };
        if code >= 400 && !head {
            let text = std::str::from_utf8(&body).unwrap();
            assert!(
                text.ends_with('\n') && text.matches('\n').count() == 1,
                "a {code} body not one line: {text:?}"
            );
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            let e = v["error"]
                .as_str()
                .unwrap_or_else(|| panic!("a {code} with no error: {text:?}"));
            assert!(!e.is_empty());
        }
    }
}

/// A chunked body, and the bytes it took.
fn dechunk(mut b: &[u8]) -> (Vec<u8>, usize) {
    let total = b.len();
    let mut body = Vec::new();
    loop {
        let line = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line");
        let size = std::str::from_utf8(&b[..line]).unwrap();
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
        b = &b[line + 2..];
        if size == 0 {
            assert!(b.starts_with(b"\r\n"), "a chunked body without its end");
            return (body, total - b.len() + 2);
        }
        body.extend_from_slice(&b[..size]);
        assert_eq!(&b[size..size + 2], b"\r\n");
        b = &b[size + 2..];
    }
}
