//! The socket gate beside the httpGet gate on the node, in pods whose
//! inbound TCP is captured as a mesh's sidecar captures it: every port
//! redirected to a proxy's (Istio's 15006, Linkerd's 4143), the gate's
//! included. The httpGet hook's connection then never reaches the gate:
//! the kubelet records the hook as failed and sends SIGTERM at once. The
//! socket gate has no port to capture: graceful-wait, run from the image
//! volume inside the pod, reaches the agent through the abstract socket and
//! the SIGTERM is held. (No proxy listens on 15006 here, so a captured
//! connection is refused; with Envoy there it reaches the gate from
//! 127.0.0.6 and gets 403, which the kubelet takes as the hook's success:
//! SIGTERM at once all the same.)

use std::time::{Duration, Instant};

use graceful_tests::cluster::{pod::Pod, Namespace};

use crate::{examples::apply_into, gate::events_by};

/// What a deletion came to: seconds from it to the app's exit, and the
/// Events of the kubelet and of graceful on the pod.
struct Outcome {
    exit_s: f64,
    kubelet: Vec<(String, String)>,
    graceful: Vec<(String, String)>,
}

/// One pod of tests/overlays/`overlay` (a restricted example), its
/// inbound TCP captured to a port nothing listens on, deleted.
fn captured_and_deleted(cluster: &graceful_tests::cluster::Cluster, overlay: &str) -> Outcome {
    let ns = Namespace::create(cluster, overlay);
    apply_into(cluster, &ns, overlay, |o| {
        if o["kind"] == "Deployment" {
            o["spec"]["replicas"] = serde_json::json!(1);
        }
    });
    let pod = Pod::wait_ready(&ns, "app.kubernetes.io/name=restricted-web", 1, 120).remove(0);
    // The gate is up before the capture: what fails below is the capture.
    let net = pod.netns();
    graceful_tests::wait_for(20, "the pod's gate", || {
        let listening = net.exec("ss", &["-Hltnx"]);
        (listening.contains(":9711") || listening.contains("@graceful.dev/gate")).then_some(())
    });
    net.exec(
        "iptables",
        &[
            "-t",
            "nat",
            "-A",
            "PREROUTING",
            "-p",
            "tcp",
            "-j",
            "REDIRECT",
            "--to-ports",
            "15006",
        ],
    );
    let deleted = Instant::now();
    ns.kubectl(&["delete", "pod", &pod.name, "--wait=false"]);
    let exit = pod
        .wait_exit("web", Duration::from_secs(60))
        .expect("the app exited within 60 s");
    let exit_s = exit.duration_since(deleted).as_secs_f64();
    let events = |by: &str, want: &str| {
        graceful_tests::wait_for(20, "the deletion's Event", || {
            let e = events_by(&ns, &pod.uid, by);
            e.iter().any(|(r, _)| r == want).then_some(e)
        })
    };
    let (kubelet, graceful) = if overlay == "restricted" {
        (
            events("kubelet", "FailedPreStopHook"),
            events_by(&ns, &pod.uid, "graceful"),
        )
    } else {
        (
            events_by(&ns, &pod.uid, "kubelet"),
            events("graceful", "DrainReleased"),
        )
    };
    eprintln!("    {overlay}: the app exited {exit_s:.2} s after the deletion");
    Outcome {
        exit_s,
        kubelet,
        graceful,
    }
}

#[test]
fn under_a_mesh_capture_of_every_inbound_port_the_socket_gate_holds_and_the_http_gate_cannot() {
    let (cluster, _serial) = crate::node();
    let http = captured_and_deleted(&cluster, "restricted");
    // The kubelet's GET went to the capture's port: refused, the hook
    // failed, SIGTERM at once.
    assert!(
        http.kubelet.iter().any(|(r, _)| r == "FailedPreStopHook"),
        "{:?}",
        http.kubelet
    );
    assert!(
        !http.graceful.iter().any(|(r, _)| r == "DrainReleased"),
        "the httpGet gate was reached: {:?}",
        http.graceful
    );

    let socket = captured_and_deleted(&cluster, "restricted-socket");
    assert!(
        !socket.kubelet.iter().any(|(r, _)| r == "FailedPreStopHook"),
        "{:?}",
        socket.kubelet
    );
    let released = socket
        .graceful
        .iter()
        .find(|(r, m)| r == "DrainReleased" && m.contains("drained"))
        .unwrap_or_else(|| panic!("{:?}", socket.graceful));
    // Held to the hook's min (2 s) at least, nginx's shutdown after it;
    // the httpGet gate's pod got its SIGTERM with the failed hook.
    assert!(
        socket.exit_s >= 2.0 && socket.exit_s > http.exit_s,
        "socket gate {:.2} s, httpGet gate {:.2} s: {released:?}",
        socket.exit_s,
        http.exit_s
    );
    eprintln!("    socket gate: {}", released.1);
}
