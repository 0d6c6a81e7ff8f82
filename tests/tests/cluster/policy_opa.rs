//! The first seed (seeds/000), with the real OPA (1.22.4, built here from
//! its Go module) as the policy sidecar of an app that asks it about every
//! request. One pod of two deleted under 50 requests a second, sent to the
//! pods by a load balancer that learns of the removal 3 s late (as one
//! outside the cluster does), four ways:
//!
//! - the seed's pod: the app's preStop sleeps 5 s (the kubelet's sleep
//!   action), OPA has no hook. OPA stops at the deletion, the app serves on
//!   through its sleep, and every request that needs OPA meanwhile fails;
//! - OPA's own answer, `--shutdown-wait-period=10`: OPA serves 10 s more
//!   after its SIGTERM, long enough for the app's sleep. Nothing fails, if
//!   the guess is long enough; the pod takes that long whatever its traffic;
//! - graceful as deploy/examples/policy-sidecar ships it: the app held until
//!   its last inbound connection, OPA until the pod's (the app's calls to it
//!   included);
//! - graceful with OPA a native sidecar (policy-sidecar-native);
//! - OPA a native sidecar with no hook at all: the kubelet stops OPA after
//!   the app, but the app itself at the deletion.

use graceful_tests::cluster::Namespace;

use crate::examples::{status, terminate_one, Example, LATE};

struct Row {
    mode: &'static str,
    requests: u64,
    failed: u64,
    failures: String,
    /// From the deletion to the pod's last container's exit.
    pod_s: f64,
    /// Seconds from the app's exit to OPA's.
    opa_after_app_s: f64,
}

fn run(mode: &'static str, overlay: &str) -> Row {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, overlay);
    let (pod, exits, load) = terminate_one(
        &cluster,
        &ns,
        Example {
            overlay,
            selector: "app.kubernetes.io/name=policy-app",
            pods: 2,
            backends: &[],
            service: "policy-app",
            late_lb: Some(LATE),
        },
        |svc| {
            // The app asks OPA, and OPA's rule decides.
            assert_eq!(status(&cluster, svc, "GET", "/"), 200);
            assert_eq!(status(&cluster, svc, "POST", "/"), 403, "the app did not ask OPA");
        },
    );
    let pod_s = pod
        .containers
        .iter()
        .map(|(c, _)| exits.after_deletion(c))
        .fold(0.0, f64::max);
    Row {
        mode,
        requests: load.requests,
        failed: load.failed,
        failures: format!("{:?}", load.failures),
        pod_s,
        opa_after_app_s: exits.after_deletion("opa") - exits.after_deletion("app"),
    }
}

#[test]
fn opa_as_the_policy_sidecar_the_seed_opas_wait_period_and_graceful() {
    let rows: Vec<Row> = [
        ("app sleeps 5 s, OPA no hook", "policy-opa-sleep"),
        ("+ OPA --shutdown-wait-period=10", "policy-opa-shutdown-wait"),
        ("graceful (classic sidecar)", "policy-opa"),
        ("graceful (native sidecar)", "policy-opa-native"),
        ("native sidecar, no hook", "policy-opa-native-bare"),
    ]
    .into_iter()
    .map(|(mode, overlay)| run(mode, overlay))
    .collect();
    eprintln!(
        "    {:<34} {:>8} {:>6} {:>8} {:>14}  FAILURES",
        "MODE", "REQUESTS", "FAILED", "POD", "OPA AFTER APP"
    );
    for r in &rows {
        eprintln!(
            "    {:<34} {:>8} {:>6} {:>6.2} s {:>12.2} s  {}",
            r.mode, r.requests, r.failed, r.pod_s, r.opa_after_app_s, r.failures
        );
    }
    let [seed, wait, classic, native, bare] = &rows[..] else {
        unreachable!()
    };
    assert!(
        seed.failed > 0 && seed.failures.contains("HTTP 502"),
        "{}: the app's calls to a stopped OPA did not fail: {}",
        seed.mode,
        seed.failures
    );
    for r in [wait, classic, native] {
        assert!(r.requests > 100, "{}: only {} requests", r.mode, r.requests);
        assert_eq!(r.failed, 0, "{}: {}", r.mode, r.failures);
    }
    // OPA outlives the app: held by graceful's hook, or by the kubelet's
    // order for a native sidecar.
    for r in [classic, native, bare] {
        assert!(r.opa_after_app_s > 0.0, "{}: OPA exited before the app", r.mode);
    }
    // The kubelet's order alone does not hold the app.
    assert!(
        bare.failed > 0,
        "{}: nothing failed ({} requests) though the app stopped at the deletion",
        bare.mode,
        bare.requests
    );
    // The wait period is time: the pod takes it whatever its traffic.
    assert!(wait.pod_s >= 10.0, "{}: {:.2} s", wait.mode, wait.pod_s);
    for r in [classic, native] {
        assert!(
            r.pod_s < wait.pod_s,
            "{}: {:.2} s, not less than OPA's wait period ({:.2} s)",
            r.mode,
            r.pod_s,
            wait.pod_s
        );
    }
}
