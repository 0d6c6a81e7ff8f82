//! The drain gate's hook as a child process: `graceful-wait` (the copy the
//! agent placed in its gate directory) started inside a pod's cgroup, the
//! drain it asks for awaited, and its report read back. The kernel tests
//! of the gate and the release-latency bench both drive it.

use std::{
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::Value;

use crate::{
    agent::Agent,
    cgroup::Cgroup,
    netns::NetNs,
    peer::{held_connections, place, Peer},
    pod::SimPod,
};

/// Starts `graceful-wait` (the copy the agent placed in its gate dir) in `cg`.
pub fn hook(agent: &Agent, cg: &Cgroup, args: &[&str]) -> Child {
    hook_at(agent, cg, None, &agent.gate_sock().display().to_string(), args)
}

/// A pod of one container whose app holds `n` connections from a load
/// balancer's cgroup (`lb`), all accepted: what a gate test's drain waits
/// on. The pod, `lb`, the app and the clients.
pub fn pod_holding(n: usize) -> (SimPod, Cgroup, Peer, Peer) {
    let pod = SimPod::create(1);
    let lb = Cgroup::unique("lb");
    let (app, clients) = held_connections(pod.container(0), &lb, n);
    (pod, lb, app, clients)
}

/// The socket gate's address, as a pod's hook names it.
pub fn pod_socket() -> String {
    format!("@{}", graceful_api::POD_SOCKET)
}

/// Starts `graceful-wait` in `cg`, inside `ns` if given, asking the gate
/// at `socket` (a path, or `@name` for an abstract socket).
pub fn hook_at(agent: &Agent, cg: &Cgroup, ns: Option<&NetNs>, socket: &str, args: &[&str]) -> Child {
    let bin = agent.gate_dir.as_ref().unwrap().join("graceful-wait");
    let mut cmd = Command::new(&bin);
    cmd.args(args)
        .arg("--socket")
        .arg(socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    place(&mut cmd, cg, ns);
    cmd.spawn().unwrap_or_else(|e| panic!("{}: {e}", bin.display()))
}

/// A hook in the cgroup `cg` (a pod's container's) that posts to the gate
/// at `socket` a valid drain request padded with spaces to `size` bytes,
/// as a pod's own process could (JSON takes any amount of whitespace), and
/// prints each line of the answer (the peer's `padded-hook`, started in
/// the cgroup).
pub fn padded_hook(socket: &std::path::Path, cg: &std::path::Path, size: usize) -> Child {
    let mut cmd = Command::new(crate::peer::peer_bin());
    cmd.arg("padded-hook")
        .arg(socket)
        .arg(size.to_string())
        .stdout(Stdio::piped());
    crate::cgroup::start_in(&mut cmd, cg);
    cmd.spawn().expect("graceful-peer")
}

/// Waits until the agent's socket gate is bound in the pod's namespace `ns`.
pub fn wait_socket_gate(ns: &NetNs) {
    crate::wait_for(10, "the socket gate in the pod's namespace", || {
        abstract_listening(ns, &pod_socket()).then_some(())
    });
}

/// Whether an abstract unix socket named `name` (with its `@`) listens in
/// `ns`, as `ss` sees it.
pub fn abstract_listening(ns: &NetNs, name: &str) -> bool {
    ns.exec("ss", &["-Hxl"]).split_whitespace().any(|w| w == name)
}

/// Waits until the agent holds `n` drains (asking its local API), each
/// past its first look at the count, so what a test does next happens
/// during them, however slowly the hook started.
pub fn wait_draining(agent: &Agent, n: usize) {
    crate::wait_for(30, "the drain to start", || {
        let out = crate::agent::graceful(&agent.pin_dir, &["drains", "-o", "json"]);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let active = v["active"].as_array()?;
        // Listed comes before the first look (a walk of the pod's sockets
        // comes between): a close before it would be no change of the drain's.
        (active.len() == n && active.iter().all(|d| d["inbound"].is_u64())).then_some(())
    });
}

/// Waits until the hook prints its first progress line, which the agent
/// sends once the drain is engaged (for `quiet`, once it watches payload).
/// Reading the hook's own output adds no latency, where asking the agent's
/// API costs a process start (seconds under qemu). The rest of the output
/// comes with [`finish_engaged`].
pub fn engaged(child: &mut Child) -> std::thread::JoinHandle<String> {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains("inbound connection(s) at") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the hook printed no progress line within 30 s");
    reader
}

/// [`finish`] for a hook whose stdout [`engaged`] took.
pub fn finish_engaged(child: Child, stdout: std::thread::JoinHandle<String>) -> (Value, String) {
    let out = child.wait_with_output().unwrap();
    let stdout = stdout.join().unwrap();
    report_of(out.status, stdout, &out.stderr)
}

/// Waits for the hook; returns its report (its last stdout line) and its output.
pub fn finish(child: Child) -> (Value, String) {
    let out = child.wait_with_output().unwrap();
    report_of(
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        &out.stderr,
    )
}

fn report_of(status: std::process::ExitStatus, stdout: String, stderr: &[u8]) -> (Value, String) {
    let stderr = String::from_utf8_lossy(stderr);
    assert!(status.success(), "graceful-wait failed: {stdout}{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    let report: Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("last line {last:?} is not JSON: {e}\n{stderr}"));
    (report, format!("{stdout}{stderr}"))
}

/// A report that carries on what an earlier agent saw of its drain: the
/// count at the start, the peak, and the timeline's first counts in
/// `seen` order, ending at 0.
pub fn assert_carried_on(report: &Value, seen: &[u64]) {
    let counts: Vec<u64> = report["timeline"]
        .as_array()
        .unwrap_or_else(|| panic!("no timeline: {report}"))
        .iter()
        .map(|p| p["inbound"].as_u64().unwrap())
        .collect();
    assert!(
        counts.starts_with(seen) && counts.last() == Some(&0),
        "timeline {counts:?}, wanted it to start {seen:?} and end at 0: {report}"
    );
    assert_eq!(report["inbound_at_start"], seen[0], "{report}");
    assert_eq!(report["peak_inbound"], *seen.iter().max().unwrap(), "{report}");
    let first_ms = report["timeline"][0]["ms"].as_u64().unwrap();
    assert!(
        first_ms < 100,
        "the timeline starts {first_ms} ms into the drain: {report}"
    );
}
