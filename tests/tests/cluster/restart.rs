//! The agent's pod deleted in the middle of two drains (the DaemonSet
//! starts another once the old pod is gone, 5 to 45 s on this kubelet):
//! each waiting hook keeps trying meanwhile, reconnects to the new agent,
//! and its drain goes on from its original start. One pod's clients stay
//! connected: it gets SIGTERM at its deadline, counted from its hook's
//! start, whether the new agent is there by then or not, never earlier;
//! the other's clients close once the new agent runs: it is released by
//! that close, through the new agent.

use std::time::Instant;

use graceful_tests::cluster::{clients::Clients, pod::Pod, Namespace, AGENT_NAMESPACE};
use graceful_tests::monotonic_ns;

use crate::gate::{events_of, sigterm_ns, wait_drain_engaged};

#[test]
fn a_drain_survives_the_agent_pods_deletion_and_keeps_its_deadline() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "restart");
    // held's deadline comes while the agent may still be away (the kubelet
    // takes 5 to 45 s to replace a DaemonSet's pod here); freed's is far
    // enough to be released by its clients through the new agent.
    let hook = |max: &'static str| {
        [
            "--policy", "drained", "--settle", "200ms", "--min", "0s", "--max", max,
        ]
    };
    ns.apply(&crate::app_pod("held", Some(&hook("40s")), 60));
    ns.apply(&crate::app_pod("freed", Some(&hook("150s")), 170));
    let held = Pod::wait_ready(&ns, "app=held", 1, 60).remove(0);
    let freed = Pod::wait_ready(&ns, "app=freed", 1, 60).remove(0);
    let _held_clients = Clients::open(&cluster, format!("{}:8080", held.ip).parse().unwrap(), 3);
    let mut freed_clients = Clients::open(&cluster, format!("{}:8080", freed.ip).parse().unwrap(), 3);
    let (mut held_log, mut freed_log) = (held.open_log("app"), freed.open_log("app"));

    let deleted = Instant::now();
    let deleted_ns = monotonic_ns();
    ns.kubectl(&["delete", "pod", "held", "freed", "--wait=false"]);
    wait_drain_engaged(&cluster, &held.uid, 20);
    wait_drain_engaged(&cluster, &freed.uid, 20);

    let old_agent = cluster.agent_pod(10);
    cluster.kubectl(&["-n", AGENT_NAMESPACE, "delete", "pod", &old_agent, "--wait=false"]);
    let new_agent = graceful_tests::wait_for(120, "a new agent pod", || {
        let p = cluster.agent_pod(120);
        (p != old_agent).then_some(p)
    });
    let back_s = deleted.elapsed().as_secs_f64();
    eprintln!("agent {old_agent} replaced by {new_agent} {back_s:.1} s after the deletions");
    // freed waited through the agent's absence, and reconnected.
    assert_eq!(
        sigterm_ns(&mut freed_log),
        None,
        "freed got SIGTERM while its agent was away"
    );
    if back_s < 39.0 {
        assert_eq!(
            sigterm_ns(&mut held_log),
            None,
            "held got SIGTERM before its deadline"
        );
    }
    wait_drain_engaged(&cluster, &freed.uid, 20);

    freed_clients.close();
    let closed_ns = monotonic_ns();
    let freed_term = graceful_tests::wait_for(20, "freed's SIGTERM", || sigterm_ns(&mut freed_log));
    let after_ms = freed_term.saturating_sub(closed_ns) as f64 / 1e6;
    eprintln!("freed: SIGTERM {after_ms:.0} ms after its clients closed, through the new agent");
    assert!(
        freed_term > closed_ns && after_ms < 200.0 + graceful_tests::event_slack_ms() as f64,
        "freed: SIGTERM {after_ms:.0} ms after the last close (settle 200 ms)"
    );

    let held_term = graceful_tests::wait_for(60, "held's SIGTERM", || sigterm_ns(&mut held_log));
    let at_s = held_term.saturating_sub(deleted_ns) as f64 / 1e9;
    eprintln!("held: SIGTERM {at_s:.2} s after its deletion (--max 40s, from the hook's start)");
    // The hook starts after the deletion: its 40 s end no sooner than 40 s
    // after it, and the kubelet starts a hook within a second or two.
    assert!(
        (40.0..45.0).contains(&at_s),
        "held: SIGTERM {at_s:.2} s after its deletion, with --max 40s"
    );
    // A wait, not a bound (as in `held_until_the_last_close`): under load
    // the kubelet takes its time to tear the sandbox down.
    graceful_tests::wait_for(90, "held to be gone after its deadline", || {
        ns.pod_gone("held").then_some(())
    });
    let events = events_of(&ns, &freed.uid);
    assert!(
        events
            .iter()
            .any(|(r, m)| r == "DrainReleased" && m.contains("drained")),
        "the new agent left no DrainReleased Event on freed: {events:?}"
    );
    // An agent at held's deadline says so; with none, the hook released
    // itself and there was nobody to post it.
    if back_s < 39.0 {
        let events = events_of(&ns, &held.uid);
        assert!(
            events.iter().any(|(r, _)| r == "DrainDeadline"),
            "no DrainDeadline Event on held: {events:?}"
        );
    }
}
