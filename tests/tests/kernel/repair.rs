//! Counts set right after a state change both copies of the state program
//! missed, under the tracepoint design (`--counting tracepoint`; the
//! sock_ops design misses none, and its state programs only count adopted
//! sockets): the agent's pass over every socket at start, its periodic
//! pass, and the pass over a draining pod's namespace before the drain's
//! first look. The miss is made by hand (it can't be provoked on demand): one
//! accepted socket's storage says "not counted", and its cgroup's figures
//! leave it out, as a missed first live change leaves them.

use std::os::fd::OwnedFd;

use aya::maps::{HashMap, Map, MapData, SkStorage};
use graceful::kernel::bpf::{maps::read_stats, paths::PinDir};
use graceful_common::{names, role, stat, CgroupCounters, SockOwner};
use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    gate::{engaged, finish_engaged, hook, pod_holding},
    peer::{held_connections, Peer},
};

use crate::{kernel_figures, repaired_sockets, require_root, settle};

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

/// An agent that counts with the tracepoint design, whose misses these
/// tests make.
fn tracepoint_agent() -> Agent {
    let mut agent = Agent::new();
    agent.daemon_args = vec!["--counting".into(), "tracepoint".into()];
    agent
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

/// A missed first change, and an agent restart: its start-up pass finds
/// the connection live by its state and counts it.
#[test]
fn a_restart_counts_a_connection_whose_first_change_was_missed() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));
    let mut agent = tracepoint_agent();
    agent.start();
    let (mut server, client) = held_connections(&a, &b, 3);
    settle(&agent, &[&a, &b], &[None]);
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
    let mut agent = tracepoint_agent();
    agent
        .daemon_args
        .extend(["--repair-interval".into(), "300ms".into()]);
    agent.start();
    let (mut server, client) = held_connections(&a, &b, 3);
    settle(&agent, &[&a, &b], &[None]);
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
    assert_eq!(repaired_sockets(&agent), 1, "{}", kernel_figures(&agent));
    drop(sock);
    drop((server, client));
    let views = settle(&agent, &[&a, &b], &[None]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
}

/// A pod whose count is one short when its preStop hook starts: the drain
/// repairs its namespace before its first look, so it counts all three
/// connections and is released only after the last of them closes.
#[test]
fn a_drain_counts_a_connection_whose_first_change_was_missed() {
    require_root!();
    let mut agent = Agent::with_gate();
    agent
        .daemon_args
        .extend(["--counting".into(), "tracepoint".into()]);
    agent.start();
    let (pod, lb, mut app, _clients) = pod_holding(3);
    settle(&agent, &[pod.container(0), &lb], &[None]);
    let (sock, caught) = fake_a_missed_first_change(&agent, &mut app, pod.container(0));
    assert_eq!(agent.counters(pod.container(0).id()).inbound_live, 2);

    let mut child = hook(
        &agent,
        pod.container(0),
        &["--min", "0s", "--settle", "100ms", "--max", "20s"],
    );
    let stdout = engaged(&mut child);
    assert_repaired(&agent, &sock, pod.container(0), caught);
    drop(sock);
    app.cmd("close-in 3 fin");
    let (report, out) = finish_engaged(child, stdout);
    assert_eq!(report["reason"], "drained", "{out}");
    assert_eq!(report["inbound_at_start"], 3, "{out}");
    assert!(
        agent
            .log_text()
            .contains("repaired the counts of the draining pod's sockets"),
        "{}",
        agent.log_text()
    );
}
