//! From one design to the other on the same pins. An agent of graceful 0.1
//! counted with the tracepoint design: storage on every socket, the state
//! program and its twin. The agent of today attaches the sock_ops program
//! beside them before it detaches them, takes their sockets over as it
//! meets them (the iterator at start, the sock_ops program when a socket
//! connects, is accepted or listens), and detaches the state programs once
//! no socket carries their storage. No count is lost or doubled on the way.

use graceful::kernel::bpf::{maps::Control, paths::PinDir};
use graceful_common::control;
use graceful_tests::{
    agent::{graceful, Agent},
    cgroup::Cgroup,
    peer::{addr, Peer},
};

use crate::{repaired_sockets, require_root, settle};

/// The link pins of `agent`, by file name.
fn links(agent: &Agent) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(agent.pin_dir.join("links"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn has(links: &[String], program: &str) -> bool {
    links.iter().any(|l| l.starts_with(&format!("{program}-")))
}

#[test]
fn an_upgrade_from_the_tracepoint_design_loses_and_doubles_nothing() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));
    let mut agent = Agent::new();
    agent.daemon_args = vec!["--counting".into(), "tracepoint".into()];
    agent.start();
    let mut server = Peer::spawn(&a, None);
    let port = server.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(&b, None);
    client.connect(&addr("127.0.0.1", port), 6);
    settle(&agent, &[&a, &b], &[None]);
    agent.stop();

    // The old version's programs: their pins as another build named them.
    let dir = agent.pin_dir.join("links");
    for l in links(&agent) {
        let (program, _) = l.rsplit_once('-').unwrap();
        std::fs::rename(dir.join(&l), dir.join(format!("{program}-0000000000000000"))).unwrap();
    }
    let old = links(&agent);
    assert!(has(&old, "sock_state_twin"), "{old:?}");
    // Counted by the old programs while no agent runs.
    client.connect(&addr("127.0.0.1", port), 2);

    agent.daemon_args = vec!["--repair-interval".into(), "300ms".into()];
    agent.start();
    assert!(
        agent.log_text().contains("counting=SockOps"),
        "{}",
        agent.log_text()
    );
    let now = links(&agent);
    assert!(has(&now, "sock_ops"), "{now:?}");
    assert!(
        !now.iter().any(|l| l.ends_with("-0000000000000000")),
        "the old version's programs should be detached: {now:?}"
    );
    // Through the listener the old design tracked: accepted under the new.
    client.connect(&addr("127.0.0.1", port), 3);
    client.cmd("close-out 4 rst");
    let views = settle(&agent, &[&a, &b], &[None]);
    assert_eq!((views[0].inbound_live, views[0].listeners), (7, 1));
    let k = agent.counters(a.id());
    assert_eq!(
        (k.inbound_total, k.inbound_closed_total),
        (11, 4),
        "counted once each, across the upgrade"
    );
    assert_eq!(agent.counters(b.id()).outbound_total, 11);

    // Once no socket carries the old storage, the state programs go.
    drop((server, client));
    let views = settle(&agent, &[&a, &b], &[None]);
    assert!(views.iter().all(|v| *v == Default::default()), "{views:?}");
    graceful_tests::wait_for(10, "the state programs to be detached", || {
        (!has(&links(&agent), "sock_set_state")).then_some(())
    });
    let bits = Control::open(&PinDir::new(&agent.pin_dir))
        .unwrap()
        .get()
        .unwrap();
    assert_eq!(
        bits & control::STORAGE,
        0,
        "the sock_ops program still looks for storage"
    );
    assert_eq!(repaired_sockets(&agent), 0);
    assert_eq!(agent.counters(a.id()).inbound_closed_total, 11);
}

/// The tracepoint design on pins that count with sock_ops: refused in one
/// line, and nothing changes.
#[test]
fn the_tracepoint_design_on_sock_ops_pins_is_refused_in_one_line() {
    require_root!();
    let mut agent = Agent::started();
    agent.stop();
    let before = links(&agent);
    let out = graceful(&agent.pin_dir, &["daemon", "--counting", "tracepoint"]);
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!out.status.success(), "{err}");
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("count with sock_ops") && lines[0].contains("graceful uninstall"),
        "{}",
        lines[0]
    );
    assert_eq!(links(&agent), before);
}
