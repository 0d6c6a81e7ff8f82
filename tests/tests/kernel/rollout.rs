//! The rollout simulation behind `cargo xtask rollout`, asserted: pods
//! replaced one at a time behind HAProxy under load, their endpoints removed
//! 1.5 s after their termination starts. Without a hook the load sees
//! failures (the scenario is real); with graceful's gate it sees none, and
//! each pod's SIGTERM comes once its traffic is gone: after the endpoint's
//! removal and the drain of the requests in flight, within 1 s of it.
//! The `sleep` mode costs 15 s a pod and proves nothing more: the command
//! runs it.

use std::time::Duration;

use graceful_tests::rollout::{self, Config, Mode};

use crate::require_root;

#[test]
fn a_rollout_fails_requests_without_a_hook_and_none_with_the_gate() {
    require_root!();
    // It proves the rollout, not a kernel: the qemu guests of `cargo xtask
    // vm-test`, which have no HAProxy, leave it out by name.
    let cfg = Config {
        pods: 2,
        propagation: Duration::from_millis(1500),
        latency: Duration::from_millis(100),
        rate: 100,
        keepalive: true,
        modes: vec![Mode::None, Mode::Graceful],
        ..Config::default()
    };
    let runs = rollout::run(&cfg).unwrap();
    let table = rollout::report::table(&runs);
    eprintln!("{table}");
    let (none, graceful) = (&runs[0], &runs[1]);
    assert!(
        none.load.failed > 0,
        "no request failed without a hook: the scenario shows nothing\n{table}"
    );
    assert!(graceful.load.requests > 100, "{table}");
    assert_eq!(graceful.load.failed, 0, "{table}");

    let propagation = cfg.propagation.as_secs_f64();
    for t in &graceful.terminations {
        let why = format!("{t:?}\n{table}");
        assert_eq!(
            t.released.as_deref(),
            Some("drained"),
            "the gate did not release on the pod's last close: {why}"
        );
        // Never before the load balancer stopped sending.
        assert!(
            t.hook_s >= t.removed_s,
            "released before the endpoint left: {why}"
        );
        let drain = t.drain_s.expect("the pod outlived its endpoint");
        let floor = propagation + drain;
        assert!(
            t.exited_s >= floor - 0.05 && t.exited_s <= floor + 1.0,
            "termination {:.2} s, propagation + drain {floor:.2} s: {why}",
            t.exited_s
        );
    }
}
