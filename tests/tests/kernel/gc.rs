//! The counters' garbage collection: entries of cgroups that are gone and
//! hold nothing go; everything that may still be counted stays, and no
//! count is lost while cgroups come and go under a pass.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use graceful::{
    kernel::bpf::{maps::collect_garbage, paths::PinDir},
    kernel::cgroupfs::Hierarchy,
};
use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    peer::{addr, Peer},
    wait_for,
};

use crate::require_root;

#[test]
fn garbage_collection_drops_only_dead_idle_cgroups_and_loses_no_count() {
    require_root!();
    let mut agent = Agent::new();
    // Only this test collects.
    agent.daemon_args = vec!["--gc-interval".into(), "1h".into()];
    agent.start();
    let pins = PinDir::new(&agent.pin_dir);
    let hier = Hierarchy::discover().unwrap();
    let server_cg = Cgroup::unique("gc-server");
    let mut server = Peer::spawn(&server_cg, None);
    let port = server.listen("127.0.0.1:0", "hold");
    let target = addr("127.0.0.1", port);

    // Each of these had one outbound connection, now closed: an entry
    // with nothing live in it.
    let idle = |kind: &str| {
        let cg = Cgroup::unique(kind);
        let mut c = Peer::spawn(&cg, None);
        c.connect(&target, 1);
        let id = cg.id();
        wait_for(10, "the connection counted", || {
            (agent.counters(id).outbound_live == 1).then_some(())
        });
        c.kill();
        wait_for(10, "the close counted", || {
            (agent.counters(id).outbound_live == 0).then_some(())
        });
        (cg, id)
    };
    let (dead_idle, dead_idle_id) = idle("gc-dead-idle");
    drop(dead_idle);
    let (_live_idle, live_idle_id) = idle("gc-live-idle");
    // A listener whose cgroup is removed under it (its process moved on):
    // its close must still find the entry.
    let (dead_busy, elsewhere) = (Cgroup::unique("gc-dead-busy"), Cgroup::unique("gc-elsewhere"));
    let dead_busy_id = dead_busy.id();
    let mut listener = Peer::spawn(&dead_busy, None);
    listener.listen("127.0.0.1:0", "hold");
    std::fs::write(elsewhere.dir().join("cgroup.procs"), listener.pid().to_string()).unwrap();
    drop(dead_busy);

    let removed = collect_garbage(&pins, &hier).unwrap();
    let all: HashMap<u64, _> = agent.all_counters().into_iter().collect();
    assert!(removed >= 1, "nothing collected");
    assert!(
        !all.contains_key(&dead_idle_id),
        "a dead, idle cgroup kept its entry"
    );
    assert!(all.contains_key(&live_idle_id), "a live cgroup lost its entry");
    assert_eq!(
        all.get(&dead_busy_id).map(|c| c.listeners),
        Some(1),
        "a dead cgroup's listener lost"
    );
    listener.kill();
    wait_for(10, "the listener's close counted", || {
        (agent.counters(dead_busy_id).listeners == 0).then_some(())
    });

    // Passes back to back while new cgroups get their first listeners:
    // a pass must not take a new cgroup's entry for a dead one.
    let stop = Arc::new(AtomicBool::new(false));
    let collector = {
        let (stop, pins) = (stop.clone(), pins.clone());
        std::thread::spawn(move || {
            let mut passes = 0u32;
            while !stop.load(Ordering::Relaxed) {
                collect_garbage(&pins, &hier).unwrap();
                passes += 1;
            }
            passes
        })
    };
    let mut born = Vec::new();
    for _ in 0..60 {
        let cg = Cgroup::unique("gc-born");
        let mut p = Peer::spawn(&cg, None);
        p.listen("127.0.0.1:0", "hold");
        p.listen("[::1]:0", "hold");
        born.push((cg, p));
    }
    stop.store(true, Ordering::Relaxed);
    let passes = collector.join().unwrap();
    assert!(passes > 1, "the collector ran {passes} passes");
    for (cg, _) in &born {
        assert_eq!(agent.counters(cg.id()).listeners, 2, "cgroup {}", cg.path());
    }
}
