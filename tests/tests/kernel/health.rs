//! `/healthz` tells the truth: pins removed from under the agent, or its
//! gate socket taken, fail it. The agent holds every map and link, so a
//! removal loses nothing: it pins them again within seconds, binds its
//! gate again, and says so.

use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    peer::{addr, Peer},
    unix_http::{get, status as status_on},
    wait_for,
};

use crate::{require_root, settle};

#[test]
fn healthz_fails_while_pins_are_gone_and_the_agent_pins_them_again_losing_nothing() {
    require_root!();
    let (a, b) = (Cgroup::unique("a"), Cgroup::unique("b"));

    // Re-pinning off: the pins removed, /healthz and /readyz fail, saying why.
    let mut agent = Agent::with_gate();
    agent.daemon_args = vec!["--repin-interval".into(), "0s".into()];
    agent.start();
    assert_eq!(status_on(&agent.api_sock(), "/healthz"), Some(200));
    std::fs::remove_dir_all(&agent.pin_dir).unwrap();
    let out = get(&agent.api_sock(), "/healthz").unwrap();
    assert!(out.starts_with("HTTP/1.1 503"), "{out}");
    assert!(out.contains("pins are gone"), "{out}");
    assert_eq!(status_on(&agent.api_sock(), "/readyz"), Some(503));
    drop(agent);

    // Re-pinning on (the default): counts go on while the pins are gone,
    // and they are back within seconds, exact.
    let agent = Agent::started_with_gate();
    let mut server = Peer::spawn(&a, None);
    let port = server.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(&b, None);
    client.connect(&addr("127.0.0.1", port), 3);
    settle(&agent, &[&a, &b], &[None]);
    std::fs::remove_dir_all(&agent.pin_dir).unwrap();
    client.connect(&addr("127.0.0.1", port), 4);
    server.cmd("close-in 2 fin");
    wait_for(15, "the pins to be back and /healthz to pass", || {
        (status_on(&agent.api_sock(), "/healthz") == Some(200)).then_some(())
    });
    assert!(
        agent.log_text().contains("pinned them again"),
        "{}",
        agent.log_text()
    );
    let views = settle(&agent, &[&a, &b], &[None]);
    assert_eq!(views[1].outbound_live, 7, "{views:?}");
    // The lock came back with the directory: still the node's only agent.
    let second = agent.second(&agent.pin_dir);
    assert!(
        !second.status.success()
            && String::from_utf8_lossy(&second.stderr).contains(&format!("pid {}", agent.pid().unwrap())),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );

    // Its gate socket's path made unbindable (a directory in its place):
    // /healthz fails; the path freed, the agent binds its gate again. (A
    // listener of another process there is replaced at once: see
    // `gate_squatter`.)
    let gate = agent.gate_sock();
    std::fs::remove_file(&gate).unwrap();
    std::fs::create_dir_all(gate.join("blocker")).unwrap();
    wait_for(15, "/healthz to see the gate unbound", || {
        (status_on(&agent.api_sock(), "/healthz") == Some(503)).then_some(())
    });
    assert!(get(&agent.api_sock(), "/healthz")
        .unwrap()
        .contains("gate is not listening"));
    std::fs::remove_dir_all(&gate).unwrap();
    wait_for(15, "the gate to be bound again", || {
        (status_on(&gate, "/v1/self") == Some(403)).then_some(())
    });
    wait_for(15, "/healthz to pass again", || {
        (status_on(&agent.api_sock(), "/healthz") == Some(200)).then_some(())
    });
    assert!(
        agent.log_text().contains("bound the gate socket again"),
        "{}",
        agent.log_text()
    );
}
