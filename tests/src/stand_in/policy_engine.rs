//! The policy engine: OPA in deploy/examples/policy-sidecar, answering the
//! app's authorization queries on 127.0.0.1:8181 over keep-alive
//! connections, with the example's rule built in (authz.rego: allow GET
//! and HEAD).
//!
//! It answers two ways:
//! - as nginx's `auth_request` wants: any request (a GET subrequest
//!   carrying the original request's headers) gets 200 with an empty body
//!   to allow, 403 to deny. The method judged is `X-Original-Method` (the
//!   nginx config sets it to `$request_method`), or, without that header,
//!   the request's own;
//! - as OPA's REST API: `POST /v1/data/<anything>` with `{"input": {...}}`
//!   gets `{"result": true|false}`, the rule applied to `input.method`.
//!
//! `GET /health` (without `X-Original-Method`) gets 200 `{}`, as OPA's.
//!
//! On SIGTERM OPA shuts its HTTP server down gracefully (Go's
//! `http.Server.Shutdown`): it stops accepting, answers the requests in
//! flight, closes idle keep-alive connections and exits 0. So does this.

use super::{
    http::{Handler, Request, Response, Server},
    Signals,
};
use anyhow::Result;
use serde_json::{json, Value};
use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to listen (OPA's --addr).
    #[arg(long, default_value = "127.0.0.1:8181")]
    addr: String,
    /// Seconds a shutdown waits for requests in flight before closing
    /// their connections (OPA's --shutdown-grace-period).
    #[arg(long, default_value_t = 10)]
    grace_period: u64,
}

/// The rule of deploy/examples/policy-sidecar/configmap.yaml's authz.rego:
/// `allow if input.method in {"GET", "HEAD"}`.
pub fn allow(method: &str) -> bool {
    matches!(method, "GET" | "HEAD")
}

#[derive(Default)]
struct Decisions {
    allowed: AtomicU64,
    denied: AtomicU64,
}

impl Decisions {
    fn record(&self, allowed: bool) -> bool {
        let n = if allowed { &self.allowed } else { &self.denied };
        n.fetch_add(1, Ordering::Relaxed);
        allowed
    }
}

fn answer(req: &Request, decisions: &Decisions) -> Response {
    let original = req.header("x-original-method");
    if req.method == "POST" && original.is_none() && req.path().starts_with("/v1/data/") {
        let input: Value = if req.body.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            match serde_json::from_slice(&req.body) {
                Ok(v) => v,
                Err(e) => {
                    let message = format!("body contains malformed input document: {e}");
                    return Response::json(400, &json!({"code": "invalid_parameter", "message": message}));
                }
            }
        };
        let method = input.pointer("/input/method").and_then(Value::as_str);
        let result = decisions.record(method.is_some_and(allow));
        return Response::json(200, &json!({ "result": result }));
    }
    if original.is_none() && req.path() == "/health" {
        return Response::json(200, &json!({}));
    }
    let method = original.unwrap_or(&req.method);
    if decisions.record(allow(method)) {
        Response::empty(200)
    } else {
        Response::empty(403)
    }
}

pub fn run(args: Args, signals: Signals) -> Result<()> {
    let decisions = Arc::new(Decisions::default());
    let d = decisions.clone();
    let handler: Handler = Arc::new(move |req| answer(req, &d));
    let server = Server::start(&args.addr, "policy-engine", handler)?;
    eprintln!("policy-engine: listening {}", server.local_addr());

    let sig = signals.wait()?;
    eprintln!(
        "policy-engine: {}, shutting down gracefully: not accepting, answering requests in flight, \
         closing idle connections ({} open)",
        sig.name(),
        server.open()
    );
    let cut = server.shutdown(Duration::from_secs(args.grace_period));
    let (allowed, denied) = (
        decisions.allowed.load(Ordering::Relaxed),
        decisions.denied.load(Ordering::Relaxed),
    );
    let cut = if cut > 0 {
        format!(", {cut} connections cut at the grace period")
    } else {
        String::new()
    };
    eprintln!(
        "policy-engine: exiting, {} decisions served ({allowed} allowed, {denied} denied){cut}",
        allowed + denied
    );
    Ok(())
}
