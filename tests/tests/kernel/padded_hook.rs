//! A pod's hook whose drain request is padded to just under the gate's
//! bound with whitespace (valid JSON, 64 KiB): before, the agent carried
//! the body as sent in the handover's record, which then did not fit a
//! frame, and a successor could not take the node over (a DaemonSet
//! rollout stalled on one such pod per node). The record carries the
//! request as parsed now: the successor takes the hook over at once and
//! answers it.

use std::time::{Duration, Instant};

use graceful_tests::{
    agent::Agent,
    gate::{padded_hook, pod_holding, wait_draining},
};

use crate::require_root;

#[test]
fn a_hook_padded_to_the_bodys_bound_is_handed_over_and_answered() {
    require_root!();
    let first = Agent::started_with_gate();
    let (pod, _lb, mut app, _pool) = pod_holding(2);
    let child = padded_hook(
        &first.gate_sock(),
        pod.container(0).dir(),
        graceful_api::MAX_BODY - 16,
    );
    wait_draining(&first, 1);

    let t = Instant::now();
    let mut second = first.successor();
    second.start();
    let took = t.elapsed();
    let log = second.log_text();
    assert!(
        log.contains("serving the hooks the previous agent held") && log.contains("exec_hooks=1"),
        "the successor did not take the padded hook over: {log}"
    );
    wait_draining(&second, 1);
    app.cmd("close-in 2 fin");
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let report = text
        .lines()
        .find(|l| l.contains("\"type\":\"report\""))
        .unwrap_or_else(|| panic!("no report: {text}"));
    assert!(report.contains("\"reason\":\"drained\""), "{report}");
    eprintln!(
        "a hook padded to {} bytes: the successor took the node over in {took:?} and answered it",
        graceful_api::MAX_BODY - 16
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
    drop(second);
}
