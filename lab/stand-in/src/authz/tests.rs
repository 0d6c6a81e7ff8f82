use super::*;
use crate::http::{Handler, Response, Server};
use std::sync::Arc;

fn engine() -> Server {
    // OPA's REST API, with the policy-sidecar example's rule.
    let handler: Handler = Arc::new(|req| {
        let v: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let method = v["input"]["method"].as_str().unwrap_or_default();
        // authz.rego: allow if input.method in {"GET", "HEAD"}
        let allow = matches!(method, "GET" | "HEAD");
        Response::json(200, &serde_json::json!({ "result": allow }))
    });
    Server::start("127.0.0.1:0", "engine", handler).unwrap()
}

#[test]
fn it_asks_over_kept_connections_and_reads_the_result() {
    let e = engine();
    let a = Authz::parse(&format!("http://{}/v1/data/httpapi/authz/allow", e.local_addr())).unwrap();
    assert_eq!(a.ask("GET", "/"), Verdict::Allow);
    assert_eq!(a.ask("POST", "/"), Verdict::Deny);
    assert_eq!(a.idle.lock().unwrap().len(), 1, "one connection, kept");
    assert_eq!(e.open(), 1);
}

#[test]
fn a_stopped_engine_is_the_apps_failure_after_one_retry() {
    let e = engine();
    let url = format!("http://{}/v1/data/x/allow", e.local_addr());
    let a = Authz::parse(&url).unwrap();
    assert_eq!(a.ask("GET", "/"), Verdict::Allow);
    e.shutdown(Duration::from_secs(1));
    match a.ask("GET", "/") {
        Verdict::Unreachable(why) => assert!(why.contains("connect"), "{why}"),
        v => panic!("{v:?}"),
    }
}

#[test]
fn bad_urls_are_refused_with_why() {
    for (url, says) in [
        ("https://127.0.0.1:1/x", "not an http://"),
        ("http://opa:8181/x", "IP address"),
        ("http://127.0.0.1:8181", "no path"),
    ] {
        let e = Authz::parse(url).err().unwrap().to_string();
        assert!(e.contains(says), "{url}: {e}");
    }
}
