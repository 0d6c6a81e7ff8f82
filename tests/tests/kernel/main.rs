//! Integration tests on the real kernel: the real agent, real cgroups,
//! network namespaces and TCP connections, checked against `ss`.
//! They need root; `cargo xtask test` runs them.

mod api;
mod bad_env;
mod churn;
mod command_line;
mod counters_full;
mod counts;
mod crafted_cgroup;
mod doctor_env;
mod drain_engine;
mod drain_start;
mod error_lines;
mod exclusions;
mod exits;
mod fair_share;
mod floor;
mod full_disk;
mod gate;
mod gate_scopes;
mod gate_settings;
mod gate_squatter;
mod gc;
mod handover;
mod health;
mod http_gate;
mod http_gate_callers;
mod keeper;
mod kube_terminating;
mod kube_watch;
mod memory_budget;
mod mesh;
mod nested;
mod one_agent;
mod oom_group;
mod padded_hook;
mod pods;
mod preexisting;
mod reinstall;
mod repair;
mod restart;
mod rollout;
mod socket_gate;
mod upgrade;

use std::{
    process::Child,
    thread::{JoinHandle, Scope, ScopedJoinHandle},
    time::Duration,
};

use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    event_slack_ms,
    gate::{assert_carried_on, engaged, finish, finish_engaged, hook, wait_draining},
    http_hook::{get, Answer, Scene, PORT},
    netns::NetNs,
    oracle,
    peer::Peer,
    pod::SimPod,
};
use serde_json::{json, Value};

/// Kernel tests run one at a time. Each loads its own agent and programs,
/// and several drive heavy TCP churn: side by side they slow each other
/// past the agents' timers (a garbage collection in the middle of a churn)
/// and blur what a failure means.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Skips (loudly) when not root: these tests load eBPF programs. Holds
/// [`SERIAL`] for the rest of the test.
#[macro_export]
macro_rules! require_root {
    () => {
        if !graceful_tests::is_root() {
            eprintln!(
                "SKIPPED {}: needs root (run `cargo xtask test` as root)",
                module_path!()
            );
            return;
        }
        let _serial = $crate::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    };
}

