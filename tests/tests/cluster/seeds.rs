//! The seeds with no test of their own (the first is policy_opa.rs, the
//! fifth native_sidecars.rs, the second the rollout table), each run the
//! seed's way and graceful's, one pod of two deleted under 50 requests a
//! second, sent to the pods by a load balancer that learns of the removal
//! 3 s late (as one outside the cluster does).
//!
//! The fourth seed (seeds/003): coraza-spoa as a sidecar of HAProxy. The
//! kubelet signals both at once; HAProxy drains its connections, but the
//! WAF agent that must inspect every request stops with it. The example
//! (deploy/examples/haproxy-waf) holds HAProxy until its inbound
//! connections have drained and the agent until HAProxy has exited.
//! coraza-spoa cannot be had here: the stand-in WAF agent answers
//! HAProxy's SPOE frames and stops at its SIGTERM, as the seed says
//! coraza-spoa does.
//!
//! The third seed (seeds/002): Knative Kourier's gateway drained Envoy
//! from a preStop hook that ran curl, in an image with no curl. The kubelet
//! cannot start such a hook, records it as failed and stops the gateway at
//! once. Envoy cannot be built here: nginx (the restricted example's) plays
//! the gateway, with the seed's hook, against the same pod with graceful's
//! httpGet gate, which needs nothing in the image.

use graceful_tests::cluster::Namespace;

use crate::{
    examples::{
        apply_into, assert_no_failures, events, status, terminate_deployed, terminate_one, Example, LATE,
    },
    gate::events_by,
};

struct Row {
    mode: &'static str,
    requests: u64,
    failed: u64,
    failures: String,
    /// Seconds from the deletion to each container's exit.
    exits: Vec<(&'static str, f64)>,
}

impl Row {
    fn exit(&self, c: &str) -> f64 {
        self.exits.iter().find(|(n, _)| *n == c).unwrap().1
    }
}

/// The rows, as a table on stderr.
fn print(rows: &[&Row]) {
    eprintln!(
        "    {:<24} {:>8} {:>6}  EXITS AFTER THE DELETION  FAILURES",
        "MODE", "REQUESTS", "FAILED"
    );
    for r in rows {
        let exits: Vec<String> = r.exits.iter().map(|(c, s)| format!("{c} {s:.2} s")).collect();
        eprintln!(
            "    {:<24} {:>8} {:>6}  {:<24}  {}",
            r.mode,
            r.requests,
            r.failed,
            exits.join(", "),
            r.failures
        );
    }
}

fn run(mode: &'static str, overlay: &'static str) -> (Row, Vec<String>) {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, overlay);
    let (pod, exits, load) = terminate_one(
        &cluster,
        &ns,
        Example {
            overlay,
            selector: "app.kubernetes.io/name=edge",
            pods: 2,
            backends: &[("app.kubernetes.io/name=web", "web", 3)],
            service: "edge",
            late_lb: Some(LATE),
        },
        |edge| {
            // Every request is inspected by the WAF agent before it passes.
            assert_eq!(status(&cluster, edge, "GET", "/"), 200);
            assert_eq!(
                status(&cluster, edge, "GET", "/attack"),
                403,
                "the WAF agent did not inspect the request"
            );
        },
    );
    let graceful_events = if overlay == "haproxy-waf" {
        events(&ns, &pod)
    } else {
        Vec::new()
    };
    let row = Row {
        mode,
        requests: load.requests,
        failed: load.failed,
        failures: format!("{:?}", load.failures),
        exits: vec![
            ("haproxy", exits.after_deletion("haproxy")),
            ("waf", exits.after_deletion("waf")),
        ],
    };
    if overlay == "haproxy-waf" {
        assert_no_failures("through HAProxy", &load);
    }
    (row, graceful_events)
}

#[test]
fn coraza_beside_haproxy_the_seed_fails_requests_and_the_example_none() {
    let (seed, _) = run("seed: no hooks", "haproxy-waf-bare");
    let (example, ev) = run("graceful (the example)", "haproxy-waf");
    print(&[&seed, &example]);
    // The seed: requests fail, HAProxy's and the agent's stops together.
    assert!(seed.failed > 0, "the seed's pod failed no request");
    // The example: none fail, and the agent outlives HAProxy's connections.
    assert_eq!(example.failed, 0);
    assert!(
        example.exit("waf") > example.exit("haproxy"),
        "the WAF agent stopped before HAProxy had closed its connections to it"
    );
    assert_eq!(
        ev.iter()
            .filter(|e| e.starts_with("DrainReleased") && e.contains("drained"))
            .count(),
        2,
        "{ev:?}"
    );
}

/// One gateway pod of two, `overlay` applied into a namespace of its own.
fn gateway(overlay: &'static str) -> (Row, Vec<(String, String)>, Vec<String>) {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, overlay);
    apply_into(&cluster, &ns, overlay, |o| {
        if o["kind"] == "Deployment" {
            o["spec"]["replicas"] = serde_json::json!(2);
        }
    });
    let (pod, exits, load) = terminate_deployed(
        &cluster,
        &ns,
        Example {
            overlay,
            selector: "app.kubernetes.io/name=restricted-web",
            pods: 2,
            backends: &[],
            service: "restricted-web",
            late_lb: Some(LATE),
        },
        |svc| assert_eq!(status(&cluster, svc, "GET", "/"), 200),
    );
    let kubelet = graceful_tests::wait_for(20, "the kubelet's Events on the pod", || {
        let e = events_by(&ns, &pod.uid, "kubelet");
        e.iter().any(|(r, _)| r == "Killing").then_some(e)
    });
    let graceful = if overlay == "restricted" {
        events(&ns, &pod)
    } else {
        Vec::new()
    };
    let row = Row {
        mode: if overlay == "restricted" {
            "graceful (httpGet gate)"
        } else {
            "seed: curl hook, no curl"
        },
        requests: load.requests,
        failed: load.failed,
        failures: format!("{:?}", load.failures),
        exits: vec![("web", exits.after_deletion("web"))],
    };
    (row, kubelet, graceful)
}

#[test]
fn a_gateway_whose_hook_needs_curl_fails_requests_and_the_http_gate_none() {
    let (seed, kubelet, _) = gateway("restricted-curl-hook");
    let (gate, gate_kubelet, ev) = gateway("restricted");
    print(&[&seed, &gate]);
    // The seed: the hook cannot start, the gateway stops at once, and the
    // late balancer's requests fail.
    assert!(
        kubelet.iter().any(|(r, _)| r == "FailedPreStopHook"),
        "{kubelet:?}"
    );
    assert!(seed.failed > 0, "the seed's gateway failed no request");
    // graceful's gate: nothing in the image, the hook held, nothing failed.
    assert!(
        !gate_kubelet.iter().any(|(r, _)| r == "FailedPreStopHook"),
        "{gate_kubelet:?}"
    );
    assert_eq!(gate.failed, 0, "{}", gate.failures);
    assert!(
        ev.iter()
            .any(|e| e.starts_with("DrainReleased") && e.contains("drained")),
        "{ev:?}"
    );
}
