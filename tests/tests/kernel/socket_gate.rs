//! The socket gate on the real kernel: for a pod annotated
//! `graceful.dev/gate: socket` (told of by a fake API), the agent binds an
//! abstract unix socket inside the pod's network namespace, and
//! `graceful-wait --socket @graceful.dev/gate`, run in the pod's cgroup and
//! namespace as a kubelet runs an exec hook, drains through it: no hostPath
//! and no TCP port in the pod. Only the pod's own processes are served; the
//! socket goes with the pod.

use std::time::{Duration, Instant};

use graceful_tests::{
    cgroup::Cgroup,
    event_slack_ms,
    gate::{abstract_listening, engaged, finish, finish_engaged, hook_at, pod_socket, wait_draining},
    http_hook::{listening, pod_object, watch_line, Scene, PORT},
    pod::SimPod,
};
use serde_json::json;

use crate::{metric, require_root, settle, HELD};

fn socket_scene() -> Scene {
    let s = Scene::with_gate_dir(json!({"graceful.dev/gate": "socket"}));
    graceful_tests::gate::wait_socket_gate(&s.net.b);
    s
}

#[test]
fn a_hook_inside_the_pod_is_held_until_the_last_client_closes_and_the_pod_has_no_port() {
    require_root!();
    let mut s = socket_scene();
    // Nothing of the agent's listens on TCP in the pod: no port to collide
    // with the app's, none for a mesh's rules to capture.
    assert!(!listening(&s.net.b, PORT), "a TCP listener in the pod");
    let tcp = s.net.b.exec("ss", &["-Htln"]);
    assert_eq!(
        tcp.lines().count(),
        1,
        "only the app listens on TCP in the pod: {tcp}"
    );
    assert_eq!(metric(&s.agent, "graceful_http_gates"), 1);
    let (_lb, mut clients) = s.clients(3);
    let mut child = hook_at(&s.agent, s.pod.container(0), Some(&s.net.b), &pod_socket(), &HELD);
    let stdout = engaged(&mut child);
    wait_draining(&s.agent, 1);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "released with 3 clients connected"
    );
    // The hook's connection is the agent's and the hook's, never the pod's traffic.
    let views = settle(&s.agent, &[s.pod.container(0)], &[Some(&s.net.b)]);
    assert_eq!((views[0].inbound_live, views[0].listeners), (3, 1));
    clients.cmd("close-out 3 fin");
    let closed = Instant::now();
    let (report, out) = finish_engaged(child, stdout);
    let answered_ms = closed.elapsed().as_millis() as u64;
    assert_eq!(report["reason"], "drained", "{out}");
    assert_eq!(report["pod"], s.pod.uid.as_str(), "{out}");
    assert_eq!(report["inbound_at_start"], 3, "{out}");
    assert!(
        answered_ms <= 100 + 2 * event_slack_ms(),
        "released {answered_ms} ms after the last close (settle 100 ms): {out}"
    );
    s.api.wait_event("DrainReleased");

    // The pod gone from the API: its socket goes, and the gauge with it.
    let obj = pod_object(&s.pod, json!({"graceful.dev/gate": "socket"}));
    s.api.push(&watch_line("DELETED", &obj));
    graceful_tests::wait_for(10, "the socket gate to close", || {
        (!abstract_listening(&s.net.b, &pod_socket())).then_some(())
    });
    assert_eq!(metric(&s.agent, "graceful_http_gates"), 0);
    eprintln!("socket gate: released {answered_ms} ms after the last close (settle 100 ms)");
}

#[test]
fn a_process_that_is_not_the_pods_own_is_refused_and_the_drain_in_flight_is_untouched() {
    require_root!();
    let mut s = socket_scene();
    let (_lb, mut clients) = s.clients(1);
    let mut child = hook_at(&s.agent, s.pod.container(0), Some(&s.net.b), &pod_socket(), &HELD);
    let stdout = engaged(&mut child);
    wait_draining(&s.agent, 1);

    // In the pod's namespace, but no pod's process; and another pod's
    // process that entered it. Each is told why, and fails open.
    let stranger = Cgroup::unique("stranger");
    let other = SimPod::create(1);
    for (cg, says) in [
        (&stranger, "is not in a Kubernetes pod".to_string()),
        (
            other.container(0),
            format!(
                "is of pod {}: this socket gate serves only pod {}'s own hooks",
                other.uid, s.pod.uid
            ),
        ),
    ] {
        let c = hook_at(&s.agent, cg, Some(&s.net.b), &pod_socket(), &HELD);
        let (report, out) = finish(c);
        assert_eq!(report["reason"], "agent-unreachable", "{out}");
        assert!(out.contains("HTTP 403") && out.contains(&says), "{out}");
    }
    // A pod with the gate elsewhere: the name means nothing in the node's namespace.
    let c = hook_at(
        &s.agent,
        s.pod.container(0),
        Some(&s.net.a),
        &pod_socket(),
        &["--connect-timeout", "200ms", "--max", "5s"],
    );
    let (report, out) = finish(c);
    assert_eq!(report["reason"], "agent-unreachable", "{out}");
    assert!(
        out.contains("cannot reach the agent at @graceful.dev/gate"),
        "{out}"
    );

    // The pod's own drain is still held, and releases as before.
    assert!(child.try_wait().unwrap().is_none(), "the drain in flight ended");
    clients.cmd("close-out 1 fin");
    let (report, out) = finish_engaged(child, stdout);
    assert_eq!(report["reason"], "drained", "{out}");
}
