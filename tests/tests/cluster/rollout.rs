//! `deploy/examples/web` rolled behind a real Service six ways: both of
//! graceful's gates drop nothing and cost the drain, and so does the same
//! Deployment with no hook written, in a namespace labelled for injection;
//! no hook drops requests; `exec: sleep 15` and the kubelet's `sleep` action drop nothing
//! but cost 15 s a pod.

use graceful_tests::{
    cluster::rollout::{self, Config},
    rollout::{report, Mode},
};

#[test]
fn a_rolling_update_behind_a_service_six_ways() {
    let (cluster, _serial) = crate::node();
    let runs = rollout::run(&cluster, &Config::default()).unwrap();
    eprintln!("{}", report::table(&runs));
    let by = |m: Mode| runs.iter().find(|r| r.mode == m).unwrap();

    for mode in [
        Mode::Sleep,
        Mode::SleepAction,
        Mode::Graceful,
        Mode::HttpGate,
        Mode::Injected,
    ] {
        let run = by(mode);
        assert_eq!(
            run.load.failed, 0,
            "{mode} dropped requests: {:?}",
            run.load.failures
        );
    }
    assert!(
        by(Mode::None).load.failed > 0,
        "without a hook nothing was dropped: the test no longer shows the race it exists for"
    );
    // Both sleeps hold every pod their 15 s, whatever its traffic. Timed
    // from the deletion as the test's own watch saw it, which may come up
    // to a few tens of milliseconds after the kubelet's (14.99 s seen once).
    for mode in [Mode::Sleep, Mode::SleepAction] {
        for t in &by(mode).terminations {
            assert!(
                t.exited_s >= 14.9,
                "{}: {mode} ended after {:.2} s",
                t.pod,
                t.exited_s
            );
        }
    }
    // Both gates release each pod by its traffic, after the endpoint left:
    // never at the deadline (25 s), never before the endpoint's removal.
    for mode in [Mode::Graceful, Mode::HttpGate, Mode::Injected] {
        for t in &by(mode).terminations {
            let why = t.released.as_deref().unwrap_or("no DrainReleased Event");
            assert!(
                why.starts_with("DrainReleased: drained"),
                "{}: {mode}: the drain was not released by its traffic: {why}",
                t.pod
            );
            assert!(
                t.exited_s > t.removed_s && t.exited_s < 15.0,
                "{}: {mode}: endpoint removed at {:.2} s, app exited at {:.2} s",
                t.pod,
                t.removed_s,
                t.exited_s
            );
        }
    }
}
