//! Release latency after the last inbound close, against a 1 s poller.
//!
//! Each drain: a pod's server holds one inbound connection; the drain
//! starts (drained policy, min 0, settle 0); the app closes the connection;
//! the latency is release minus the kernel's timestamp of that close. The
//! same run measures a sock_diag poller at 1 s (what Istio's
//! EXIT_ON_ZERO_ACTIVE_CONNECTIONS and Envoy's shutdown managers do): the
//! time from the close to the first poll that sees zero.

use std::time::{Duration, Instant};

use graceful::{
    drain::{engine, policy::Reason},
    kernel::adopt::sockdiag,
};

use super::{
    programs::{self, immediate},
    stats::summary,
};
use graceful_tests::{
    cgroup::Cgroup,
    monotonic_ns,
    peer::{addr, Peer},
};

/// `drains` drains through graceful, then `polls` through the poller.
pub fn run(drains: usize, polls: usize) {
    let (_agent, rt, kernel) = programs::without_agent();
    let (app, lb) = (Cgroup::unique("app"), Cgroup::unique("lb"));
    let mut server = Peer::spawn(&app, None);
    let port = server.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(&lb, None);

    // graceful: event-driven release.
    let mut graceful_ms = Vec::with_capacity(drains);
    for i in 0..drains {
        client.connect(&addr("127.0.0.1", port), 1);
        graceful_tests::wait_for(10, "accept", || (server.accepted() == i as u64 + 1).then_some(()));
        let params = immediate();
        let cgroups = [app.id()];
        let report = rt.block_on(async {
            let drain = engine::run(
                &kernel,
                &cgroups,
                params,
                None::<std::future::Pending<()>>,
                |_| {},
            );
            let close = async {
                // Let the drain see the connection first.
                tokio::time::sleep(Duration::from_millis(1)).await;
                server.cmd("close-in 1 fin");
            };
            let (r, ()) = tokio::join!(drain, close);
            r.unwrap()
        });
        assert_eq!(
            report.reason,
            Reason::Drained,
            "drain {i}: {report:?} now {:?}",
            kernel.counters.get(app.id())
        );
        let close_ns = kernel.counters.get(app.id()).last_inbound_close_ns;
        graceful_ms.push(report.release_ns.saturating_sub(close_ns) as f64 / 1e6);
        client.cmd("close-out 1 fin");
    }

    // The 1 s sock_diag poller, on the same machine in the same run.
    let mut poller_ms = Vec::with_capacity(polls);
    let app_id = app.id();
    for i in 0..polls {
        client.connect(&addr("127.0.0.1", port), 1);
        graceful_tests::wait_for(10, "accept", || {
            (server.accepted() == (drains + i) as u64 + 1).then_some(())
        });
        // The poller's phase is whatever it is when the close happens.
        let phase = Duration::from_millis(1000 * (i as u64 % 10) / 10 + 37);
        let started = Instant::now();
        let poller = std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_secs(1));
            let live = sockdiag::dump_tcp()
                .unwrap()
                .iter()
                .filter(|s| s.cgroup_id == Some(app_id) && (s.state == 1 || s.state == 8))
                .count();
            if live == 0 {
                return monotonic_ns();
            }
        });
        std::thread::sleep(phase);
        server.cmd("close-in 1 fin");
        let released = poller.join().unwrap();
        let close_ns = kernel.counters.get(app_id).last_inbound_close_ns;
        poller_ms.push(released.saturating_sub(close_ns) as f64 / 1e6);
        client.cmd("close-out 1 fin");
        let _ = started;
    }

    println!("release latency after the last inbound close (drained policy, settle 0):");
    let (g50, g99) = summary("graceful (event-driven)", graceful_ms);
    let (p50, p99) = summary("sock_diag poller at 1 s", poller_ms);
    println!(
        "ratio poller/graceful: p50 {:.0}x, p99 {:.0}x",
        p50 / g50,
        p99 / g99
    );
    println!(
        "{{\"bench\":\"release-latency\",\"graceful_p50_ms\":{g50:.3},\"graceful_p99_ms\":{g99:.3},\"poller_p50_ms\":{p50:.3},\"poller_p99_ms\":{p99:.3},\"ratio_p50\":{:.1},\"ratio_p99\":{:.1}}}",
        p50 / g50,
        p99 / g99
    );
}
