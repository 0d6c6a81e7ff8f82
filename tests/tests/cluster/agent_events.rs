//! The node's agent comes and goes in the middle of ten drains (five
//! through the exec gate, five through the httpGet gate, each pod's three
//! clients staying connected 20 to 29 s after its deletion), three ways in
//! turn: a rolling update of the DaemonSet to a new image tag (handover),
//! `kill -9` of the agent process (the keeper), and a plain delete of the
//! agent's pod with no successor. Per pod: its SIGTERM against its own
//! last close, and the kubelet's `FailedPreStopHook`; the agent's counts
//! against `ss` in each pod's namespace once the agent is back. Printed as
//! one table.
//!
//! The first two cut nothing: every SIGTERM comes after its pod's own last
//! close, plus the 200 ms settle. A plain delete keeps today's documented
//! behaviour: exec hooks reconnect to the next agent and keep their start;
//! httpGet hooks are held for `--stop-hold` (20 s), then fail open.

use std::time::{Duration, Instant};

use graceful_tests::{
    cluster::{clients::Clients, pod::Pod, Cluster, Namespace, AGENT_IMAGE, AGENT_NAMESPACE},
    monotonic_ns, oracle,
};

use crate::{
    crash::kill_the_agent,
    gate::{events_by, sigterm_ns, wait_drain_engaged},
    http_gate::{http_pod, wait_gate},
};

/// Five pods a gate: enough that the agent's event falls on drains of both
/// gates at once, each held by a pod of its own and released by its own
/// last close, at different times. Ten a gate (twenty drains) took 362 s
/// of CI's node tests and showed nothing five do not: one drain across
/// each event is the kernel tests' (`handover`, `keeper`, `restart`), and
/// a thousand held hooks across a handover is `cargo xtask bench handover`.
const PER_GATE: usize = 5;
/// SIGTERM within this of the last close counts as "after its own last
/// close, plus settle" (settle 200 ms; ten pods end within seconds of
/// each other on one kubelet).
const SLACK_MS: f64 = 1500.0;
/// The agent's `--stop-hold`, as `deploy/base` runs it.
const STOP_HOLD_S: f64 = 20.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    Rollout,
    Kill9,
    Delete,
}

impl Event {
    fn name(self) -> &'static str {
        match self {
            Event::Rollout => "rolling update",
            Event::Kill9 => "kill -9",
            Event::Delete => "pod deleted",
        }
    }
}

/// What became of one pod.
struct Fate {
    exec: bool,
    /// SIGTERM minus the last close, ms (negative: before it).
    after_ms: f64,
    /// SIGTERM after the agent's event, s.
    since_event_s: f64,
    failed_hook: bool,
}

/// One round's row.
struct Row {
    event: Event,
    fates: Vec<Fate>,
    counts_match: usize,
    counted: usize,
}

impl Row {
    fn held(&self, exec: bool) -> usize {
        self.fates
            .iter()
            .filter(|f| f.exec == exec && f.after_ms >= 200.0 && f.after_ms < 200.0 + SLACK_MS)
            .count()
    }

    fn failed(&self, exec: bool) -> usize {
        self.fates
            .iter()
            .filter(|f| f.exec == exec && f.failed_hook)
            .count()
    }

    fn early(&self, exec: bool) -> usize {
        self.fates
            .iter()
            .filter(|f| f.exec == exec && f.after_ms < 200.0)
            .count()
    }

    fn print(&self) {
        let worst = |exec: bool| {
            self.fates
                .iter()
                .filter(|f| f.exec == exec)
                .map(|f| f.after_ms)
                .fold(f64::NEG_INFINITY, f64::max)
        };
        eprintln!(
            "{:<15} {:>2}/{PER_GATE} held (latest {:>6.0} ms) {:>2} early {:>2} FailedPreStopHook | {:>2}/{PER_GATE} held (latest {:>6.0} ms) {:>2} early {:>2} FailedPreStopHook | counts = ss {}/{}",
            self.event.name(),
            self.held(true),
            worst(true),
            self.early(true),
            self.failed(true),
            self.held(false),
            worst(false),
            self.early(false),
            self.failed(false),
            self.counts_match,
            self.counted,
        );
    }
}

/// A live pod of the round, its clients, its app's log.
struct Held {
    pod: Pod,
    exec: bool,
    clients: Clients,
    log: graceful_tests::cluster::pod::Log,
}

