//! `deploy/examples/web` rolled behind a real Service three ways: graceful's
//! hook drops nothing and costs the drain; no hook drops requests; `sleep
//! 15` drops nothing but costs 15 s a pod.

use graceful_tests::{
    cluster::rollout::{self, Config},
    rollout::{report, Mode},
};

#[test]
fn a_rolling_update_behind_a_service_three_ways() {
    let (cluster, _serial) = crate::node();
    let runs = rollout::run(&cluster, &Config::default()).unwrap();
    eprintln!("{}", report::table(&runs));
    let by = |m: Mode| runs.iter().find(|r| r.mode == m).unwrap();
    let (none, sleep, graceful) = (by(Mode::None), by(Mode::Sleep), by(Mode::Graceful));

    assert_eq!(
        graceful.load.failed, 0,
        "graceful's hook dropped requests: {:?}",
        graceful.load.failures
    );
    assert_eq!(
        sleep.load.failed, 0,
        "sleep 15 dropped requests: {:?}",
        sleep.load.failures
    );
    assert!(
        none.load.failed > 0,
        "without a hook nothing was dropped: the test no longer shows the race it exists for"
    );
    for t in &sleep.terminations {
        assert!(
            t.exited_s >= 15.0,
            "{}: sleep 15 ended after {:.2} s",
            t.pod,
            t.exited_s
        );
    }
    for t in &graceful.terminations {
        let why = t.released.as_deref().unwrap_or("no DrainReleased Event");
        assert!(
            why.starts_with("DrainReleased: drained"),
            "{}: the drain was not released by its traffic: {why}",
            t.pod
        );
        // Released by the traffic, after the endpoint left: never at the
        // deadline (25 s), never before the endpoint's removal.
        assert!(
            t.exited_s > t.removed_s && t.exited_s < 15.0,
            "{}: endpoint removed at {:.2} s, app exited at {:.2} s",
            t.pod,
            t.removed_s,
            t.exited_s
        );
    }
}
