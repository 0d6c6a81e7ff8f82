//! The drain gate end to end: the agent places graceful-wait and its socket
//! in a host directory; a simulated pod (kubelet-layout cgroups, its own
//! network namespace, a real server) runs the hook; real clients keep
//! coming while "the load balancer hasn't heard yet".

use std::{
    io::{Read, Write},
    os::unix::net::UnixStream,
    process::Command,
    time::{Duration, Instant},
};

use graceful_tests::monotonic_ns;
use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    event_slack_ms,
    gate::{engaged, finish, finish_engaged, hook, pod_holding, wait_draining},
    netns::VethPair,
    peer::{addr, Peer},
    pod::SimPod,
};
use serde_json::Value;

use crate::{require_root, restarted_after_closes};

#[test]
fn released_on_the_last_close_after_endpoint_propagation() {
    require_root!();
    let agent = Agent::started_with_gate();
    let pod = SimPod::create(1);
    let net = VethPair::create();
    let lb = Cgroup::unique("lb");
    let mut app = Peer::spawn(pod.container(0), Some(&net.b));
    let port = app.listen("0.0.0.0:0", "echo-close");

    // The hook starts; the load balancer keeps sending new requests for
    // P = 1.5 s (it hasn't heard of the termination), each taking R = 200 ms.
    // The client process first: starting one can take longer than a drain
    // with nothing to wait for (under qemu), and --min covers the rest.
    let mut client = Peer::spawn(&lb, Some(&net.a));
    let child = hook(
        &agent,
        pod.container(0),
        &["--min", "1s", "--settle", "100ms", "--max", "20s"],
    );
    wait_draining(&agent, 1);
    let words = client.cmd(&format!("traffic {} 1500 200 4", addr(&net.b_v4, port)));
    let (done, failed): (u64, u64) = (words[0].parse().unwrap(), words[1].parse().unwrap());
    let last_fin_ns: u64 = words[2].parse().unwrap();
    let (report, out) = finish(child);

    assert_eq!(failed, 0, "requests failed during the drain");
    assert!(done > 10, "only {done} requests");
    assert_eq!(report["reason"], "drained", "{out}");
    // Released after the traffic stopped: the last request closed after
    // its FIN, and the drain settles 100 ms after that close. Both times
    // are the kernel's CLOCK_MONOTONIC, so a test process that learns of
    // the traffic's end late (a busy machine, a guest under TCG) cannot
    // make this fail.
    let release_ns = report["release_ns"].as_u64().unwrap();
    assert!(
        release_ns >= last_fin_ns + 100_000_000,
        "released {} ms after the last request's FIN (settle 100 ms): {out}",
        (release_ns as i128 - last_fin_ns as i128) / 1_000_000
    );
    let after = report["after_last_close_ms"].as_u64().unwrap();
    assert!(
        (100..=100 + event_slack_ms()).contains(&after),
        "released {after} ms after the last close (settle 100 ms): {out}"
    );
    assert_eq!(report["pod"], pod.uid.as_str());
    assert!(report["peak_inbound"].as_u64().unwrap() >= 1);
    assert!(report["new_connections"].as_u64().unwrap() >= done - 4);
    assert!(
        out.contains("inbound connection(s) at"),
        "no progress lines: {out}"
    );
    eprintln!("propagation: {done} requests, 0 failed, released {after} ms after the last close");
}

#[test]
fn quiet_releases_idle_keepalives_and_drained_hits_the_deadline() {
    require_root!();
    let agent = Agent::started_with_gate();
    let (pod, _lb, _app, mut pool) = pod_holding(20);

    let mut child = hook(
        &agent,
        pod.container(0),
        &[
            "--policy", "quiet", "--quiet", "800ms", "--min", "0s", "--max", "10s",
        ],
    );
    // Requests over the pool keep it busy, each well within the quiet
    // window of the one before; then it goes idle. They start once the
    // drain is engaged, however slowly the hook started (qemu): the first
    // at once, then every 150 ms, past one window after the start.
    let stdout = engaged(&mut child);
    let mut last_sent = 0;
    for i in 0..7 {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(150));
        }
        last_sent = monotonic_ns();
        pool.cmd("send-out 3 512");
    }
    let last_payload = monotonic_ns();
    let (report, out) = finish_engaged(child, stdout);
    assert_eq!(report["reason"], "quiet", "{out}");
    assert_eq!(report["inbound_at_release"], 20);
    // The payload held the drain past the window after its start...
    let start = report["start_ns"].as_u64().unwrap();
    assert!(last_sent >= start + 800_000_000, "the test's own timing: {out}");
    // ...and it was released not before the window after the last payload
    // had passed; and on its end, not at a poll or the deadline.
    let release = report["release_ns"].as_u64().unwrap();
    let after_ms = release.saturating_sub(last_payload) / 1_000_000;
    assert!(
        release >= last_sent + 800_000_000 && after_ms <= 800 + event_slack_ms(),
        "quiet released {after_ms} ms after the last payload (window 800 ms): {out}"
    );

    let child = hook(
        &agent,
        pod.container(0),
        &["--policy", "drained", "--min", "0s", "--max", "600ms"],
    );
    let (report, out) = finish(child);
    assert_eq!(report["reason"], "deadline", "{out}");
    assert_eq!(report["inbound_at_release"], 20);
}

