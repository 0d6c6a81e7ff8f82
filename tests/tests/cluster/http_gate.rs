//! The httpGet gate on a real kubelet: a pod whose only hook is
//! `preStop: httpGet` (no host, no volume, nothing in its image) is held
//! while its clients are connected and gets its SIGTERM just after the
//! last one closes, with a `DrainReleased` Event; with no agent on the
//! node, nothing listens and the kubelet sends SIGTERM at once.

use std::time::Duration;

use graceful_tests::{
    cluster::{
        clients::Clients, pod::Pod, pod_head, release::sigterm_ns, Cluster, Namespace, TEST_APP_IMAGE,
    },
    http_hook::PORT,
    monotonic_ns,
};

use crate::gate::{
    deleted_with_clients, events_by, held_until_the_last_close, sigterm_after_deletion, wait_drain_engaged,
    NoAgent,
};

/// A pod of the test app that opts into the httpGet gate, under the
/// restricted Pod Security rules: non-root, no privilege escalation, every
/// capability dropped, the runtime's seccomp profile, no hostPath, and a
/// hook with no `host`.
pub fn http_pod(name: &str, query: &str, grace_s: u32) -> String {
    format!(
        r#"{head}  annotations: {{graceful.dev/gate: http}}
spec:
  terminationGracePeriodSeconds: {grace_s}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65534
    seccompProfile: {{type: RuntimeDefault}}
  containers:
    - name: app
      image: {TEST_APP_IMAGE}
      ports: [{{containerPort: 8080}}]
      securityContext:
        allowPrivilegeEscalation: false
        capabilities: {{drop: [ALL]}}
      lifecycle:
        preStop:
          httpGet: {{path: "/drain?{query}", port: {PORT}}}
"#,
        head = pod_head(name, &format!("{{app: {name}}}"))
    )
}

/// The kubelet's own Events on pod `uid`: (reason, message).
fn kubelet_events(ns: &Namespace, uid: &str) -> Vec<(String, String)> {
    events_by(ns, uid, "kubelet")
}

/// Waits until the agent listens in the pod's namespace.
pub fn wait_gate(cluster: &Cluster, pod: &Pod) {
    let ns = pod.netns();
    graceful_tests::wait_for(20, "the agent's httpGet gate in the pod's namespace", || {
        graceful_tests::http_hook::listening(&ns, PORT).then_some(())
    });
    let _ = cluster;
}

#[test]
fn an_http_get_hook_holds_sigterm_until_the_last_client_closes() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "httpgate");
    ns.apply(&http_pod(
        "held",
        "policy=drained&settle=200ms&min=0s&max=20s",
        30,
    ));
    let pod = Pod::wait_ready(&ns, "app=held", 1, 60).remove(0);
    wait_gate(&cluster, &pod);
    let (clients, mut log) = deleted_with_clients(&cluster, &ns, &pod, "held");

    held_until_the_last_close(&ns, &pod, clients, &mut log, "held", "httpGet hook: ");
    // The hook succeeded: the kubelet saw a 200.
    let kubelet = kubelet_events(&ns, &pod.uid);
    assert!(
        !kubelet.iter().any(|(r, _)| r == "FailedPreStopHook"),
        "{kubelet:?}"
    );
}

#[test]
fn without_an_agent_an_http_get_hook_fails_open_at_once() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "httpabsent");
    ns.apply(&http_pod("alone", "policy=drained&max=20s", 30));
    let pod = Pod::wait_ready(&ns, "app=alone", 1, 60).remove(0);
    let _clients = Clients::open(&cluster, format!("{}:8080", pod.ip).parse().unwrap(), 2);
    let mut log = pod.open_log("app");

    let _absent = NoAgent::new(&cluster);
    assert!(!graceful_tests::http_hook::listening(&pod.netns(), PORT));
    let (after_s, test_s) = sigterm_after_deletion(&ns, "alone", &mut log);
    eprintln!(
        "with no agent, an httpGet hook's SIGTERM {after_s:.2} s after the deletion ({test_s:.1} s on the test's clock)"
    );
    // Refused at once: no connect timeout to wait out, far from --max.
    assert!(after_s < 2.0, "SIGTERM {after_s:.2} s after the deletion");
    // How the kubelet treats the refused hook: a Warning Event, then the
    // kill. Since 1.23 the Event says "PreStopHook failed" alone (the error
    // may hold secrets) and the kubelet logs the error itself: the cause
    // must be the refused connection, on its log line for this pod.
    let (_, message) = graceful_tests::wait_for(20, "the kubelet's FailedPreStopHook Event", || {
        kubelet_events(&ns, &pod.uid)
            .into_iter()
            .find(|(r, _)| r == "FailedPreStopHook")
    });
    assert_eq!(message, "PreStopHook failed");
    let line = graceful_tests::wait_for(10, "the kubelet's log line on the failed hook", || {
        cluster
            .kubelet_log()
            .lines()
            .find(|l| l.contains("PreStop hook failed") && l.contains(&pod.uid))
            .map(str::to_string)
    });
    assert!(line.contains("connection refused"), "{line}");
}

