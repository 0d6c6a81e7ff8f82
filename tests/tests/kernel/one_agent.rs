//! One agent per node: a second agent on the same pins, gate or API socket
//! refuses to start, naming the first one's pid, and leaves its sockets
//! alone; a dead agent's stale sockets are replaced by the next one.

use graceful_tests::{
    agent::{graceful, Agent},
    unix_http::status as status_on,
};

use crate::require_root;

fn refused_naming(out: &std::process::Output, pid: u32, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second agent ({what}) started: {stderr}");
    assert!(
        stderr.contains(&format!("pid {pid}")) && stderr.contains("one agent per node"),
        "a second agent ({what}) did not name the first one (pid {pid}): {stderr}"
    );
    assert!(
        !stderr.contains(" ready"),
        "a second agent ({what}) said ready: {stderr}"
    );
}

#[test]
fn a_second_agent_refuses_to_start_and_the_first_keeps_serving() {
    require_root!();
    let mut first = Agent::started_with_gate();
    let pid = first.pid().unwrap();
    let gate = first.gate_sock();
    let gate_inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&gate).unwrap());

    // The same pins, gate and API socket: the pin directory's lock.
    refused_naming(&first.second(&first.pin_dir), pid, "same pins");
    // Its own pins, the same gate and API socket: the API socket's lock.
    let other_pins = Agent::new();
    refused_naming(&first.second(&other_pins.pin_dir), pid, "other pins");
    assert!(
        !other_pins.pin_dir.exists()
            || std::fs::read_dir(other_pins.pin_dir.join("links")).map_or(true, |mut d| d.next().is_none()),
        "a refused agent attached programs in {}",
        other_pins.pin_dir.display()
    );

    // The first agent's sockets are the ones it bound, and answer.
    let now = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&gate).unwrap());
    assert_eq!(now, gate_inode, "the gate socket was re-bound");
    // A caller outside any pod: refused by the first agent, which answers.
    assert_eq!(status_on(&gate, "/v1/self"), Some(403));
    assert_eq!(status_on(&first.api_sock(), "/healthz"), Some(200));

    // Its pins cannot be pulled from under it either.
    let out = graceful(&first.pin_dir, &["uninstall"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains(&format!("pid {pid}")),
        "uninstall ran under a live agent: {stderr}"
    );
    assert!(first.pin_dir.join("maps").exists());
    assert_eq!(status_on(&first.api_sock(), "/healthz"), Some(200));

    // Dead, the first agent leaves its gate socket behind, stale: the next
    // agent replaces it and serves.
    first.kill9();
    assert!(gate.exists());
    assert_eq!(status_on(&gate, "/v1/self"), None);
    first.start();
    assert_eq!(status_on(&gate, "/v1/self"), Some(403));
    assert_eq!(status_on(&first.api_sock(), "/healthz"), Some(200));
}
