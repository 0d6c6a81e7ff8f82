//! State changes in a softirq that interrupts the state program itself.
//!
//! The kernel runs a tracing program at most once per CPU at a time: an
//! event that fires while it runs (a softirq on the way out of an interrupt
//! that came during a connect() or close()) is skipped for it. Here the
//! namespace's loopback is shaped by `tbf`, so most packets leave from the
//! qdisc's timer interrupt and are received in the softirq after it,
//! interrupting whatever runs, our programs included. Handshakes, clones
//! and closes then land inside the programs' process-context runs.
//!
//! Without the backstops (the state program's second copy and the one at
//! socket destruction) this fails every run: 3 to 5 inbound counts of
//! 20,000 connections never come down.

use graceful::bpf::{maps::read_stats, paths::PinDir};
use graceful_common::stat;
use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    netns::NetNs,
    oracle,
    peer::{addr, Peer},
};

use crate::{kernel_figures, require_root, settle};

#[test]
fn live_counts_stay_exact_when_softirqs_interrupt_the_programs() {
    require_root!();
    let ns = NetNs::create();
    // A rate low enough that the bucket is empty most of the time: packets
    // wait in the qdisc for its watchdog timer.
    let shaped = std::process::Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", ns.name))
        .args(["tc", "qdisc", "add", "dev", "lo", "root", "tbf"])
        .args(["rate", "20mbit", "burst", "4kb", "limit", "64mb"])
        .output()
        .unwrap();
    if !shaped.status.success() {
        eprintln!(
            "SKIPPED nested: cannot shape loopback with tbf here ({}); the host run covers it",
            String::from_utf8_lossy(&shaped.stderr).trim()
        );
        return;
    }
    let mut agent = Agent::new();
    agent.start();
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
    // Totals are not what a drain decides on, and they can still come up
    // short: a connection whose first live change both copies missed, and
    // whose next change ends it, is never counted (see the issue 2 note).
    // They never count one twice.
    let total = 4 * n + 500;
    let out_total = agent.counters(client_cg.id()).outbound_total;
    assert!(out_total <= total, "{out_total} outbound for {total} connections");

    drop(holder);
    drop(server);
    let views = settle(&agent, &[&server_cg, &client_cg], &[Some(&ns)]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
    let stats = read_stats(&PinDir::new(&agent.pin_dir)).unwrap();
    eprintln!(
        "nested: {total} connections, {} outbound counted; the backstops caught {} changes the state program missed\n{}",
        out_total,
        stats[stat::CAUGHT as usize],
        kernel_figures(&agent)
    );
}
