//! The drain engine on the real kernel: released by the kernel's own
//! event for the last inbound close, not by a poll.

use std::time::Duration;

use graceful::{
    drain::{
        engine,
        policy::{Params, Policy, Reason},
    },
    kernel::bpf::{paths::PinDir, Kernel},
};
use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    event_slack_ms, monotonic_ns,
    peer::{held_connections, Peer},
};

use crate::require_root;

fn params(policy: Policy, max: Duration) -> Params {
    Params {
        policy,
        start_ns: monotonic_ns(),
        min: Duration::ZERO,
        max,
        settle: Duration::from_millis(100),
        quiet: Duration::from_millis(300),
        uncounted: false,
    }
}

/// An agent's programs, attached and pinned with the agent stopped, and an
/// app's cgroup whose server holds `n` connections from a load balancer's
/// cgroup: the agent, the two cgroups, the server and its clients. The
/// tests read the event ring themselves, and a ring has one read position:
/// a running agent would take the very events they wait for.
fn stopped_with_held(n: usize) -> (Agent, Cgroup, Cgroup, Peer, Peer) {
    let mut agent = Agent::started();
    agent.stop();
    let (app, clients) = (Cgroup::unique("app"), Cgroup::unique("lb"));
    let (server, client) = held_connections(&app, &clients, n);
    (agent, app, clients, server, client)
}

#[test]
fn drained_is_released_settle_after_the_last_close() {
    require_root!();
    let (agent, app, _clients, mut server, _client) = stopped_with_held(5);

    let rt = tokio::runtime::Runtime::new().unwrap();
    let report = rt.block_on(async {
        let kernel = Kernel::open(&PinDir::new(&agent.pin_dir)).unwrap();
        let cgroups = [app.id()];
        let drain = engine::run(
            &kernel,
            &cgroups,
            params(Policy::Drained, Duration::from_secs(20)),
            None::<std::future::Pending<()>>,
            |_| {},
        );
        let closer = tokio::task::spawn_blocking(move || {
            // The app closes its connections one by one, as it finishes them.
            for _ in 0..5 {
                std::thread::sleep(Duration::from_millis(50));
                server.cmd("close-in 1 fin");
            }
            server
        });
        let (report, server) = tokio::join!(drain, closer);
        drop(server);
        report.unwrap()
    });
    assert_eq!(report.reason, Reason::Drained, "{report:?}");
    assert_eq!(report.inbound_at_start, 5);
    assert_eq!(report.peak_inbound, 5);
    assert_eq!(report.inbound_at_release, 0);
    assert_eq!(report.timeline.last().unwrap().inbound, 0);
    // Released `settle` after the last close, never before: the kernel's
    // close event wakes it, not a poll.
    let after = report.after_last_close_ms.unwrap();
    assert!(
        (100..=100 + event_slack_ms()).contains(&after),
        "released {after} ms after the last close (settle 100 ms)"
    );
    eprintln!("drained: released {after} ms after the last close (settle 100 ms)");
}

#[test]
fn drained_hits_its_deadline_with_idle_keepalive_connections() {
    require_root!();
    let (agent, app, _clients, _server, _pool) = stopped_with_held(20);

    let rt = tokio::runtime::Runtime::new().unwrap();
    let report = rt.block_on(async {
        let kernel = Kernel::open(&PinDir::new(&agent.pin_dir)).unwrap();
        engine::run(
            &kernel,
            &[app.id()],
            params(Policy::Drained, Duration::from_millis(500)),
            None::<std::future::Pending<()>>,
            |_| {},
        )
        .await
        .unwrap()
    });
    assert_eq!(report.reason, Reason::Deadline);
    assert_eq!(report.inbound_at_release, 20);
    assert!(
        (500..=500 + event_slack_ms()).contains(&report.waited_ms),
        "waited {} ms for a 500 ms deadline",
        report.waited_ms
    );
    let _ = monotonic_ns();
}
