//! The sidecar examples, deployed and terminated under load on the node:
//! the sidecar outlives the app's traffic as each example claims, no
//! request fails, and each container's drain leaves its Event. The
//! restricted examples likewise (the httpGet gate, and the socket gate
//! with graceful-wait from an image volume), in a namespace held to their
//! own Pod Security labels. (The policy-sidecar examples run with the real OPA:
//! policy_opa.rs.)
//!
//! None of them needs a feature v1.20 lacks: they order their containers
//! with exec hooks (`--scope`, `--after-containers`), not native sidecars
//! or the `sleep` action. Programs that cannot be had here play stand-in
//! roles (tests/overlays/*): what is tested is graceful's ordering of real
//! containers' SIGTERMs by a real kubelet, under traffic through a real
//! Service.

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use graceful_tests::{
    cluster::{late_lb::LateLb, pod::Pod, workspace, Cluster, Namespace},
    rollout::load,
};

use crate::{
    gate::{events_by, events_of},
    pod_security::render,
};

/// One request from the node: its status.
pub(crate) fn status(cluster: &Cluster, addr: SocketAddr, method: &str, path: &str) -> u16 {
    let req =
        format!("{method} {path} HTTP/1.1\r\nHost: e2e\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    cluster.on_node(move || {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut head = [0u8; 64];
        let n = s.read(&mut head).unwrap();
        let line = String::from_utf8_lossy(&head[..n]).to_string();
        line.split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    })
}

/// What a terminated pod's containers did.
pub(crate) struct Exits {
    /// When the pod's deletion was asked for.
    pub deleted: Instant,
    /// Container → when its last process exited.
    at: Vec<(String, Instant)>,
}

impl Exits {
    pub fn of(&self, c: &str) -> Instant {
        self.at.iter().find(|(n, _)| n == c).unwrap().1
    }

    /// Seconds from the deletion to `c`'s exit.
    pub fn after_deletion(&self, c: &str) -> f64 {
        self.of(c).duration_since(self.deleted).as_secs_f64()
    }
}

/// How late a load balancer outside the cluster, in front of the pods,
/// learns of a change: a few seconds (see `cluster::late_lb`).
pub(crate) const LATE: Duration = Duration::from_secs(3);

/// An example as the test deploys it.
pub(crate) struct Example<'a> {
    /// Its overlay in tests/overlays.
    pub overlay: &'a str,
    /// Its pods, and how many.
    pub selector: &'a str,
    pub pods: usize,
    /// Other pods it needs ready first (its backends): their selector,
    /// their Service and how many.
    pub backends: &'a [(&'a str, &'a str, usize)],
    /// The Service in front of it (port 80).
    pub service: &'a str,
    /// Send the load to the Service's pods through a load balancer that
    /// learns of their changes this late (`cluster::late_lb`), not to the
    /// ClusterIP.
    pub late_lb: Option<Duration>,
}

/// Deploys the example, waits for its pods, then deletes one of them under
/// 50 req/s to its Service from the node; returns that pod, its
/// containers' exits, and what the load saw. `before` runs first, with
/// the Service's address.
pub(crate) fn terminate_one(
    cluster: &Cluster,
    ns: &Namespace,
    ex: Example,
    before: impl FnOnce(SocketAddr),
) -> (Pod, Exits, load::Outcome) {
    ns.apply_kustomization(&workspace().join("tests/overlays").join(ex.overlay));
    terminate_deployed(cluster, ns, ex, before)
}

