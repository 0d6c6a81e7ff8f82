//! kill -9 the agent with connections open, change things while it is
//! down, restart it: the counts are exact, and no event was missed.

use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    peer::{addr, Peer},
};

use crate::{require_root, settle};

#[test]
fn counts_survive_kill_9_and_changes_while_down() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));
    let mut agent = Agent::new();
    agent.start();
    let mut server = Peer::spawn(&a, None);
    let port = server.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(&b, None);
    client.connect(&addr("127.0.0.1", port), 10);
    settle(&agent, &[&a, &b], &[None]);

    agent.kill9();
    // The pinned programs keep counting while no agent runs.
    client.connect(&addr("127.0.0.1", port), 5);
    client.cmd("close-out 3 rst");
    server.cmd("close-in 2 fin");
    let mut late = Peer::spawn(&a, None);
    let late_port = late.listen("[::1]:0", "hold");
    client.connect(&addr("::1", late_port), 4);
    let views = settle(&agent, &[&a, &b], &[None]);
    assert_eq!(views[0].listeners, 2);

    agent.start();
    assert!(
        agent.log_text().contains("reused_link=true"),
        "the restarted agent should reuse the pinned link"
    );
    let views = settle(&agent, &[&a, &b], &[None]);
    // 15 opened, 3 reset; the 2 closed by the server stay live (CLOSE_WAIT) on the client; 4 more.
    assert_eq!(views[1].outbound_live, 16);
    let k = agent.counters(a.id());
    assert_eq!(
        k.inbound_total, 19,
        "every connection opened while the agent was down was counted"
    );
    drop((server, client, late));
    let views = settle(&agent, &[&a, &b], &[None]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
    assert_eq!(agent.counters(a.id()).inbound_closed_total, 19);
}

/// An upgrade: the running program is another version's (its link pin has
/// another fingerprint). The new agent attaches its own before detaching
/// the old one; during the overlap both count, and the per-socket counted
/// flag keeps every connection counted once.
#[test]
fn an_upgrade_replaces_the_program_without_losing_or_doubling_counts() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));
    let mut agent = Agent::new();
    agent.start();
    let mut server = Peer::spawn(&a, None);
    let port = server.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(&b, None);
    client.connect(&addr("127.0.0.1", port), 6);
    settle(&agent, &[&a, &b], &[None]);
    agent.stop();

    // Pretend the attached program belongs to an older version.
    let links = agent.pin_dir.join("links");
    let current = std::fs::read_dir(&links).unwrap().next().unwrap().unwrap().path();
    let old = links.join("sock_set_state-0000000000000000");
    std::fs::rename(&current, &old).unwrap();
    client.connect(&addr("127.0.0.1", port), 2);

    agent.start();
    assert!(!old.exists(), "the old version's link should be detached");
    assert!(current.exists(), "the new version's link should be pinned");
    client.cmd("close-out 3 rst");
    let views = settle(&agent, &[&a, &b], &[None]);
    assert_eq!(views[0].inbound_live, 5);
    let k = agent.counters(a.id());
    assert_eq!(
        (k.inbound_total, k.inbound_closed_total),
        (8, 3),
        "counted once each, across the upgrade"
    );
    drop((server, client));
    let views = settle(&agent, &[&a, &b], &[None]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
}
