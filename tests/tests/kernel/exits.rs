//! The container-exit program (`tp_btf/cgroup_notify_populated`): the
//! kernel says when a watched cgroup's last process exits, stamped with the
//! moment it did, and says nothing about anyone else.

use std::time::Duration;

use graceful::kernel::bpf::{paths::PinDir, Kernel};
use graceful_common::{event, names, watch, Event};
use graceful_tests::monotonic_ns;
use graceful_tests::{agent::Agent, cgroup::Cgroup, peer::Peer};
use tokio::sync::broadcast::{error::TryRecvError, Receiver};

use crate::require_root;

/// Every event on the ring until it has been quiet for 200 ms.
fn settle(rt: &tokio::runtime::Runtime, rx: &mut Receiver<Event>) -> Vec<Event> {
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(200)).await });
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(e) => out.push(e),
            Err(TryRecvError::Lagged(n)) => panic!("missed {n} events"),
            Err(_) => return out,
        }
    }
}

#[test]
fn the_kernel_reports_a_watched_cgroups_exit_and_only_that() {
    require_root!();
    let mut agent = Agent::started();
    let links: Vec<String> = std::fs::read_dir(PinDir::new(&agent.pin_dir).links())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        links
            .iter()
            .any(|l| l.starts_with(&format!("{}-", names::PROG_POPULATED))),
        "the exit program's link is not pinned: {links:?}"
    );
    // The bench's way: no agent reading the ring, so this test sees every event.
    agent.stop();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let kernel = rt.block_on(async { Kernel::open(&PinDir::new(&agent.pin_dir)).unwrap() });

    let (exits, conns, none) = (
        Cgroup::unique("exits"),
        Cgroup::unique("conns"),
        Cgroup::unique("none"),
    );
    // A child cgroup: its parent empties with it, and is not watched.
    let nested = Cgroup::create(&format!("{}/child", none.path()));
    let peers: Vec<Peer> = [&exits, &conns, &none, &nested]
        .iter()
        .flat_map(|c| [Peer::spawn(c, None), Peer::spawn(c, None)])
        .collect();
    let _exits = kernel.watch(&[exits.id()], watch::EXITS).unwrap();
    let _conns = kernel.watch(&[conns.id()], watch::CONNECTIONS).unwrap();
    let mut rx = kernel.events.subscribe();

    let mut peers = peers.into_iter();
    // One of two processes gone: still populated, nothing to say.
    peers.next().unwrap().kill();
    assert_eq!(settle(&rt, &mut rx), [], "an event while a process still runs");

    let before = monotonic_ns();
    for p in peers {
        p.kill();
    }
    let after = monotonic_ns();
    let evs = settle(&rt, &mut rx);
    assert_eq!(
        evs.len(),
        1,
        "expected one exit event (the watched cgroup's): {evs:?}"
    );
    let e = evs[0];
    assert_eq!((e.kind, e.cgroup_id), (event::EMPTIED, exits.id()), "{e:?}");
    assert!(
        (before..=after).contains(&e.ts_ns),
        "the exit is stamped {} ns, outside the kills [{before}, {after}]",
        e.ts_ns
    );
}
