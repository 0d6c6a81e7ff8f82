//! The httpGet gate behind each mesh's interception (tests/src/mesh.rs:
//! the mesh's own inbound rules in the test's namespaces, a relay in its
//! proxy's place). For each: what the gate does with no mesh rule (the
//! relayed hook is the pod itself: 403, and the kubelet sends SIGTERM at
//! once), then what it does knowing the mesh: a relayed hook is answered
//! only once the API shows the pod terminating, and then held as the
//! kubelet's; ambient's SNAT address stands for the node for an enrolled
//! pod. A classic sidecar that relays the hook is warned of before any
//! deletion, with the annotations that take it off the hook's path.

use std::time::{Duration, Instant};

use graceful_tests::{
    http_hook::{get, wait_listening, Answer, Scene, PORT},
    mesh::{self, Relay},
};
use serde_json::{json, Value};

use crate::{metric, require_root};

const HOOK: &str = "/drain?policy=drained&settle=100ms&min=0s&max=20s";

/// The kubelet's hook, from the node: its answer, and how long it took.
fn hook(s: &Scene) -> (Answer, Duration) {
    let t = Instant::now();
    let a = get(&s.net.a, s.gate(), HOOK, Duration::from_secs(30)).expect("the hook's answer");
    (a, t.elapsed())
}

fn error_of(a: &Answer) -> String {
    a.json()["error"].as_str().unwrap_or_default().to_string()
}

/// A relayed hook: 403 with no mesh rule; with the mesh known, 403 until
/// the pod terminates (after the wait for the watch), then held until the
/// last client closes.
fn relayed_then_held(s: &mut Scene, meshed: Value, relay_from: &str, mesh_name: &str) {
    let (_lb, mut clients) = s.clients(2);
    // What an agent that knows no mesh does: the relay is the pod itself.
    let (a, _) = hook(s);
    assert_eq!(a.status, 403, "{a:?}");
    assert!(
        error_of(&a).contains(&format!("{relay_from} is not this node but the pod itself")),
        "{a:?}"
    );

    s.update(meshed.clone(), false);
    let (a, took) = hook(s);
    assert_eq!(a.status, 403, "{a:?}");
    assert!(
        error_of(&a).contains(&format!(
            "a request relayed by {mesh_name}'s proxy, and the pod is not terminating"
        )),
        "{a:?}"
    );
    assert!(
        took >= Duration::from_secs(2),
        "answered in {took:?}, before the wait for the watch"
    );

    s.update(meshed, true);
    let (answer, closed) = std::thread::scope(|t| {
        let h = t.spawn(|| hook(s));
        graceful_tests::gate::wait_draining(&s.agent, 1);
        std::thread::sleep(Duration::from_millis(300));
        assert!(!h.is_finished(), "answered with 2 clients connected");
        clients.cmd("close-out 2 fin");
        let closed = Instant::now();
        (h.join().unwrap().0, closed)
    });
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["reason"], "drained", "{answer:?}");
    eprintln!(
        "{mesh_name}: the relayed hook answered {} ms after the last close",
        closed.elapsed().as_millis()
    );
}

#[test]
fn istio_sidecar_a_hook_relayed_from_127_0_0_6_is_held_once_the_pod_terminates() {
    require_root!();
    let gate = json!({"graceful.dev/gate": "http"});
    let mut s = Scene::new(gate);
    wait_listening(&s.net.b, PORT, 10);
    mesh::istio_sidecar_capture(&s.net.b);
    let _envoy = Relay::start(&s.net.b, mesh::ISTIO_INBOUND, Some(mesh::ISTIO_PASSTHROUGH));
    let meshed = json!({
        "graceful.dev/gate": "http",
        "sidecar.istio.io/status": "{\"containers\":[\"istio-proxy\"]}",
    });
    relayed_then_held(&mut s, meshed, "127.0.0.6", "Istio (sidecar mode)");
    // Before any deletion, the pod was told its classic sidecar relays the
    // hook, and what to annotate.
    let warned = graceful_tests::wait_for(10, "the HttpGateMeshed Event", || {
        s.api
            .events()
            .into_iter()
            .find(|e| e["reason"] == "HttpGateMeshed" && e["type"] == "Warning")
    });
    let msg = warned["message"].as_str().unwrap();
    assert!(
        msg.contains("traffic.sidecar.istio.io/excludeInboundPorts: \"9711\"")
            && msg.contains("sidecar.istio.io/rewriteAppHTTPProbers: \"false\""),
        "{msg}"
    );
    // The same, where an operator looks: the gauge, `graceful pods`, doctor.
    assert_eq!(metric(&s.agent, "graceful_http_gates_meshed"), 1);
    let pods = graceful_tests::agent::graceful(&s.agent.pin_dir, &["pods"]);
    let pods = String::from_utf8_lossy(&pods.stdout);
    assert!(
        pods.lines()
            .any(|l| l.starts_with("warning: ") && l.contains("Istio's sidecar relays")),
        "{pods}"
    );
    let doctor = graceful_tests::agent::graceful(&s.agent.pin_dir, &["doctor", "--no-load"]);
    let doctor = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        doctor
            .lines()
            .any(|l| l.starts_with("warn mesh") && l.contains("1 pods' httpGet gate hooks")),
        "{doctor}"
    );
}

#[test]
fn linkerd_a_hook_relayed_from_the_pods_own_address_is_held_once_the_pod_terminates() {
    require_root!();
    let mut s = Scene::new(json!({"graceful.dev/gate": "http"}));
    wait_listening(&s.net.b, PORT, 10);
    mesh::linkerd_capture(&s.net.b, "");
    let _proxy = Relay::start(&s.net.b, mesh::LINKERD_INBOUND, None);
    let meshed = json!({
        "graceful.dev/gate": "http",
        "linkerd.io/proxy-version": "edge-25.1.1",
    });
    let pod_ip = s.net.b_v4.clone();
    relayed_then_held(&mut s, meshed, &pod_ip, "Linkerd");
}

#[test]
fn istio_ambient_the_snat_address_stands_for_the_node_for_an_enrolled_pod() {
    require_root!();
    let mut s = Scene::new(json!({"graceful.dev/gate": "http"}));
    wait_listening(&s.net.b, PORT, 10);
    mesh::ambient_snat(&s.net.a, &s.net.b, &s.net.b_v4, &s.net.a_v4);
    // Not enrolled (as far as the pod says): 169.254.7.127 is no node.
    let (a, _) = hook(&s);
    assert_eq!(a.status, 403, "{a:?}");
    assert!(error_of(&a).contains("169.254.7.127 is not this node"), "{a:?}");
    // Enrolled: admitted at once, no termination needed (it is the node's).
    s.update(
        json!({"graceful.dev/gate": "http", "ambient.istio.io/redirection": "enabled"}),
        false,
    );
    let (_lb, mut clients) = s.clients(1);
    let answer = std::thread::scope(|t| {
        let h = t.spawn(|| hook(&s));
        graceful_tests::gate::wait_draining(&s.agent, 1);
        std::thread::sleep(Duration::from_millis(300));
        assert!(!h.is_finished(), "answered with a client connected");
        clients.cmd("close-out 1 fin");
        h.join().unwrap().0
    });
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["reason"], "drained", "{answer:?}");
    // Ambient has no proxy in the pod to cut the hook: no warning.
    assert!(
        !s.api.events().iter().any(|e| e["reason"] == "HttpGateMeshed"),
        "{:?}",
        s.api.events()
    );
}
