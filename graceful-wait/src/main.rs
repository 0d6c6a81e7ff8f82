//! `graceful-wait`: a pod's preStop hook. It asks the graceful agent on this
//! node to drain the calling container's pod, prints progress, and exits 0
//! when released. Kubernetes sends SIGTERM right after.
//!
//! The client owns the deadlines: if the agent restarts mid-drain it
//! reconnects and the drain continues from its original start; if the
//! agent can't be reached it fails open (after `--connect-timeout`, sleeps
//! `--fallback-sleep`, exits 0); if the agent says it is busy (this pod past
//! its share of the gate, or the agent short of descriptors: HTTP 429 or
//! 503) it asks again, backing off, until its deadline. graceful never
//! makes termination slower or
//! less safe than Kubernetes alone. The last line on stdout is one JSON
//! object: the report.

use graceful_api::{client as http, codec};
use graceful_wait::{
    args,
    seen::{request, Seen},
    server,
};

use std::{
    io::Write,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

/// The first wait before asking a busy agent again, doubled up to
/// [`BUSY_MAX`] while it stays busy.
const BUSY_FIRST: Duration = Duration::from_millis(50);
const BUSY_MAX: Duration = Duration::from_secs(1);

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The report printed when the agent could not decide.
fn own_report(reason: &str, waited: Duration, detail: &str) -> String {
    format!(
        "{{\"type\":\"report\",\"reason\":{},\"waited_ms\":{},\"inbound_at_start\":null,\"peak_inbound\":null,\"detail\":{}}}",
        codec::string(reason),
        waited.as_millis(),
        codec::string(detail)
    )
}

enum Outcome {
    Released(String),
    /// The agent went away mid-drain: reconnect.
    Lost(String),
    /// The agent answered with an error: nothing to wait for.
    Refused(String),
    /// The agent is there but cannot take the drain now: retry.
    Busy(String),
}

/// The deadline: the agent's, once it has said (its settings include the
/// pod's annotations, which win over flags); until then `--max`, else the
/// default.
struct Deadline {
    max: Duration,
}

fn attempt(
    a: &args::Args,
    deadline: &mut Deadline,
    seen: &mut Seen,
    (started, started_unix_ms, resumed): (Instant, u64, bool),
    connect_timeout: Duration,
) -> Outcome {
    let stream = match http::connect(&a.socket, connect_timeout) {
        Ok(s) => s,
        Err(e) => return Outcome::Lost(format!("cannot reach the agent at {}: {e}", a.socket)),
    };
    // Whatever answers there must be the agent before anything is asked of it.
    let who = server::listener(&stream).map_err(|e| format!("cannot tell who serves {}: {e}", a.socket));
    if let Err(why) = who.and_then(|l| server::check(l, server::in_my_pid_ns)) {
        return Outcome::Refused(why);
    }
    // Never block past our own deadline, plus a little for the report.
    let left = deadline.max.saturating_sub(started.elapsed()) + Duration::from_secs(1);
    let body = request(a, started_unix_ms, resumed.then_some(&*seen));
    let mut resp = match http::post(stream, "/v1/drain", &body, left) {
        Ok(r) => r,
        Err(e) => return Outcome::Lost(format!("agent did not answer: {e}")),
    };
    // Past this pod's share of the gate, or the agent short of
    // descriptors: it is there and will serve us, so wait and ask again.
    if resp.status == 429 || resp.status == 503 {
        let body = resp.next_line().ok().flatten().unwrap_or_default();
        return Outcome::Busy(format!("agent busy (HTTP {}): {}", resp.status, body.trim()));
    }
    if resp.status != 200 {
        let body = resp.next_line().ok().flatten().unwrap_or_default();
        return Outcome::Refused(format!(
            "agent refused the drain (HTTP {}): {}",
            resp.status,
            body.trim()
        ));
    }
    loop {
        let line = match resp.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => return Outcome::Lost("the agent closed the drain before releasing it".into()),
            Err(e) => return Outcome::Lost(format!("lost the agent mid-drain: {e}")),
        };
        let members = codec::fields(&line).unwrap_or_default();
        let field = |key: &str| codec::last(&members, key).map(codec::Field::text);
        match field("type") {
            Some("report") => return Outcome::Released(line),
            Some("accepted") => {
                if let Some(ms) = field("max_ms").and_then(|m| m.parse::<u64>().ok()) {
                    deadline.max = Duration::from_millis(ms);
                }
                println!(
                    "graceful-wait: draining (policy {}, scope {}, max {:.1}s)",
                    field("policy").unwrap_or("?"),
                    field("scope").unwrap_or("?"),
                    deadline.max.as_secs_f64()
                );
                if let Some(w) = field("warnings").filter(|w| *w != "[]") {
                    eprintln!("graceful-wait: the agent corrected the settings: {w}");
                }
                let _ = std::io::stdout().flush();
            }
            Some("progress") => {
                let inbound = field("inbound").unwrap_or("?");
                let ms: u64 = field("ms").and_then(|m| m.parse().ok()).unwrap_or(0);
                if let Ok(n) = inbound.parse() {
                    seen.point(ms, n);
                }
                println!(
                    "graceful-wait: {inbound} inbound connection(s) at {:.1}s",
                    ms as f64 / 1000.0
                );
                let _ = std::io::stdout().flush();
            }
            _ if field("error").is_some() => return Outcome::Refused(format!("agent error: {line}")),
            _ => {}
        }
    }
}