/// Waits until the agent's counts for every cgroup equal the kernel's view
/// (summed over the given namespaces), then returns them. Connections
/// finish their handshakes and closes asynchronously, so equality is awaited
/// (10 s at most), then asserted.
pub fn settle(agent: &Agent, cgroups: &[&Cgroup], namespaces: &[Option<&NetNs>]) -> Vec<oracle::View> {
    let mut last = String::new();
    let mut off = Vec::new();
    for _ in 0..500 {
        let mut ok = true;
        let mut views = Vec::new();
        last.clear();
        off.clear();
        for cg in cgroups {
            let want = namespaces.iter().fold(oracle::View::default(), |acc, ns| {
                acc + oracle::view(*ns, cg.path())
            });
            let c = agent.counters(cg.id());
            let got = oracle::View {
                inbound_live: c.inbound_live,
                outbound_live: c.outbound_live,
                listeners: c.listeners,
            };
            if got != want {
                ok = false;
                last.push_str(&format!("\n  {}: agent {:?} kernel {:?}", cg.path(), got, want));
                off.push(cg.path());
            }
            views.push(want);
        }
        if ok {
            return views;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Every socket of the cgroups that disagree, in every state: which
    // one the agent still counts (or never counted) is the cause to find.
    let mut sockets = String::new();
    for path in off {
        for ns in namespaces {
            let lines = oracle::sockets(*ns, path);
            let n = lines.lines().count();
            sockets.push_str(&format!("  {path} ({n} sockets, the first 40):\n"));
            for l in lines.lines().take(40) {
                sockets.push_str(&format!("    {l}\n"));
            }
        }
    }
    panic!(
        "agent counts never matched the kernel's:{last}\ntheir sockets, as ss sees them:\n{sockets}the programs' own figures:\n{}\nagent log:\n{}",
        kernel_figures(agent),
        agent.log_text()
    );
}

/// `graceful_repaired_sockets_total` of the agent's `/metrics`: counts its
/// repair passes set right (see `repair.rs`).
pub fn repaired_sockets(agent: &Agent) -> u64 {
    let figures = kernel_figures(agent);
    figures
        .lines()
        .find_map(|l| l.trim().strip_prefix("graceful_repaired_sockets_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no graceful_repaired_sockets_total in the metrics:\n{figures}"))
}

/// One unlabelled figure of the agent's `/metrics` (`graceful_http_gates`).
pub fn metric(agent: &Agent, name: &str) -> u64 {
    let s = std::os::unix::net::UnixStream::connect(agent.api_sock()).expect("the agent's API");
    let mut r =
        graceful_api::client::get(s, "/metrics", Some(std::time::Duration::from_secs(5))).expect("/metrics");
    let prefix = format!("{name} ");
    while let Ok(Some(l)) = r.next_line() {
        if let Some(v) = l.strip_prefix(&prefix) {
            return v.trim().parse().unwrap_or_else(|e| panic!("{l}: {e}"));
        }
    }
    panic!("no {name} in the agent's /metrics")
}

/// The kernel programs' counters (storage failures, untracked sockets,
/// underflows, lost events...) from the agent's `/metrics`, for a failure
/// message: they tell a miscount's cause.
pub fn kernel_figures(agent: &Agent) -> String {
    let Ok(s) = std::os::unix::net::UnixStream::connect(agent.api_sock()) else {
        return "(the agent's API is not answering)".into();
    };
    let Ok(mut r) = graceful_api::client::get(s, "/metrics", Some(std::time::Duration::from_secs(5))) else {
        return "(no answer from /metrics)".into();
    };
    let mut out = String::new();
    while let Ok(Some(l)) = r.next_line() {
        if l.starts_with("graceful_kernel")
            || l.starts_with("graceful_adopted")
            || l.starts_with("graceful_repaired")
            || l.starts_with("graceful_map_entries")
        {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out
}

/// A gate hook's arguments for a drain held until its last close: a
/// 100 ms settle, 30 s at most.
pub const HELD: [&str; 6] = ["--min", "0s", "--settle", "100ms", "--max", "30s"];

/// An exec hook asking `agent` to drain `pod`'s first container with
/// [`HELD`], returned once the drain is engaged (with its stdout's reader).
pub fn held_hook(agent: &Agent, pod: &SimPod) -> (Child, JoinHandle<String>) {
    let mut child = hook(agent, pod.container(0), &HELD);
    let stdout = engaged(&mut child);
    (child, stdout)
}

/// After a change of agent: `agent`, the one serving now, holds the drain,
/// and the exec hook `child` still waits on it.
pub fn still_held(agent: &Agent, child: &mut Child) {
    wait_draining(agent, 1);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the hook ended with its agent"
    );
}

/// The exec hook held across a change of agent, once its clients closed:
/// drained, its report carrying on what the earlier agent saw (`seen`),
/// and never reconnected. Its report and output.
pub fn released_across(child: Child, stdout: JoinHandle<String>, seen: &[u64]) -> (Value, String) {
    let (report, out) = finish_engaged(child, stdout);
    assert_eq!(report["reason"], "drained", "{out}");
    assert_carried_on(&report, seen);
    assert!(!out.contains("reconnecting"), "the hook reconnected: {out}");
    (report, out)
}

/// A hook released 100 ms (its settle) after the last close, give or take
/// the event slack; `out` is what a failure shows.
pub fn assert_settled(report: &Value, out: &str) {
    let after = report["after_last_close_ms"].as_u64().unwrap();
    assert!(
        (100..=100 + event_slack_ms()).contains(&after),
        "released {after} ms after the last close (settle 100 ms): {out}"
    );
}

/// The exec hook [`held_hook`] holds on `pod`, whose app had 4
/// connections from `lb` and closed one, after a change of agent: `agent`,
/// the one serving now, counts the 3 left and holds the drain; once they
/// close, the hook is released as [`released_across`] says, its settle
/// after the last close; and a new hook is `agent`'s, through the gate it
/// took over.
pub fn carried_over(
    agent: &Agent,
    pod: &SimPod,
    lb: &Cgroup,
    app: &mut Peer,
    mut child: Child,
    stdout: JoinHandle<String>,
) {
    let views = settle(agent, &[pod.container(0), lb], &[None]);
    assert_eq!(views[0].inbound_live, 3, "{views:?}");
    still_held(agent, &mut child);
    app.cmd("close-in 3 fin");
    let (report, out) = released_across(child, stdout, &[4, 3]);
    assert_settled(&report, &out);
    drains(hook(agent, pod.container(0), &["--min", "0s", "--max", "10s"]));
}

/// Mid-drain, `agent` is killed with SIGKILL; `app` closes 3 of its
/// connections while no agent runs; 300 ms on, the agent starts again.
pub fn restarted_after_closes(agent: &mut Agent, app: &mut Peer) {
    agent.kill9();
    app.cmd("close-in 3 fin");
    std::thread::sleep(Duration::from_millis(300));
    agent.start();
}

/// A new hook (`child`, with nothing to wait for) is drained.
pub fn drains(child: Child) {
    let (report, out) = finish(child);
    assert_eq!(report["reason"], "drained", "{out}");
}

/// A kubelet's httpGet hook on the scene's pod gate, held until its last
/// close (a 100 ms settle, 30 s at most), asked from the node's side once
/// `clients` hold their 3 connections; returned once the agent holds the
/// drain and one of them closed (200 ms before).
pub fn held_http_hook<'scope>(
    t: &'scope Scope<'scope, '_>,
    s: &'scope Scene,
    clients: &mut Peer,
) -> ScopedJoinHandle<'scope, std::io::Result<Answer>> {
    let (node, gate) = (&s.net.a, s.gate());
    let hook = t.spawn(move || {
        get(
            node,
            gate,
            "/drain?policy=drained&settle=100ms&min=0s&max=30s",
            Duration::from_secs(40),
        )
    });
    wait_draining(&s.agent, 1);
    clients.cmd("close-out 1 fin");
    std::thread::sleep(Duration::from_millis(200));
    hook
}

/// After a change of agent: `agent`, the one serving now, holds the drain,
/// and the httpGet hook waits unanswered on its one connection (the
/// kubelet's, never closed or answered twice); then `clients` close their
/// last 2 connections. When they did.
pub fn http_still_held(
    agent: &Agent,
    pod: &NetNs,
    hook: &ScopedJoinHandle<'_, std::io::Result<Answer>>,
    clients: &mut Peer,
) -> u64 {
    wait_draining(agent, 1);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !hook.is_finished(),
        "the hook was answered (or cut) before its clients closed"
    );
    let hook_conns = pod.exec(
        "ss",
        &["-Htn", "state", "established", &format!("sport = :{PORT}")],
    );
    assert_eq!(hook_conns.lines().count(), 1, "{hook_conns}");
    clients.cmd("close-out 2 fin");
    graceful_tests::monotonic_ns()
}

/// The httpGet hook held across a change of agent, answered once: drained,
/// carrying on 3 then 2 connections, within 100 ms (its settle) and the
/// slack of the last close (at `closed_ns`); and the pod's gate, served by
/// `agent` from the listener it took, answers a new hook.
pub fn http_answered_once(s: &Scene, agent: &Agent, answer: Answer, closed_ns: u64) {
    assert_eq!(answer.status, 200, "{answer:?}");
    let report = answer.json();
    assert_eq!(report["reason"], "drained", "{report}");
    assert_carried_on(&report, &[3, 2]);
    let answered_ms = (graceful_tests::monotonic_ns() - closed_ns) / 1_000_000;
    assert!(
        answered_ms <= 100 + 2 * event_slack_ms(),
        "answered {answered_ms} ms after the last close"
    );
    let again = get(
        &s.net.a,
        s.gate(),
        "/drain?policy=drained&min=0s&max=10s",
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(
        (again.status, again.json()["reason"].clone()),
        (200, json!("drained"))
    );
    assert!(
        agent.log_text().contains("serving the listener handed over"),
        "{}",
        agent.log_text()
    );
}
