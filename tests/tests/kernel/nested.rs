//! State changes in a softirq that interrupts the state program itself.
//!
//! The kernel runs a tracing program at most once per CPU at a time: an
//! event that fires while it runs (a softirq on the way out of an interrupt
//! that came during a connect() or close()) is skipped for it. Here the
//! namespace's loopback is shaped by `tbf`, so most packets leave from the
//! qdisc's timer interrupt and are received in the softirq after it,
//! interrupting whatever runs, our programs included. Handshakes, clones
//! and resets then land inside the programs' process-context runs.

use graceful::bpf::{counters::read_stats, paths::PinDir};
use graceful_common::stat;
use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    netns::NetNs,
    oracle,
    peer::{addr, Peer},
};

use crate::{kernel_figures, require_root, settle};

/// Ignored in the suite: it still fails about one run in two, and its
/// failure is a known, open defect (issue 2), not a flake. Without the
/// twin it fails every run: live counts leak (203-205 inbound for 200).
/// With it, live counts are exact in most runs, but in about half of them
/// `outbound_total` is 1-8 short of 20,500, and about one run in six
/// leaks one inbound count. A third copy catches nothing more, so the rest
/// is not the recursion guard. Run it with
/// `cargo test -p graceful-tests --test kernel -- --ignored nested::`.
#[test]
#[ignore = "exposes an open counting defect under timer-driven softirqs (issue 2)"]
fn counts_stay_exact_when_softirqs_interrupt_the_programs() {
    require_root!();
    let mut agent = Agent::new();
    agent.start();
    let ns = NetNs::create();
    // A rate low enough that the bucket is empty most of the time: packets
    // wait in the qdisc for its watchdog timer.
    ns.exec(
        "tc",
        &[
            "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "20mbit", "burst", "4kb", "limit", "64mb",
        ],
    );
    let (server_cg, client_cg) = (Cgroup::unique("srv"), Cgroup::unique("cli"));
    let mut server = Peer::spawn(&server_cg, Some(&ns));
    let echo = server.listen("127.0.0.1:0", "echo-close");
    let close_now = server.listen("127.0.0.1:0", "close-now");
    let hold = server.listen("127.0.0.1:0", "hold");

    let n: u64 = std::env::var("GRACEFUL_CHURN_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(5_000, |s| (5_000.0 * s).round().max(200.0) as u64);
    let jobs = [
        format!("churn {} {n} fin", addr("127.0.0.1", echo)),
        format!("churn {} {n} wait-fin", addr("127.0.0.1", close_now)),
        format!("churn {} {n} rst", addr("127.0.0.1", echo)),
        format!("churn {} {n} fin", addr("127.0.0.1", close_now)),
    ];
    // Long-lived ones too, opened and closed while the churn runs: a missed
    // first or last change of these would leave a count wrong for good.
    let mut holder = Peer::spawn(&client_cg, Some(&ns));
    std::thread::scope(|s| {
        for line in &jobs {
            let cg = &client_cg;
            let ns = &ns;
            s.spawn(move || Peer::spawn(cg, Some(ns)).cmd(line));
        }
        for _ in 0..5 {
            holder.connect(&addr("127.0.0.1", hold), 100);
            holder.cmd("close-out 60 rst");
        }
    });

    // The last closes may still be on their way through the qdisc.
    let held = |cg: &Cgroup| oracle::view(Some(&ns), cg.path());
    graceful_tests::wait_for(30, "the churn's last closes", || {
        (held(&server_cg).inbound_live == 200 && held(&client_cg).outbound_live == 200).then_some(())
    });
    let views = settle(&agent, &[&server_cg, &client_cg], &[Some(&ns)]);
    assert_eq!(views[0].listeners, 3, "{views:?}");
    let out_total = agent.counters(client_cg.id()).outbound_total;
    assert_eq!(
        out_total,
        4 * n + 500,
        "every connection counted once\n{}",
        kernel_figures(&agent)
    );

    drop(holder);
    drop(server);
    let views = settle(&agent, &[&server_cg, &client_cg], &[Some(&ns)]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
    let stats = read_stats(&PinDir::new(&agent.pin_dir)).unwrap();
    eprintln!(
        "nested: {} connections; the second copy handled {} state changes the first missed\n{}",
        4 * n + 500,
        stats[stat::CAUGHT as usize],
        kernel_figures(&agent)
    );
}
