//! The agent's memory budget, read from its real memory cgroup. The kernel
//! charges the agent's cgroup for the storage of every TCP socket on the
//! node, so its limit must grow with the node: the agent reports what it is
//! charged and its limit in `/metrics`, and warns before the limit is
//! reached (past it, the kernel OOM-kills it).

use std::net::{TcpListener, TcpStream};

use graceful_tests::{memcg::MemCgroup, unique, wait_for};

use super::*;

/// One series' value from the agent's `/metrics`.
fn metric(agent: &Agent, series: &str) -> Option<f64> {
    let s = std::os::unix::net::UnixStream::connect(agent.api_sock()).ok()?;
    let mut r = graceful_api::client::get(s, "/metrics", Some(std::time::Duration::from_secs(5))).ok()?;
    while let Ok(Some(l)) = r.next_line() {
        if let Some(v) = l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')) {
            return v.trim().parse().ok();
        }
    }
    None
}

/// Our own sockets that `ss` lists on the port, listener included: those
/// the node's figure must hold whatever else opens and closes meanwhile.
/// Live states only: an earlier test's connection that used the same port
/// number may still wait out TIME_WAIT (seen in a 6.1 guest: 403, not 401).
fn ss_sockets_on(port: u16) -> u64 {
    let out = std::process::Command::new("ss")
        .args([
            "-tanH",
            "state",
            "established",
            "state",
            "listening",
            &format!("( sport = :{port} or dport = :{port} )"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

#[test]
fn the_agent_reports_its_memory_cgroup_and_warns_before_its_limit() {
    require_root!();
    // Declared before the agent, so removed after it has stopped.
    let memcg = MemCgroup::create(&unique("memcg")).unwrap();
    let mut agent = Agent::new();
    agent.cgroup = Some(memcg.dir().to_path_buf());
    agent.daemon_args = vec!["--gc-interval".into(), "200ms".into()];
    agent.start();

    // Sockets of our own, so the node's figure has something to count.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    for _ in 0..200 {
        held.push(TcpStream::connect(addr).unwrap());
        held.push(listener.accept().unwrap().0);
    }
    let ours = ss_sockets_on(addr.port());
    assert_eq!(
        ours, 401,
        "ss lists our 200 connections' 400 ends and the listener"
    );

    let usage = memcg.usage().unwrap();
    let charged =
        metric(&agent, "graceful_memory_cgroup_bytes").expect("graceful_memory_cgroup_bytes in /metrics");
    assert!(
        charged > 0.0 && charged < 2.0 * usage as f64,
        "agent reports {charged} bytes charged, its cgroup holds {usage}"
    );
    let sockets = metric(&agent, "graceful_node_tcp_sockets").expect("graceful_node_tcp_sockets in /metrics");
    assert!(
        sockets >= ours as f64,
        "agent reports {sockets} TCP sockets on the node, ss lists {ours} of this test's alone"
    );
    assert!(
        agent
            .log_text()
            .contains("TCP sockets on the node, which cost it nothing under the sock_ops design"),
        "no budget line at start: {}",
        agent.log_text()
    );

    // A limit it nearly fills: 91 %, over the 85 % it warns at.
    let tight = usage * 110 / 100;
    memcg.set_limit(tight).unwrap();
    wait_for(10, "the agent to warn that its memory cgroup is short", || {
        agent
            .log_text()
            .contains("raise the agent's memory limit")
            .then_some(())
    });
    assert_eq!(
        metric(&agent, "graceful_memory_cgroup_limit_bytes"),
        Some(memcg.limit().unwrap() as f64)
    );

    // Room again: it says so, once.
    let roomy = usage * 4;
    memcg.set_limit(roomy).unwrap();
    wait_for(10, "the agent to see room in its memory cgroup again", || {
        agent
            .log_text()
            .contains("memory cgroup back under 85 % of its limit")
            .then_some(())
    });
    assert_eq!(
        metric(&agent, "graceful_memory_cgroup_limit_bytes"),
        Some(memcg.limit().unwrap() as f64)
    );
    let warnings = agent.log_text().matches("raise the agent's memory limit").count();
    assert_eq!(
        warnings,
        1,
        "one warning while short, not one per check: {}",
        agent.log_text()
    );

    drop(held);
}