/// [`terminate_one`], for an example already deployed.
pub(crate) fn terminate_deployed(
    cluster: &Cluster,
    ns: &Namespace,
    ex: Example,
    before: impl FnOnce(SocketAddr),
) -> (Pod, Exits, load::Outcome) {
    for (sel, service, n) in ex.backends {
        Pod::wait_ready(ns, sel, *n, 120);
        ns.wait_service(service, *n);
    }
    let victim = Pod::wait_ready(ns, ex.selector, ex.pods, 120).remove(0);
    // Through kube-proxy's rules once they hold every ready pod: before
    // its sync the ClusterIP refuses ("has no endpoints").
    let ip = ns.wait_service(ex.service, ex.pods);
    let addr: SocketAddr = format!("{ip}:80").parse().unwrap();
    before(addr);

    let watchers: Vec<JoinHandle<(String, Option<Instant>)>> = victim
        .containers
        .iter()
        .map(|(name, _)| {
            let (p, name) = (victim.clone(), name.clone());
            std::thread::spawn(move || {
                let at = p.wait_exit(&name, Duration::from_secs(90));
                (name, at)
            })
        })
        .collect();
    let late = ex.late_lb.map(|d| LateLb::start(ns, ex.service, d));
    let target = match &late {
        Some(lb) => load::Target::Pool(lb.pool.clone()),
        None => addr.into(),
    };
    let traffic = cluster.on_node_load(target, 50, 16).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    traffic.count_from_now();
    let deleted = Instant::now();
    ns.kubectl(&["delete", "pod", &victim.name, "--wait=false"]);
    let mut at = Vec::new();
    for w in watchers {
        let (name, exit) = w.join().unwrap();
        let exit =
            exit.unwrap_or_else(|| panic!("{}'s container {name} did not exit within 90 s", victim.name));
        eprintln!(
            "    {}: {name} exited {:.2} s after the deletion",
            victim.name,
            exit.duration_since(deleted).as_secs_f64()
        );
        at.push((name, exit));
    }
    // The replacement takes the traffic; a moment more for late failures.
    std::thread::sleep(Duration::from_secs(2) + ex.late_lb.unwrap_or_default());
    let outcome = traffic.finish();
    drop(late);
    (victim, Exits { deleted, at }, outcome)
}

pub(crate) fn assert_no_failures(what: &str, o: &load::Outcome) {
    eprintln!(
        "    {what}: {} requests, {} failed {:?} (warm-up: {} requests, failed {:?})",
        o.requests, o.failed, o.failures, o.warmup_requests, o.warmup_failures
    );
    assert!(
        o.warmup_failures.is_empty(),
        "{what}: the warm-up before the deletion failed: {:?}",
        o.warmup_failures
    );
    assert!(o.requests > 100, "{what}: only {} requests were sent", o.requests);
    assert_eq!(o.failed, 0, "{what}: requests failed: {:?}", o.failures);
}

/// graceful's Events on the pod, as `reason: message` lines.
pub(crate) fn events(ns: &Namespace, pod: &Pod) -> Vec<String> {
    let ev = graceful_tests::wait_for(20, "graceful's Events on the pod", || {
        let e = events_of(ns, &pod.uid);
        (e.len() >= pod.containers.len()).then_some(e)
    });
    ev.into_iter().map(|(r, m)| format!("{r}: {m}")).collect()
}

#[test]
fn mesh_proxy_the_proxy_outlives_the_app() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "mesh");
    let (pod, exits, traffic) = terminate_one(
        &cluster,
        &ns,
        Example {
            overlay: "mesh-proxy",
            selector: "app.kubernetes.io/name=mesh-app",
            pods: 2,
            backends: &[("app.kubernetes.io/name=web", "web", 3)],
            service: "mesh-app",
            late_lb: None,
        },
        // In through the proxy, to the app, out through the proxy's egress
        // to the web Service: every hop answers.
        |svc| assert_eq!(status(&cluster, svc, "GET", "/"), 200),
    );
    assert_no_failures("through the mesh proxy", &traffic);
    assert!(
        exits.of("proxy") > exits.of("app"),
        "the proxy stopped before the app had exited"
    );
    let ev = events(&ns, &pod);
    assert!(ev.iter().any(|e| e.contains("containers-exited")), "{ev:?}");
}