fn main() {
    let started = Instant::now();
    let started_unix_ms = unix_ms();
    let a = match args::parse(std::env::args().skip(1), |k| std::env::var(k).ok()) {
        Ok(a) => a,
        Err(args::ArgsError::Help) => {
            println!("{}", args::USAGE);
            return;
        }
        Err(e) => {
            eprintln!("graceful-wait: {e}");
            std::process::exit(2);
        }
    };
    let mut deadline = Deadline {
        max: a.max.unwrap_or(args::DEFAULT_MAX),
    };
    let mut connected_once = false;
    let mut backoff = BUSY_FIRST;
    let mut seen = Seen::default();
    loop {
        // The first connection gets --connect-timeout; after the agent has
        // answered once, keep trying until the deadline (it may be restarting).
        let timeout = if connected_once {
            deadline
                .max
                .saturating_sub(started.elapsed())
                .min(Duration::from_secs(1))
        } else {
            a.connect_timeout
        };
        let when = (started, started_unix_ms, connected_once);
        match attempt(&a, &mut deadline, &mut seen, when, timeout) {
            Outcome::Released(report) => {
                println!("{report}");
                return;
            }
            Outcome::Refused(why) => {
                eprintln!("graceful-wait: {why}; failing open");
                std::thread::sleep(a.fallback_sleep);
                println!("{}", own_report("agent-unreachable", started.elapsed(), &why));
                return;
            }
            Outcome::Busy(why) => {
                connected_once = true;
                let left = deadline.max.saturating_sub(started.elapsed());
                if left.is_zero() {
                    eprintln!("graceful-wait: {why}; deadline reached");
                    println!("{}", own_report("deadline", started.elapsed(), &why));
                    return;
                }
                eprintln!(
                    "graceful-wait: {why}; retrying in {} ms",
                    backoff.min(left).as_millis()
                );
                std::thread::sleep(backoff.min(left));
                backoff = (backoff * 2).min(BUSY_MAX);
            }
            Outcome::Lost(why) => {
                if started.elapsed() >= deadline.max {
                    eprintln!("graceful-wait: {why}; deadline reached");
                    println!("{}", own_report("deadline", started.elapsed(), &why));
                    return;
                }
                if !connected_once && !why.contains("mid-drain") && !why.contains("closed the drain") {
                    eprintln!("graceful-wait: {why}; failing open after {:?}", a.connect_timeout);
                    std::thread::sleep(a.fallback_sleep);
                    println!("{}", own_report("agent-unreachable", started.elapsed(), &why));
                    return;
                }
                connected_once = true;
                eprintln!("graceful-wait: {why}; reconnecting");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}
