//! A drain's start as the gate takes it: carried across an agent restart
//! with what the hook saw before it.

use std::time::{Duration, Instant};

use graceful_tests::{
    agent::{graceful, Agent},
    cgroup::Cgroup,
    gate::{engaged, finish_engaged, hook, wait_draining},
    peer::{addr, Peer},
    pod::SimPod,
};
use serde_json::Value;

use crate::require_root;

#[test]
fn a_reconnected_drain_reports_its_true_start_and_timeline() {
    require_root!();
    let mut agent = Agent::with_gate();
    agent.start();
    let pod = SimPod::create(1);
    let lb = Cgroup::unique("lb");
    let mut app = Peer::spawn(pod.container(0), None);
    let port = app.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(&lb, None);
    client.connect(&addr("127.0.0.1", port), 6);
    graceful_tests::wait_for(10, "accepts", || (app.accepted() == 6).then_some(()));

    let started = Instant::now();
    let mut child = hook(
        &agent,
        pod.container(0),
        &["--min", "0s", "--settle", "100ms", "--max", "30s"],
    );
    let stdout = engaged(&mut child);
    // Six at the start; the agent dies; three close while none runs.
    agent.kill9();
    app.cmd("close-in 3 fin");
    std::thread::sleep(Duration::from_millis(300));
    agent.start();
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