/// deploy/examples/restricted, applied as shipped (only its image is one
/// of the node's) into a namespace of the test's own that carries the
/// example's own Pod Security labels: the API server admits its pods under
/// restricted, and the kubelet's httpGet hook on the gate holds each
/// deleted pod until its connections have drained. Nothing of graceful is
/// in the pod.
#[test]
fn restricted_the_example_drains_in_its_restricted_namespace() {
    let released = drains_in_its_restricted_namespace("restricted");
    eprintln!("    {released}");
}

/// deploy/examples/restricted-socket likewise: admitted under restricted
/// with graceful's image as an image volume, its exec hook (graceful-wait
/// from that volume) drains through the socket gate in the pod's own
/// namespace. The hook ran and was held: no FailedPreStopHook, and the
/// release names the hold.
#[test]
fn restricted_socket_the_example_drains_through_an_image_volume() {
    let released = drains_in_its_restricted_namespace("restricted-socket");
    eprintln!("    {released}");
}

/// Renders tests/overlays/`overlay` (an example that names its own
/// namespace), passes each object to `edit`, and applies them into `ns`
/// instead; returns the Namespace objects it renders, unapplied.
pub(crate) fn apply_into(
    cluster: &Cluster,
    ns: &Namespace,
    overlay: &str,
    edit: impl Fn(&mut serde_json::Value),
) -> Vec<serde_json::Value> {
    let objects = render(cluster, &workspace().join("tests/overlays").join(overlay));
    let (namespaces, mut rest): (Vec<_>, Vec<_>) =
        objects.into_iter().partition(|o| o["kind"] == "Namespace");
    for o in &mut rest {
        o["metadata"]["namespace"] = serde_json::json!(ns.name);
        edit(o);
    }
    ns.apply(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": rest}).to_string());
    namespaces
}

/// Applies tests/overlays/`overlay` (a restricted example) into a
/// namespace with the example's own labels, deletes a pod under load, and
/// checks no request failed and the pod's SIGTERM was held past the hook's
/// min; the release Event.
fn drains_in_its_restricted_namespace(overlay: &'static str) -> String {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, overlay);
    // The example's namespace, as the test's: its labels, no other.
    let namespaces = apply_into(&cluster, &ns, overlay, |_| {});
    let labels = namespaces[0]["metadata"]["labels"]
        .as_object()
        .expect("the example's namespace has labels");
    assert_eq!(labels["pod-security.kubernetes.io/enforce"], "restricted");
    let mut label = vec![
        "label".to_string(),
        "namespace".into(),
        ns.name.clone(),
        "--overwrite".into(),
    ];
    label.extend(labels.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap())));
    cluster.kubectl(&label.iter().map(String::as_str).collect::<Vec<_>>());

    let (pod, _exits, traffic) = terminate_deployed(
        &cluster,
        &ns,
        Example {
            overlay,
            selector: "app.kubernetes.io/name=restricted-web",
            pods: 3,
            backends: &[],
            service: "restricted-web",
            late_lb: None,
        },
        |svc| assert_eq!(status(&cluster, svc, "GET", "/"), 200),
    );
    assert_no_failures("to the restricted namespace's app", &traffic);
    let ev = events(&ns, &pod);
    let kubelet = events_by(&ns, &pod.uid, "kubelet");
    assert!(
        !kubelet.iter().any(|(r, _)| r == "FailedPreStopHook"),
        "the hook failed: {kubelet:?}"
    );
    let released = ev
        .iter()
        .find(|e| e.starts_with("DrainReleased") && e.contains("drained"))
        .unwrap_or_else(|| panic!("no drained release in {ev:?}"))
        .clone();
    // Held past the hook's min (2 s): the kubelet waited on the gate.
    // "held the SIGTERM of the pod for 2.6s: ..." (httpGet), "... of
    // container web for ..." (exec, whose drain knows its container).
    let held_s: f64 = released
        .split("held the SIGTERM of ")
        .nth(1)
        .and_then(|r| r.split(" for ").nth(1))
        .and_then(|r| r.split(':').next())
        .and_then(|d| d.trim_end_matches('s').parse().ok())
        .unwrap_or_else(|| panic!("no hold in {released}"));
    assert!(held_s >= 2.0, "{released}");
    released
}
