//! Churn: over 100,000 connections opened and closed across cgroups, ending
//! in every way, then every count equals the kernel's and returns to zero.

use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    peer::{addr, Peer},
};

use crate::{kernel_figures, repaired_sockets, require_root, settle};

/// Destinations spread over several loopback addresses, so client-side
/// TIME_WAIT never exhausts the ephemeral ports of one address pair.
fn spread(port: u16) -> String {
    (1..=8)
        .map(|i| addr(&format!("127.0.0.{i}"), port))
        .collect::<Vec<_>>()
        .join(",")
}

/// `GRACEFUL_CHURN_SCALE` (default 1.0) scales the churned connections, for
/// quick runs on slow machines (`cargo xtask vm-test --churn-scale 0.1`).
fn scale() -> f64 {
    let Some(v) = std::env::var_os("GRACEFUL_CHURN_SCALE") else {
        return 1.0;
    };
    let v = v.to_string_lossy();
    let s: f64 = v
        .parse()
        .unwrap_or_else(|_| panic!("GRACEFUL_CHURN_SCALE={v:?}: expected a number such as 0.1"));
    assert!(
        s > 0.0 && s <= 1.0,
        "GRACEFUL_CHURN_SCALE={v}: expected a number in (0, 1]"
    );
    s
}

#[test]
fn churn_of_100k_connections_ending_every_way() {
    require_root!();
    let drops_before = listen_drops();
    let mut agent = Agent::new();
    // Counts are exact once the agent's repair pass has run after the last
    // change (every minute by default): a change that all three backstops
    // missed (both copies of the state program, then the one at
    // destruction, or a socket still open) is set right there. Here every
    // 2 s, within `settle`'s wait; the number it repaired is bounded below.
    agent.daemon_args = vec!["--repair-interval".into(), "2s".into()];
    agent.start();
    let (a, b, c, d) = (
        Cgroup::unique("a"),
        Cgroup::unique("b"),
        Cgroup::unique("c"),
        Cgroup::unique("d"),
    );

    let mut server = Peer::spawn(&a, None);
    let echo = server.listen("0.0.0.0:0", "echo-close"); // the client's FIN ends it
    let close_now = server.listen("0.0.0.0:0", "close-now"); // the server's FIN ends it
    let hold = server.listen("0.0.0.0:0", "hold");
    let mut backlog = Peer::spawn(&a, None);
    let never = backlog.listen("127.0.0.1:0", "noaccept"); // never accepted
    let mut held_by_d = Peer::spawn(&d, None);
    let hold_d = held_by_d.listen("127.0.0.1:0", "hold");

    // Three clients churn at once, from two cgroups.
    let scale = scale();
    let scaled = |n: f64| (n * scale).round() as u64;
    let (fin, server_fin, rst) = (scaled(40_000.0), scaled(30_000.0), scaled(30_000.0));
    if scale < 1.0 {
        eprintln!(
            "churn: GRACEFUL_CHURN_SCALE={scale}: churning {} connections, not 100,000",
            fin + server_fin + rst
        );
    }
    let jobs = [
        (&b, format!("churn {} {fin} fin", spread(echo))),
        (&c, format!("churn {} {server_fin} wait-fin", spread(close_now))),
        (&c, format!("churn {} {rst} rst", spread(echo))),
    ];
    std::thread::scope(|s| {
        for (cg, line) in &jobs {
            s.spawn(move || {
                let mut p = Peer::spawn(cg, None);
                p.cmd(line);
            });
        }
    });

    // Killed peers: a client holding 500 connections, and a server holding 500.
    let mut doomed_client = Peer::spawn(&b, None);
    doomed_client.connect(&addr("127.0.0.1", hold), 500);
    let mut client_of_d = Peer::spawn(&b, None);
    client_of_d.connect(&addr("127.0.0.1", hold_d), 500);
    graceful_tests::wait_for(10, "500 accepted", || {
        (server.accepted_on(hold) == 500).then_some(())
    });
    doomed_client.kill();
    held_by_d.kill();
    // The server's side of the killed client's connections stays live
    // (CLOSE_WAIT) until the server closes it.
    graceful_tests::wait_for(10, "the held side to see EOF", || {
        (graceful_tests::oracle::view(None, a.path()).inbound_live == 500).then_some(())
    });
    server.cmd("close-in 500 fin");
    // Connections never accepted: closed by the client while queued, then
    // the rest reset when their listener closes.
    let mut queued = Peer::spawn(&c, None);
    queued.connect(&addr("127.0.0.1", never), 100);
    queued.cmd("close-out 40 fin");
    backlog.cmd("close-listeners");
    queued.cmd("close-out 60 rst");
    client_of_d.cmd("close-out 500 fin");

    let views = settle(&agent, &[&a, &b, &c, &d], &[None]);
    // Only the three listeners of the live server remain.
    assert_eq!(
        views[0],
        graceful_tests::oracle::View {
            inbound_live: 0,
            outbound_live: 0,
            listeners: 3
        }
    );
    assert!(views[1..].iter().all(|v| *v == Default::default()), "{views:?}");

    // A client's connection whose final ACK met a full accept queue never
    // becomes a server socket (the kernel drops it as a request sock, and
    // `ss` never shows it): the server side can count that many fewer.
    let drops = listen_drops() - drops_before;
    let total = fin + server_fin + rst + 500 + 100;
    // Totals, unlike live counts, can come up short by a known gap (issue
    // 2): a connection whose first live change both copies of the state
    // program missed, and whose next change ends it, is never counted. Seen
    // at most once per 100,000 here, and up to 7 per 20,000 under the
    // softirq stress of `nested.rs`; bounded at 0.01 %. Never over.
    let missed = |n: u64| n / 10_000;
    let ka = agent.counters(a.id());
    assert!(
        (total.saturating_sub(drops + missed(total))..=total).contains(&ka.inbound_total),
        "inbound_total {} for {total} connections with {drops} listen drops",
        ka.inbound_total
    );
    assert_eq!(
        ka.inbound_closed_total, ka.inbound_total,
        "each counted connection closed once"
    );
    let within = |got: u64, want: u64| (want - missed(want)..=want).contains(&got);
    let (out_b, out_c) = (
        agent.counters(b.id()).outbound_total,
        agent.counters(c.id()).outbound_total,
    );
    assert!(
        within(out_b, fin + 500 + 500),
        "outbound_total {out_b} for {}",
        fin + 1000
    );
    assert!(
        within(out_c, server_fin + rst + 100),
        "outbound_total {out_c} for {}",
        server_fin + rst + 100
    );
    let kd = agent.counters(d.id());
    assert!(
        (500u64.saturating_sub(drops)..=500).contains(&kd.inbound_total),
        "{kd:?}"
    );
    assert_eq!(kd.inbound_closed_total, kd.inbound_total);

    drop(server);
    let views = settle(&agent, &[&a, &b, &c, &d], &[None]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
    let repaired = repaired_sockets(&agent);
    assert!(
        repaired <= missed(total),
        "{repaired} counts needed the repair pass: the backstops miss more than they should\n{}",
        kernel_figures(&agent)
    );
    eprintln!(
        "churn: {} connections opened and closed; every count back to zero, {repaired} set right by the repair pass\n{}",
        total + 500,
        kernel_figures(&agent)
    );
}

/// TcpExt ListenDrops of this network namespace: handshakes the kernel
/// completed on the client side but dropped at a full accept queue.
fn listen_drops() -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap();
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (keys, values) = (lines.next().unwrap(), lines.next().unwrap());
    let i = keys.split_whitespace().position(|k| k == "ListenDrops").unwrap();
    values.split_whitespace().nth(i).unwrap().parse().unwrap()
}
