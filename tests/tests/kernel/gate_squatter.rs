//! A process that binds a socket of its own where pods' hooks look for the
//! agent (`gate.sock`), as one with write access to the gate directory
//! could (the admission policy keeps pods' mounts of it read-only): the
//! hook asks the kernel who listens, finds it is not the agent (here, not
//! root), and fails open at once in one line; the agent, which holds the
//! node's pins, binds the socket again within its look interval, and the
//! next hook is its own.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use graceful_tests::{
    agent::Agent,
    gate::{finish, hook},
    pod::SimPod,
};

use crate::{metric, require_root};

/// A listener at `path` that listens as uid 65534 (bound as root, then the
/// uid dropped: the kernel records who called listen), accepting nothing.
fn squat(path: &std::path::Path) -> std::process::Child {
    let mut child = Command::new(graceful_tests::peer::peer_bin())
        .arg("squat")
        .arg(path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("graceful-peer");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "listening");
    child
}

#[test]
fn a_squatter_on_the_gate_socket_is_refused_by_the_hook_and_replaced_by_the_agent() {
    require_root!();
    let agent = Agent::started_with_gate();
    let pod = SimPod::create(1);
    let mut squatter = squat(&agent.gate_sock());

    let t = Instant::now();
    let (report, out) = finish(hook(&agent, pod.container(0), &["--max", "20s"]));
    let refused_in = t.elapsed();
    assert_eq!(report["reason"], "agent-unreachable", "{out}");
    assert!(out.contains("served by uid 65534, not root"), "{out}");
    assert!(
        refused_in < Duration::from_secs(2),
        "the hook waited on the squatter: {refused_in:?}"
    );

    // The agent binds its socket again (it looks every 2 s) and says so.
    let rebound = graceful_tests::wait_for(10, "the agent to bind the gate socket again", || {
        (metric(&agent, "graceful_errors_total{kind=\"gate_squatted\"}") >= 1).then(Instant::now)
    });
    let log = agent.log_text();
    assert!(
        log.contains("another process listened on the gate socket"),
        "{log}"
    );
    let (report, out) = finish(hook(&agent, pod.container(0), &["--min", "0s", "--max", "10s"]));
    assert_eq!(report["reason"], "drained", "{out}");
    eprintln!(
        "the hook refused the squatter in {refused_in:?} and failed open; the agent bound its socket again {:?} after the squat",
        rebound.duration_since(t)
    );
    let _ = squatter.kill();
    let _ = squatter.wait();
}