#[test]
fn the_client_fails_open_without_an_agent() {
    require_root!();
    let agent = Agent::with_gate();
    // Never started: no socket. Use the built binary directly.
    let bin = graceful_tests::agent::graceful_bin().with_file_name("graceful-wait");
    let started = Instant::now();
    let out = Command::new(bin)
        .args([
            "--socket",
            &agent.gate_sock().display().to_string(),
            "--connect-timeout",
            "300ms",
            "--fallback-sleep",
            "200ms",
        ])
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(report["reason"], "agent-unreachable");
    assert!(
        elapsed >= Duration::from_millis(500) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
}

#[test]
fn a_drain_survives_kill_9_of_the_agent() {
    require_root!();
    let mut agent = Agent::started_with_gate();
    let (pod, _lb, mut app, _client) = pod_holding(3);

    let started = Instant::now();
    let mut child = hook(
        &agent,
        pod.container(0),
        &["--min", "0s", "--settle", "100ms", "--max", "20s"],
    );
    // Killed mid-drain: once the drain is engaged, however slowly the hook
    // started (qemu).
    let stdout = engaged(&mut child);
    restarted_after_closes(&mut agent, &mut app);
    let (report, out) = finish_engaged(child, stdout);
    assert_eq!(report["reason"], "drained", "{out}");
    assert!(out.contains("reconnecting"), "{out}");
    // The drain kept its original start.
    let waited = report["waited_ms"].as_u64().unwrap();
    assert!(
        waited + 50 >= started.elapsed().as_millis() as u64 - 200,
        "waited {waited} ms: {out}"
    );
}

/// Raw HTTP on the gate socket, from the test process (in no pod).
fn raw(agent: &Agent, request: &[u8]) -> String {
    graceful_tests::unix_http::exchange(&agent.gate_sock(), request).expect("the gate accepts")
}

#[test]
fn callers_outside_pods_are_refused_and_bad_requests_get_4xx() {
    require_root!();
    let agent = Agent::started_with_gate();
    // The test process is in no pod: refused, whatever it asks.
    let out = raw(
        &agent,
        b"GET /v1/self HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("is not in a Kubernetes pod"), "{out}");
    let out = raw(&agent, b"this is not http\r\n\r\n");
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
}

#[test]
fn a_pod_sees_only_itself_and_bad_requests_get_clear_4xx_while_drains_go_on() {
    require_root!();
    let agent = Agent::started_with_gate();
    let (pod_a, pod_b) = (SimPod::create(1), SimPod::create(1));
    let mut app_b = Peer::spawn(pod_b.container(0), None);
    let port = app_b.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(pod_a.container(0), None);
    client.connect(&addr("127.0.0.1", port), 2);

    // A drain in pod B goes on while pod A's process sends garbage.
    let drain_b = hook(
        &agent,
        pod_b.container(0),
        &["--min", "0s", "--settle", "100ms", "--max", "10s"],
    );

    // From inside pod A: /v1/self is pod A, with pod A's counts only.
    let mut asker = Peer::spawn(pod_a.container(0), None);
    let sock = agent.gate_sock().display().to_string();
    let mut ask = |req: &str| -> String {
        let hex: String = req.bytes().map(|b| format!("{b:02x}")).collect();
        let words = asker.cmd(&format!("gate {sock} {hex}"));
        let raw = words.first().cloned().unwrap_or_default();
        let bytes: Vec<u8> = (0..raw.len() / 2)
            .map(|i| u8::from_str_radix(&raw[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let me = ask("GET /v1/self HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(me.starts_with("HTTP/1.1 200"), "{me}");
    assert!(me.contains(&pod_a.uid) && !me.contains(&pod_b.uid), "{me}");
    assert!(
        me.contains("\"outbound_live\":2") && me.contains("\"inbound_live\":0"),
        "{me}"
    );

    let cases = [
        ("GET /v1/pods HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "404"),
        ("DELETE /v1/drain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "405"),
        ("POST /v1/drain HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\nConnection: close\r\n\r\n{not json", "400"),
        (
            "POST /v1/drain HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\nConnection: close\r\n\r\n{\"policy\":\"x\"}",
            "400",
        ),
        ("GARBAGE\r\n\r\n", "400"),
    ];
    for (req, status) in cases {
        let out = ask(req);
        assert!(out.starts_with(&format!("HTTP/1.1 {status}")), "{req:?} → {out}");
    }
    // A body over 64 KiB.
    let big = format!(
        "POST /v1/drain HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\nConnection: close\r\n\r\n{}",
        "x".repeat(70000)
    );
    let out = ask(&big);
    assert!(out.starts_with("HTTP/1.1 413"), "{}", &out[..out.len().min(200)]);
    assert!(out.contains("over 65536 bytes"), "{out}");

    // Slowloris: a client that sends half its headers and stalls is cut off;
    // meanwhile pod B's drain is released as soon as its traffic is gone.
    let slow = std::thread::spawn({
        let sock = agent.gate_sock();
        move || {
            let mut s = UnixStream::connect(sock).unwrap();
            s.write_all(b"POST /v1/drain HTTP/1.1\r\nHost: x\r\n").unwrap();
            let started = Instant::now();
            let mut out = String::new();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let _ = s.read_to_string(&mut out);
            (started.elapsed(), out)
        }
    });
    client.cmd("close-out 2 fin");
    app_b.cmd("close-in 2 fin");
    let (report, out) = finish(drain_b);
    assert_eq!(report["reason"], "drained", "{out}");
    assert_eq!(report["pod"], pod_b.uid.as_str());
    let (took, out) = slow.join().unwrap();
    assert!(
        took < Duration::from_secs(8),
        "a stalled client was kept {took:?}"
    );
    // Told why, in one JSON line, before the close.
    assert!(out.starts_with("HTTP/1.1 408"), "{out}");
    let body: Value = serde_json::from_str(out.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("request head not received"),
        "{out}"
    );
}
