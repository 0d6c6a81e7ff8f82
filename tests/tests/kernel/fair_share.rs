//! One pod floods the gate: it opens as many connections as it can, some
//! asking for drains and some sending nothing, and holds them all. It gets
//! its share and is told 429 past it; another pod's drain is released on
//! its last close as usual, the agent stays small, and no caller is told
//! it has vanished.

use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    event_slack_ms,
    gate::{finish, hook, wait_draining},
    peer::{addr, Peer},
    pod::SimPod,
};

use crate::require_root;

/// A `gate-flood` tally.
#[derive(Debug)]
struct Tally {
    held: u64,
    s429: u64,
    s503: u64,
    vanished: u64,
    other: u64,
    /// How long the agent took to admit the flood (`gate-flood`'s SPAN_MS).
    span_ms: u64,
}

fn flood(peer: &mut Peer, sock: &str, n: usize, request: Option<&str>) -> Tally {
    let hex = request.map_or_else(
        || "-".to_string(),
        |r| r.bytes().map(|b| format!("{b:02x}")).collect(),
    );
    let w: Vec<u64> = peer
        .cmd(&format!("gate-flood {sock} {n} {hex}"))
        .iter()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(w[5], 0, "connections to the gate failed: {w:?}");
    Tally {
        held: w[0],
        s429: w[1],
        s503: w[2],
        vanished: w[3],
        other: w[4],
        span_ms: w[6],
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_pod_flooding_the_gate_gets_its_share_and_others_drain_as_usual() {
    require_root!();
    let mut agent = Agent::with_gate();
    // The descriptors of the smaller reproduction: 400, so the gate's
    // bound (a quarter of them) is what a flood meets.
    agent.nofile = Some(400);
    agent.start();
    let pid = agent.pid().unwrap();
    assert!(
        agent.log_text().contains("connections=100"),
        "{}",
        agent.log_text()
    );
    let sock = agent.gate_sock().display().to_string();
    let (flooder, victim) = (SimPod::create(1), SimPod::create(1));

    // Drains first: each container gets one, and every later request is
    // answered 429; then idle connections: those within its share are
    // held (until the agent's head timeout answers them 408), the rest
    // are turned away at once.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let body = format!("{{\"started_unix_ms\":{now_ms},\"max_ms\":600000,\"min_ms\":600000}}");
    let request = format!(
        "POST /v1/drain HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut peer = Peer::spawn(flooder.container(0), None);
    let drains = flood(&mut peer, &sock, 1500, Some(&request));
    assert_eq!(drains.held, 1, "one drain per container: {drains:?}");
    // The drain phase's 429s closed, their share is free again once the
    // agent has seen the closes: the idle connections fill it, and never
    // more at once. 400 of them, as many as the agent's descriptors. A
    // held one is let go at the head timeout, and its place may go to a
    // later one, so the tally counts those held at once only if the agent
    // admitted the whole flood within one head timeout; on a machine too
    // slow for that (qemu's TCG on a busy host), the flood is tried again
    // once the last one's 408 has let its place go.
    let head_ms = graceful::serve::http_conn::HEAD_TIMEOUT.as_millis() as u64;
    let mut tries = Vec::new();
    let idle = loop {
        let t = flood(&mut peer, &sock, 400, None);
        if t.span_ms < head_ms {
            break t;
        }
        tries.push(t);
        assert!(
            tries.len() < 3,
            "the agent took longer than its {head_ms} ms head timeout to admit 400 connections, \
             three times, so no tally can show the share: {tries:?}"
        );
    };
    eprintln!("flood: drains {drains:?}, idle {idle:?} (tries too slow before it: {tries:?})");
    for (t, n) in [(&drains, 1500), (&idle, 400)] {
        assert_eq!(t.vanished, 0, "a live caller was told it had vanished: {t:?}");
        assert_eq!(t.other, 0, "answers other than 200, 408, 429 or 503: {t:?}");
        assert_eq!(t.held + t.s429 + t.s503, n, "{t:?}");
    }
    assert!(
        drains.held + idle.held <= 32,
        "the pod's share is 32 connections: {drains:?} {idle:?}"
    );

    // Another pod's drain, while the flood goes on: released on its last
    // close as usual.
    let mut app = Peer::spawn(victim.container(0), None);
    let port = app.listen("127.0.0.1:0", "hold");
    let clients = Cgroup::unique("clients");
    let mut client = Peer::spawn(&clients, None);
    client.connect(&addr("127.0.0.1", port), 2);
    let child = hook(
        &agent,
        victim.container(0),
        &["--min", "0s", "--settle", "100ms", "--max", "20s"],
    );
    wait_draining(&agent, 2);
    let during = flood(&mut peer, &sock, 1500, Some(&request));
    assert_eq!(
        (during.held, during.vanished, during.other),
        (0, 0, 0),
        "{during:?}"
    );
    client.cmd("close-out 2 fin");
    app.cmd("close-in 2 fin");
    let (report, out) = finish(child);
    assert_eq!(report["reason"], "drained", "{out}");
    assert_eq!(report["pod"], victim.uid.as_str());
    let after = report["after_last_close_ms"].as_u64().unwrap();
    assert!(
        (100..=100 + event_slack_ms()).contains(&after),
        "released {after} ms after the last close (settle 100 ms) under the flood: {out}"
    );
    assert!(!out.contains("busy"), "the other pod was turned away: {out}");

    let rss = rss_kib(pid);
    eprintln!("agent RSS under the flood: {} KiB", rss);
    assert!(rss < 128 * 1024, "agent RSS {rss} KiB under the flood");
    let log = agent.log_text();
    assert!(
        !log.contains("vanished") && !log.contains("Too many open files"),
        "{log}"
    );

    // The flooding pod's own hook meets its held drain: told 429, it asks
    // again, backing off, rather than failing open; once the flood lets
    // go (its drain abandoned, its share given back), it drains.
    let own = hook(
        &agent,
        flooder.container(0),
        &["--min", "0s", "--settle", "0s", "--max", "15s"],
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    peer.cmd("gate-release");
    let (report, out) = finish(own);
    assert_eq!(report["reason"], "drained", "{out}");
    assert!(
        out.contains("agent busy (HTTP 429)") && out.contains("retrying"),
        "{out}"
    );
    assert!(!out.contains("failing open"), "{out}");
    wait_draining(&agent, 0);
    // Its share is back; its pace (the flood spent its burst) gives it
    // one more start each `pace::EVERY`, and its own hook took the last.
    std::thread::sleep(graceful::drain::hook::pace::EVERY + std::time::Duration::from_millis(200));
    let again = flood(&mut peer, &sock, 1, Some(&request));
    assert_eq!(again.held, 1, "the pod's share was not given back: {again:?}");
}

#[test]
fn a_peer_flooding_the_local_api_gets_its_share_and_the_probes_still_answer() {
    use std::io::{Read as _, Write as _};
    require_root!();
    let agent = Agent::started();
    let api = agent.api_addr();
    // Idle connections from one peer address, held.
    let mut held = Vec::new();
    for _ in 0..200 {
        held.push(std::net::TcpStream::connect(api).unwrap());
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    let (mut kept, mut refused) = (0, 0);
    for s in &mut held {
        s.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 512];
        match s.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => kept += 1,
            Ok(n) => {
                let text = String::from_utf8_lossy(&buf[..n]);
                assert!(text.starts_with("HTTP/1.1 429"), "{text}");
                assert!(text.contains("already holds 32 connections"), "{text}");
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((kept, refused), (32, 168));
    // The unix socket (the CLI's) answers all the same.
    assert_eq!(
        graceful_tests::unix_http::status(&agent.api_sock(), "/healthz"),
        Some(200)
    );
    drop(held);
    // Its share given back (once the agent has seen the closes), the same
    // peer is served again.
    graceful_tests::wait_for(10, "the peer's share to be given back", || {
        let mut s = std::net::TcpStream::connect(api).ok()?;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        out.starts_with("HTTP/1.1 200").then_some(())
    });
}