#[test]
fn a_bad_query_is_answered_400_and_the_kubelet_goes_on() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "httpbad");
    ns.apply(&http_pod("typo", "policy=drained&max=soon", 30));
    let pod = Pod::wait_ready(&ns, "app=typo", 1, 60).remove(0);
    wait_gate(&cluster, &pod);
    let clients = Clients::open(&cluster, format!("{}:8080", pod.ip).parse().unwrap(), 2);
    let mut log = pod.open_log("app");
    let agent = cluster.agent_pod(60);
    let deleted_ns = monotonic_ns();
    ns.kubectl(&["delete", "pod", "typo", "--wait=false"]);
    let sigterm = graceful_tests::wait_for(20, "the app's SIGTERM", || sigterm_ns(&mut log));
    let after_s = sigterm.saturating_sub(deleted_ns) as f64 / 1e9;
    // The app finishes its clients' requests before it exits.
    drop(clients);
    // The agent said why, naming the pod and the request as it came.
    let line = graceful_tests::wait_for(10, "the agent's line on the bad request", || {
        let logs = cluster.kubectl(&["-n", graceful_tests::cluster::AGENT_NAMESPACE, "logs", &agent]);
        logs.lines()
            .find(|l| l.contains("httpGet gate: bad request") && l.contains(&format!("{}/typo", ns.name)))
            .map(str::to_string)
    });
    eprintln!("a 400 hook: SIGTERM {after_s:.2} s after the deletion; the agent: {line}");
    assert!(
        line.contains("max: invalid duration \"soon\"") && line.contains("status=400"),
        "{line}"
    );
    assert!(after_s < 2.0, "SIGTERM {after_s:.2} s after the deletion");
    // v1.20 takes the answer, whatever its status, for the hook's success.
    graceful_tests::wait_for(30, "the pod to be gone", || ns.pod_gone("typo").then_some(()));
    let kubelet = kubelet_events(&ns, &pod.uid);
    assert!(
        !kubelet.iter().any(|(r, _)| r == "FailedPreStopHook"),
        "{kubelet:?}"
    );
}

#[test]
fn the_agent_pods_deletion_mid_drain_waits_for_the_drain() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "httprestart");
    ns.apply(&http_pod(
        "kept",
        "policy=drained&settle=200ms&min=0s&max=40s",
        60,
    ));
    let pod = Pod::wait_ready(&ns, "app=kept", 1, 60).remove(0);
    wait_gate(&cluster, &pod);
    let clients = Clients::open(&cluster, format!("{}:8080", pod.ip).parse().unwrap(), 3);
    let mut log = pod.open_log("app");
    ns.kubectl(&["delete", "pod", "kept", "--wait=false"]);
    wait_drain_engaged(&cluster, &pod.uid, 20);
    // The agent is told to stop (an upgrade, a node drain): the kubelet
    // would not retry the hook if its connection were cut, so the agent
    // finishes the drain first (--stop-hold).
    let agent = cluster.agent_pod(10);
    cluster.kubectl(&[
        "-n",
        graceful_tests::cluster::AGENT_NAMESPACE,
        "delete",
        "pod",
        &agent,
        "--wait=false",
    ]);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        sigterm_ns(&mut log),
        None,
        "SIGTERM came while the stopping agent held the drain"
    );
    held_until_the_last_close(
        &ns,
        &pod,
        clients,
        &mut log,
        "kept",
        "httpGet hook through its agent's stop: ",
    );
    let kubelet = kubelet_events(&ns, &pod.uid);
    assert!(
        !kubelet.iter().any(|(r, _)| r == "FailedPreStopHook"),
        "{kubelet:?}"
    );
    graceful_tests::wait_for(120, "a new agent pod", || {
        let p = cluster.agent_pod(120);
        (p != agent).then_some(())
    });
}