fn round(cluster: &Cluster, event: Event) -> Row {
    let ns = Namespace::create(
        cluster,
        &format!("events-{}", event.name().replace(' ', "-").replace("-9", "9")),
    );
    let hook = [
        "--policy", "drained", "--settle", "200ms", "--min", "0s", "--max", "120s",
    ];
    for i in 0..PER_GATE {
        ns.apply(&crate::app_pod(&format!("exec-{i}"), Some(&hook), 150));
        ns.apply(&http_pod(
            &format!("http-{i}"),
            "policy=drained&settle=200ms&min=0s&max=120s",
            150,
        ));
    }
    let mut held: Vec<Held> = Vec::new();
    for i in 0..PER_GATE {
        for exec in [true, false] {
            let name = format!("{}-{i}", if exec { "exec" } else { "http" });
            let pod = Pod::wait_ready(&ns, &format!("app={name}"), 1, 120).remove(0);
            if !exec {
                wait_gate(cluster, &pod);
            }
            let clients = Clients::open(cluster, format!("{}:8080", pod.ip).parse().unwrap(), 3);
            let log = pod.open_log("app");
            held.push(Held {
                pod,
                exec,
                clients,
                log,
            });
        }
    }
    let names: Vec<String> = held.iter().map(|h| h.pod.name.clone()).collect();
    let mut args = vec!["delete", "pod", "--wait=false"];
    args.extend(names.iter().map(String::as_str));
    ns.kubectl(&args);
    let deleted = Instant::now();
    for h in &held {
        wait_drain_engaged(cluster, &h.pod.uid, 30);
    }

    let event_ns = monotonic_ns();
    match event {
        Event::Rollout => {
            let next = format!("{AGENT_IMAGE}-next");
            cluster.images(&["tag", "--force", AGENT_IMAGE, &next]);
            cluster.roll_agent_to(&next);
        }
        Event::Kill9 => {
            let (_, line) = kill_the_agent(cluster, &cluster.agent_pod(10));
            eprintln!("{line}");
        }
        Event::Delete => {
            let old = cluster.agent_pod(10);
            cluster.kubectl(&["-n", AGENT_NAMESPACE, "delete", "pod", &old, "--wait=false"]);
        }
    }

    // The counts, against the kernel's, while every client is connected
    // (after a delete, once an agent runs again).
    cluster.agent_pod(120);
    let mut counts_match = 0;
    for h in &held {
        let kernel = oracle::view(Some(&h.pod.netns()), &h.pod.container_cgroup("app"));
        let agrees = graceful_tests::cluster::poll(Duration::from_secs(10), || {
            let out = cluster.agent(&["pods", "-o", "json"]);
            let pods: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let p = pods
                .as_array()?
                .iter()
                .find(|p| p["uid"] == h.pod.uid.as_str())?
                .clone();
            (p["inbound_live"] == kernel.inbound_live && kernel.inbound_live == 3).then_some(())
        });
        counts_match += usize::from(agrees.is_some());
    }

    // Each pod's clients close 20 s + i s after the deletion, in turn.
    let mut closes = Vec::new();
    for (i, h) in held.iter_mut().enumerate() {
        let at = deleted + Duration::from_secs(20 + i as u64);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        h.clients.close();
        closes.push(monotonic_ns());
    }
    let mut fates = Vec::new();
    for (h, closed) in held.iter_mut().zip(closes) {
        let sigterm = graceful_tests::wait_for(60, "each app's SIGTERM", || sigterm_ns(&mut h.log));
        let failed_hook = graceful_tests::cluster::poll(Duration::from_secs(3), || {
            events_by(&ns, &h.pod.uid, "kubelet")
                .iter()
                .any(|(r, _)| r == "FailedPreStopHook")
                .then_some(())
        })
        .is_some();
        fates.push(Fate {
            exec: h.exec,
            after_ms: (sigterm as f64 - closed as f64) / 1e6,
            since_event_s: (sigterm as f64 - event_ns as f64) / 1e9,
            failed_hook,
        });
    }
    for n in &names {
        graceful_tests::wait_for(90, "the round's pods to be gone", || ns.pod_gone(n).then_some(()));
    }
    if event == Event::Rollout {
        cluster.roll_agent_to(AGENT_IMAGE);
        cluster.images(&["rm", &format!("{AGENT_IMAGE}-next")]);
    }
    Row {
        event,
        fates,
        counts_match,
        counted: held.len(),
    }
}

#[test]
fn ten_drains_through_a_rollout_a_kill_9_and_a_deletion_of_the_agent() {
    let (cluster, _serial) = crate::node();
    let rows: Vec<Row> = [Event::Rollout, Event::Kill9, Event::Delete]
        .into_iter()
        .map(|e| round(&cluster, e))
        .collect();
    eprintln!(
        "\n{PER_GATE} exec-gate pods | {PER_GATE} httpGet-gate pods, each held by 3 clients for 20-{} s:",
        20 + 2 * PER_GATE - 1
    );
    for r in &rows {
        r.print();
    }
    for r in &rows[..2] {
        assert_eq!(
            (r.held(true), r.held(false)),
            (PER_GATE, PER_GATE),
            "{}: a pod's SIGTERM did not come just after its own last close",
            r.event.name()
        );
        assert_eq!(
            r.failed(true) + r.failed(false),
            0,
            "{}: FailedPreStopHook",
            r.event.name()
        );
        assert_eq!(
            r.counts_match,
            r.counted,
            "{}: the agent's counts against ss",
            r.event.name()
        );
    }
    // A deletion with no successor: exec hooks reconnect and hold; an
    // httpGet hook is held for --stop-hold, then fails open, never before.
    let d = &rows[2];
    assert_eq!(d.held(true), PER_GATE, "pod deleted: an exec hook did not hold");
    assert_eq!(d.failed(true), 0, "pod deleted: an exec hook failed");
    for f in d.fates.iter().filter(|f| !f.exec && f.after_ms < 200.0) {
        assert!(
            f.since_event_s >= STOP_HOLD_S - 1.0,
            "pod deleted: an httpGet hook was cut {:.1} s after the agent's deletion, before --stop-hold",
            f.since_event_s
        );
    }
    assert_eq!(
        d.counts_match, d.counted,
        "pod deleted: the new agent's counts against ss"
    );
}
