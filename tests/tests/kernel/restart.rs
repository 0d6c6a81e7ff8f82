//! kill -9 the agent with connections open, change things while it is
//! down, restart it: the counts are exact, and no event was missed.

use std::os::fd::OwnedFd;

use aya::maps::{HashMap, Map, MapData, SkStorage};
use graceful::bpf::{counters::read_stats, paths::PinDir};
use graceful_common::{names, role, stat, CgroupCounters, SockOwner};
use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    peer::{addr, Peer},
};

use crate::{kernel_figures, require_root, settle};

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

/// Makes one of `server`'s held accepted connections look as both copies
/// of the state program leave a connection whose first live change they
/// missed (rarely, under nested softirqs: `state.rs`): its storage says
/// "not counted", and its cgroup's figures leave it out. Returns the
/// socket (it stays open while the returned copy does) and CAUGHT before.
/// The figures go first: until the storage says "not counted", a running
/// agent's repair pass finds nothing to do, so it never races the edit.
fn fake_a_missed_first_change(agent: &Agent, server: &mut Peer, cg: &Cgroup) -> (OwnedFd, u64) {
    let pins = PinDir::new(&agent.pin_dir);
    // Before the miss is made: the repair must add exactly one.
    let caught = read_stats(&pins).unwrap()[stat::CAUGHT as usize];
    let sock = server.held_in_socket();
    let mut counters: HashMap<MapData, u64, CgroupCounters> = HashMap::try_from(Map::HashMap(
        MapData::from_pin(pins.map(names::COUNTERS)).unwrap(),
    ))
    .unwrap();
    let mut c = counters.get(&cg.id(), 0).unwrap();
    c.inbound_live -= 1;
    c.inbound_total -= 1;
    counters.insert(cg.id(), c, 0).unwrap();
    let mut socks: SkStorage<MapData, SockOwner> =
        SkStorage::try_from(Map::SkStorage(MapData::from_pin(pins.map(names::SOCKS)).unwrap())).unwrap();
    let mut owner = socks.get(&sock, 0).unwrap();
    assert_eq!(
        (owner.cgroup_id, owner.role, owner.counted),
        (cg.id(), role::INBOUND, 1)
    );
    owner.counted = 0;
    socks.insert(&sock, owner, 0).unwrap();
    (sock, caught)
}

/// After [`fake_a_missed_first_change`]: the socket is counted again, once.
fn assert_repaired(agent: &Agent, sock: &OwnedFd, cg: &Cgroup, caught: u64) {
    let pins = PinDir::new(&agent.pin_dir);
    let socks: SkStorage<MapData, SockOwner> =
        SkStorage::try_from(Map::SkStorage(MapData::from_pin(pins.map(names::SOCKS)).unwrap())).unwrap();
    assert_eq!(socks.get(sock, 0).unwrap().counted, 1);
    assert_eq!(agent.counters(cg.id()).inbound_total, 3);
    assert_eq!(read_stats(&pins).unwrap()[stat::CAUGHT as usize], caught + 1);
}

/// Three connections from `b` held by a server in `a`, counted.
fn three_held(agent: &Agent, a: &Cgroup, b: &Cgroup) -> (Peer, Peer) {
    let mut server = Peer::spawn(a, None);
    let port = server.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(b, None);
    client.connect(&addr("127.0.0.1", port), 3);
    graceful_tests::wait_for(10, "accepts", || (server.accepted() == 3).then_some(()));
    settle(agent, &[a, b], &[None]);
    (server, client)
}

/// A missed first change, and an agent restart: its start-up pass finds
/// the connection live by its state and counts it.
#[test]
fn a_restart_counts_a_connection_whose_first_change_was_missed() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));
    let mut agent = Agent::new();
    agent.start();
    let (mut server, client) = three_held(&agent, &a, &b);
    agent.stop();
    let (sock, caught) = fake_a_missed_first_change(&agent, &mut server, &a);
    assert_eq!(
        agent.counters(a.id()).inbound_live,
        2,
        "the miss, as the CLI shows it"
    );

    agent.start();
    settle(&agent, &[&a, &b], &[None]);
    assert_repaired(&agent, &sock, &a, caught);
    assert!(agent.log_text().contains("repaired=1"), "{}", agent.log_text());
    drop(sock);
    drop((server, client));
    let views = settle(&agent, &[&a, &b], &[None]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
    assert_eq!(agent.counters(a.id()).inbound_closed_total, 3);
}

/// The same miss under a running agent: its periodic pass repairs it,
/// and says so in one line.
#[test]
fn a_running_agent_repairs_a_missed_first_change_within_its_interval() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));
    let mut agent = Agent::new();
    agent.daemon_args = vec!["--repair-interval".into(), "300ms".into()];
    agent.start();
    let (mut server, client) = three_held(&agent, &a, &b);
    let (sock, caught) = fake_a_missed_first_change(&agent, &mut server, &a);

    settle(&agent, &[&a, &b], &[None]);
    assert_repaired(&agent, &sock, &a, caught);
    graceful_tests::wait_for(10, "the repair's log line", || {
        agent
            .log_text()
            .lines()
            .any(|l| l.contains("repaired the counts") && l.contains("repaired=1"))
            .then_some(())
    });
    let figures = kernel_figures(&agent);
    assert!(
        figures.contains("graceful_repaired_sockets_total 1\n"),
        "{figures}"
    );
    drop(sock);
    drop((server, client));
    let views = settle(&agent, &[&a, &b], &[None]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
}
