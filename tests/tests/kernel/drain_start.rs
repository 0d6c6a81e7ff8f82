//! A drain's start as the gate takes it: held to the request's arrival
//! (a hook's clock is its own to set), and carried across an agent
//! restart with what the hook saw before it.

use std::time::{Duration, Instant};

use graceful_tests::{
    agent::{graceful, Agent},
    event_slack_ms,
    gate::{finish_engaged, pod_holding, wait_draining},
    peer::Peer,
};
use serde_json::Value;

use crate::{held_hook, require_root, restarted_after_closes};

/// `POST /v1/drain` with `body`, raw, from `asker` (a process in the
/// pod): the stream's JSON lines, as they came.
fn drain_raw(agent: &Agent, asker: &mut Peer, body: &str) -> Vec<Value> {
    let req = format!(
        "POST /v1/drain HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let hex: String = req.bytes().map(|b| format!("{b:02x}")).collect();
    let words = asker.cmd(&format!("gate {} {hex}", agent.gate_sock().display()));
    let raw = words.first().cloned().unwrap_or_default();
    let bytes: Vec<u8> = (0..raw.len() / 2)
        .map(|i| u8::from_str_radix(&raw[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    // The chunks' sizes are lines of their own; the stream's lines are JSON.
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_start_from_the_epoch_is_held_to_the_requests_arrival() {
    require_root!();
    let agent = Agent::started_with_gate();
    // A connection held open: only the deadline releases the drain.
    let (pod, _lb, _app, _client) = pod_holding(1);
    let mut asker = Peer::spawn(pod.container(0), None);

    let sent = Instant::now();
    let lines = drain_raw(&agent, &mut asker, r#"{"started_unix_ms":0,"max_ms":3000}"#);
    let took = sent.elapsed();
    let accepted = &lines[0];
    assert_eq!(accepted["type"], "accepted", "{lines:?}");
    let warnings = accepted["warnings"].to_string();
    assert!(
        warnings.contains("started_unix_ms 0") && warnings.contains("before the request reached the gate"),
        "the clamp is not shown: {accepted}"
    );
    let report = lines.last().unwrap();
    assert_eq!(report["type"], "report", "{lines:?}");
    assert_eq!(report["reason"], "deadline", "{report}");
    // Counted from 2 s before the request (the allowance): 3 s of deadline
    // is 1 s after it, not 58 minutes ago.
    let waited = report["waited_ms"].as_u64().unwrap();
    assert!(
        (2900..=3000 + event_slack_ms()).contains(&waited),
        "waited {waited} ms: {report}"
    );
    assert!(
        took >= Duration::from_millis(800),
        "released at once ({took:?}): {report}"
    );

    // The history has the same bounded sample.
    let out = graceful(&agent.pin_dir, &["drains", "-o", "json"]);
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let released = d["released"].as_array().unwrap();
    assert_eq!(released.len(), 1, "{d}");
    assert!(
        released[0]["waited_ms"].as_u64().unwrap() <= 3000 + event_slack_ms(),
        "{d}"
    );
}

#[test]
fn a_reconnected_drain_reports_its_true_start_and_timeline() {
    require_root!();
    let mut agent = Agent::started_with_gate();
    let (pod, _lb, mut app, _client) = pod_holding(6);

    let started = Instant::now();
    let (child, stdout) = held_hook(&agent, &pod);
    // Six at the start; the agent dies; three close while none runs.
    restarted_after_closes(&mut agent, &mut app);
    // The hook is back, held by the new agent, which sees three.
    wait_draining(&agent, 1);
    let reconnected_ms = started.elapsed().as_millis() as u64;
    app.cmd("close-in 3 fin");
    let (report, out) = finish_engaged(child, stdout);

    assert_eq!(report["reason"], "drained", "{out}");
    assert!(out.contains("reconnecting"), "{out}");
    assert_eq!(report["inbound_at_start"], 6, "{out}");
    assert_eq!(report["peak_inbound"], 6, "{out}");
    let timeline: Vec<(u64, u64)> = report["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["ms"].as_u64().unwrap(), p["inbound"].as_u64().unwrap()))
        .collect();
    assert_eq!(timeline[0], (0, 6), "{out}");
    assert!(
        timeline.windows(2).all(|w| w[0].0 <= w[1].0),
        "out of order: {out}"
    );
    // The new agent's first look (after the 300 ms it was down) counts
    // from the original start, not from 0.
    assert!(
        timeline.len() >= 2 && timeline[1].0 >= 300,
        "the resumed part restarted its clock: {out}"
    );
    assert_eq!(timeline.last().unwrap().1, 0, "{out}");
    assert!(
        report["waited_ms"].as_u64().unwrap() >= reconnected_ms.saturating_sub(200),
        "{out}"
    );
    // The agent's own record says the same.
    let d: Value =
        serde_json::from_slice(&graceful(&agent.pin_dir, &["drains", "-o", "json"]).stdout).unwrap();
    let r = &d["released"][0];
    assert_eq!(
        (r["inbound_at_start"].as_u64(), r["peak_inbound"].as_u64()),
        (Some(6), Some(6)),
        "{d}"
    );
}
