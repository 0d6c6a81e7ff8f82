//! The exec gate on a real kubelet: the preStop hook holds the app's
//! SIGTERM while clients are connected and releases it just after the last
//! one closes; the drain leaves a `DrainReleased` Event on the pod; with no
//! agent on the node the hook fails open after its connect timeout.

use std::time::{Duration, Instant};

pub use graceful_tests::cluster::release::sigterm_ns;
use graceful_tests::monotonic_ns;
use graceful_tests::{
    cluster::{
        clients::Clients,
        pod::{Log, Pod},
        Cluster, Namespace, AGENT_NAMESPACE, AGENT_SELECTOR,
    },
    event_slack_ms,
};

/// Waits until the agent lists a drain of `uid` as active.
pub fn wait_drain_engaged(cluster: &Cluster, uid: &str, secs: u64) {
    graceful_tests::wait_for(secs, "the agent to list the pod's drain as active", || {
        let out = cluster.agent(&["drains", "-o", "json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        v["active"]
            .as_array()?
            .iter()
            .any(|d| d["pod"] == uid)
            .then_some(())
    });
}

/// Deletes the pod `name` and waits (20 s at most) for its app's SIGTERM
/// in `log`: seconds from the deletion to it on the node's clock, and
/// seconds since the deletion on the test's.
pub fn sigterm_after_deletion(ns: &Namespace, name: &str, log: &mut Log) -> (f64, f64) {
    let deleted = Instant::now();
    let deleted_ns = monotonic_ns();
    ns.kubectl(&["delete", "pod", name, "--wait=false"]);
    let sigterm = graceful_tests::wait_for(20, "the app's SIGTERM", || sigterm_ns(log));
    let after_s = sigterm.saturating_sub(deleted_ns) as f64 / 1e9;
    (after_s, deleted.elapsed().as_secs_f64())
}

/// The start of a held pod's story, for either gate: with 3 clients
/// connected the pod `name` is deleted; its drain is engaged and, 2 s on,
/// its app has still had no SIGTERM. Its clients and its app's log.
pub fn deleted_with_clients(cluster: &Cluster, ns: &Namespace, pod: &Pod, name: &str) -> (Clients, Log) {
    let clients = Clients::open(cluster, format!("{}:8080", pod.ip).parse().unwrap(), 3);
    let mut log = pod.open_log("app");
    ns.kubectl(&["delete", "pod", name, "--wait=false"]);
    wait_drain_engaged(cluster, &pod.uid, 20);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        sigterm_ns(&mut log),
        None,
        "SIGTERM came while 3 clients were connected"
    );
    assert!(pod.container_running("app"));
    (clients, log)
}

/// The rest of a held pod's story, for either gate: its 3 clients close,
/// its SIGTERM comes just after (the hook's settle is 200 ms), and once it
/// is gone its `DrainReleased` Event says it drained from 3.
pub fn held_until_the_last_close(
    ns: &Namespace,
    pod: &Pod,
    mut clients: Clients,
    log: &mut Log,
    name: &str,
    what: &str,
) {
    clients.close();
    let closed_ns = monotonic_ns();
    let sigterm = graceful_tests::wait_for(20, "the app's SIGTERM after the last close", || sigterm_ns(log));
    let after_ms = sigterm.saturating_sub(closed_ns) as f64 / 1e6;
    eprintln!("{what}SIGTERM {after_ms:.1} ms after the last client closed (settle 200 ms)");
    assert!(
        sigterm > closed_ns && after_ms >= 200.0 && after_ms < 200.0 + event_slack_ms() as f64,
        "SIGTERM {after_ms:.1} ms after the last close: the settle is 200 ms"
    );
    // A wait, not a bound: under load the kubelet takes its time to tear
    // the sandbox down.
    graceful_tests::wait_for(60, "the pod to be gone", || ns.pod_gone(name).then_some(()));
    let events = events_of(ns, &pod.uid);
    let released = events
        .iter()
        .find(|(reason, _)| reason == "DrainReleased")
        .unwrap_or_else(|| panic!("no DrainReleased Event on the pod: {events:?}"));
    assert!(
        released.1.contains("drained") && released.1.contains("3 inbound at start"),
        "{released:?}"
    );
}

/// The Events graceful left on the pod `uid`: (reason, message).
pub fn events_of(ns: &Namespace, uid: &str) -> Vec<(String, String)> {
    events_by(ns, uid, "graceful")
}

/// The Events `component` (graceful, kubelet) left on the pod `uid`:
/// (reason, message).
pub fn events_by(ns: &Namespace, uid: &str, component: &str) -> Vec<(String, String)> {
    let selector = format!("involvedObject.uid={uid}");
    let v = ns.json(&["get", "events", "--field-selector", &selector]);
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["source"]["component"] == component || e["reportingComponent"] == component)
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_hook_holds_sigterm_until_the_last_client_closes_and_the_drain_leaves_an_event() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "gate");
    let hook = [
        "--policy", "drained", "--settle", "200ms", "--min", "0s", "--max", "20s",
    ];
    ns.apply(&crate::app_pod("held", Some(&hook), 30));
    let pod = Pod::wait_ready(&ns, "app=held", 1, 60).remove(0);
    let (clients, mut log) = deleted_with_clients(&cluster, &ns, &pod, "held");

    held_until_the_last_close(&ns, &pod, clients, &mut log, "held", "");
}

/// Takes the DaemonSet away; puts it back on drop, and waits for its pod.
pub struct NoAgent<'a>(&'a Cluster);

impl<'a> NoAgent<'a> {
    pub fn new(cluster: &'a Cluster) -> NoAgent<'a> {
        // The guard first: if the agent's pod is slow to go, the test
        // fails and the DaemonSet still comes back for the next one.
        let guard = NoAgent(cluster);
        cluster.kubectl(&[
            "-n",
            AGENT_NAMESPACE,
            "delete",
            "daemonset",
            "graceful",
            "--wait=true",
        ]);
        graceful_tests::wait_for(90, "the agent's pod to be gone", || {
            cluster
                .kubectl(&[
                    "-n",
                    AGENT_NAMESPACE,
                    "get",
                    "pods",
                    "-l",
                    AGENT_SELECTOR,
                    "-o",
                    "name",
                ])
                .is_empty()
                .then_some(())
        });
        guard
    }
}

impl Drop for NoAgent<'_> {
    fn drop(&mut self) {
        self.0.restore_agent().unwrap_or_else(|e| panic!("{e}"));
        self.0.agent_pod(120);
    }
}

#[test]
fn without_an_agent_the_hook_fails_open_after_its_connect_timeout() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "absent");
    let hook = ["--policy", "drained", "--connect-timeout", "2s", "--max", "20s"];
    ns.apply(&crate::app_pod("alone", Some(&hook), 30));
    let pod = Pod::wait_ready(&ns, "app=alone", 1, 60).remove(0);
    let _clients = Clients::open(&cluster, format!("{}:8080", pod.ip).parse().unwrap(), 2);
    let mut log = pod.open_log("app");

    let _absent = NoAgent::new(&cluster);
    let (after_s, test_s) = sigterm_after_deletion(&ns, "alone", &mut log);
    eprintln!(
        "with no agent, SIGTERM {after_s:.2} s after the deletion (connect timeout 2 s, --max 20 s; {test_s:.1} s on the test's clock)"
    );
    // The hook starts after the deletion and tries for its 2 s: never
    // sooner; and it fails open, so far from the 20 s deadline.
    assert!(
        (2.0..6.0).contains(&after_s),
        "SIGTERM {after_s:.2} s after the deletion, with a 2 s connect timeout"
    );
}
