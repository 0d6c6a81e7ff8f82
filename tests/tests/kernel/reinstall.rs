//! `graceful uninstall`, then a fresh install (a Helm or kustomize
//! reinstall, a GitOps prune, lost pins): the new agent counts every live
//! connection and listener on the node exactly, whichever install counted
//! it before, or none did, and also those that change while it starts.

use std::sync::atomic::{AtomicBool, Ordering};

use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    netns::VethPair,
    peer::{addr, Peer},
};

use crate::{require_root, settle};

/// The agent's log line that says how many flagged sockets it recounted.
fn recounted(log: &str) -> u64 {
    graceful_tests::agent::log_field(log, "adopted pre-existing sockets", "recounted")
        .unwrap_or_else(|| panic!("no recount in the agent's log: {log}"))
}

#[test]
fn a_reinstall_counts_what_any_install_counted_before_it() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));
    let net = VethPair::create();
    let spaces = [None, Some(&net.a), Some(&net.b)];

    // Before any agent: sockets no program has seen.
    let mut server = Peer::spawn(&a, None);
    let before = server.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(&b, None);
    client.connect(&addr("127.0.0.1", before), 3);

    // The first install adopts those and counts what opens while it runs,
    // on loopback and across a veth pair.
    let mut agent = Agent::started();
    let during = server.listen("[::1]:0", "hold");
    client.connect(&addr("::1", during), 4);
    let mut server_ns = Peer::spawn(&a, Some(&net.b));
    let q = server_ns.listen("0.0.0.0:0", "hold");
    let mut client_ns = Peer::spawn(&b, Some(&net.a));
    client_ns.connect(&addr(&net.b_v4, q), 5);
    settle(&agent, &[&a, &b], &spaces);

    // Stopped, its programs count on; then uninstalled: maps and programs
    // go, and nothing counts until the next install.
    agent.stop();
    client.connect(&addr("127.0.0.1", before), 2);
    agent.uninstall();
    client.connect(&addr("::1", during), 2);
    client.cmd("close-out 3 rst");
    server_ns.cmd("close-in 1 fin");
    let after = server.listen("127.0.0.1:0", "hold");
    client.connect(&addr("127.0.0.1", after), 1);
    // 12 and 5: every connection above, each accepted once (the 6.1
    // guest once took longer than 10 s here).
    graceful_tests::wait_equal(30, "the accepts (loopback, namespace)", (12, 5), || {
        (server.accepted(), server_ns.accepted())
    });

    // The reinstall: new maps in the same pin directory.
    agent.start();
    let views = settle(&agent, &[&a, &b], &spaces);
    // 4 listeners; 12 + 5 accepted, 3 reset by the client (RST: gone on
    // both sides), 1 closed by the namespace's server (gone from both: the
    // client peer closes its side on the FIN).
    assert_eq!((views[0].listeners, views[0].inbound_live), (4, 13), "{views:?}");
    assert_eq!(views[1].outbound_live, 14, "{views:?}");
    assert!(
        recounted(&agent.log_text()) > 0,
        "the first install flagged connections; the reinstall should recount them"
    );

    // Their closes, and new connections, count from there: nothing goes
    // below zero, nothing stays.
    client.cmd("close-out 4 fin");
    client.connect(&addr("127.0.0.1", after), 2);
    settle(&agent, &[&a, &b], &spaces);
    drop((server, client, server_ns, client_ns));
    let views = settle(&agent, &[&a, &b], &spaces);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
}

#[test]
fn a_reinstall_under_churn_stays_exact() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));
    // It closes each connection once its client has: the churn's server
    // sides do not pile up (a slow guest's peer ran out of room for them).
    let mut server = Peer::spawn(&a, None);
    let port = server.listen("127.0.0.1:0", "echo-close");
    let mut agent = Agent::started();
    let mut held = Peer::spawn(&b, None);
    held.connect(&addr("127.0.0.1", port), 20);
    settle(&agent, &[&a, &b], &[None]);
    agent.uninstall();

    // Connections of the first install open and close while the second
    // one starts: each change lands before, during or after its adoption.
    let stop = AtomicBool::new(false);
    let (churner, rounds) = std::thread::scope(|s| {
        let churn = s.spawn(|| {
            let mut c = Peer::spawn(&b, None);
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                c.connect(&addr("127.0.0.1", port), 10);
                c.cmd("close-out 5 fin");
                c.cmd("close-out 5 rst");
                rounds += 1;
            }
            (c, rounds)
        });
        std::thread::sleep(std::time::Duration::from_millis(300));
        agent.start();
        held.cmd("close-out 5 fin");
        std::thread::sleep(std::time::Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        churn.join().expect("the churn thread")
    });
    assert!(rounds > 10, "the churn ran {rounds} rounds only");
    // The server keeps its side of the connections closed by RST out of
    // the count, and holds the FIN-closed ones in CLOSE_WAIT until it
    // closes them: settle compares with the kernel's view either way.
    let views = settle(&agent, &[&a, &b], &[None]);
    assert_eq!(views[1].outbound_live, 15, "{views:?}");
    drop((server, held, churner));
    let views = settle(&agent, &[&a, &b], &[None]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
}
