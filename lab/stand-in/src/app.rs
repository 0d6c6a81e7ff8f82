//! The app of the benchmarks: an HTTP/1.1 server with keep-alive that
//! answers every request `200 ok\n`, and reports when SIGTERM arrived.
//! With `--authz URL` it is an app that asks its policy engine (OPA's
//! REST API) about every request first (see [`super::authz`]): 403 when
//! denied, 502 when the engine does not answer.
//!
//! Stdout is for the test to read: `listening ADDR` once it accepts, then
//! on SIGTERM (or SIGINT) one line `{"sigterm_monotonic_ns":N}`, the
//! CLOCK_MONOTONIC of the moment sigwait(2) returned, before anything else
//! is done, so that it compares with the agent's release timestamps. Then
//! it shuts down as a well-behaved server does (Go's
//! `http.Server.Shutdown`, nginx's SIGQUIT): stops accepting, answers the
//! requests in flight, closes idle keep-alive connections and exits 0.

use super::{
    authz::{Authz, Verdict},
    http::{Handler, Response, Server},
    Signals,
};
use anyhow::{Context, Result};
use std::{io::Write, sync::Arc, time::Duration};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to listen.
    #[arg(long, default_value = "0.0.0.0:8080")]
    addr: String,
    /// Seconds a shutdown waits for requests in flight before closing
    /// their connections.
    #[arg(long, default_value_t = 10)]
    grace_period: u64,
    /// Ask the policy engine at this URL (`http://127.0.0.1:8181/v1/data/
    /// httpapi/authz/allow`) about every request.
    #[arg(long)]
    authz: Option<String>,
}

fn say(line: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .context("write stdout")
}

pub fn run(args: Args, signals: Signals) -> Result<()> {
    let authz = args.authz.as_deref().map(Authz::parse).transpose()?;
    let handler: Handler = match authz {
        None => Arc::new(|_req| Response::text(200, "ok\n")),
        Some(a) => Arc::new(move |req| match a.ask(&req.method, req.path()) {
            Verdict::Allow => Response::text(200, "ok\n"),
            Verdict::Deny => Response::text(403, "denied by the policy engine\n"),
            Verdict::Unreachable(why) => {
                eprintln!("app: the policy engine did not answer: {why}");
                Response::text(502, format!("the policy engine did not answer: {why}\n"))
            }
        }),
    };
    let server = Server::start(&args.addr, "app", handler)?;
    say(&format!("listening {}", server.local_addr()))?;

    let sig = signals.wait()?;
    say(&serde_json::json!({ "sigterm_monotonic_ns": sig.monotonic_ns }).to_string())?;
    eprintln!(
        "app: {}, shutting down gracefully ({} connections open)",
        sig.name(),
        server.open()
    );
    let cut = server.shutdown(Duration::from_secs(args.grace_period));
    eprintln!("app: exiting ({cut} connections cut at the grace period)");
    Ok(())
}
