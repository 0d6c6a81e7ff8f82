//! Native sidecars (init containers with `restartPolicy: Always`, GA in
//! 1.33), on the node: the native form of the mesh-proxy example deleted
//! under 50 req/s with graceful's hook on the app and without any hook
//! (the kubelet's order alone). The policy-sidecar example's native form
//! runs the same two ways with the real OPA, in policy_opa.rs.
//!
//! What the kubelet's order gives by itself, and the test checks in both:
//! the sidecar gets its SIGTERM only once the app has exited, so the app's
//! calls through the proxy or to the policy engine are all over by then
//! (no `--after-containers`, no `--scope pod` hold on the sidecar). What it
//! does not give, and graceful adds: without a hook the app's own SIGTERM
//! comes at the deletion, while the load balancers still send it new
//! connections (here one that learns of the removal 3 s late, as load
//! balancers outside the cluster do), and those fail; with the app's hook
//! it comes after its last one, and none does.

use graceful_tests::{
    cluster::{Cluster, Namespace},
    rollout::load,
};

use crate::{
    examples::{assert_no_failures, status, terminate_one, Example, Exits, LATE},
    gate::events_of,
};

/// One form, deleted under load.
struct Run {
    form: &'static str,
    exits: Exits,
    load: load::Outcome,
    released: Vec<String>,
}

fn run(cluster: &Cluster, form: &'static str, ex: Example, before: impl FnOnce(std::net::SocketAddr)) -> Run {
    let ns = Namespace::create(cluster, ex.overlay);
    let (pod, exits, load) = terminate_one(cluster, &ns, ex, before);
    let released = events_of(&ns, &pod.uid)
        .into_iter()
        .map(|(r, m)| format!("{r}: {m}"))
        .collect();
    Run {
        form,
        exits,
        load,
        released,
    }
}

/// The table's lines, as the closing note and the operator guide show
/// them.
fn print(runs: &[Run], sidecar: &str) {
    eprintln!(
        "    {:<28} {:>8} {:>6} {:>16} {:>22}",
        "FORM", "REQUESTS", "FAILED", "APP EXITED AFTER", "SIDECAR EXITED AFTER APP"
    );
    for r in runs {
        eprintln!(
            "    {:<28} {:>8} {:>6} {:>14.2} s {:>20.2} s",
            r.form,
            r.load.requests,
            r.load.failed,
            r.exits.after_deletion("app"),
            r.exits.after_deletion(sidecar) - r.exits.after_deletion("app"),
        );
        if r.load.failed > 0 {
            eprintln!("      {} failed: {:?}", r.form, r.load.failures);
        }
    }
}

/// The kubelet's order in both forms; the app held and nothing failed with
/// graceful; without it the app stopped at the deletion, and requests
/// failed.
fn check(runs: &[Run], sidecar: &str) {
    print(runs, sidecar);
    let [graceful, bare] = runs else { unreachable!() };
    for r in runs {
        assert!(
            r.exits.of(sidecar) > r.exits.of("app"),
            "{}: the native sidecar {sidecar} exited before the app",
            r.form
        );
    }
    assert_no_failures(graceful.form, &graceful.load);
    assert!(
        graceful.exits.after_deletion("app") >= 2.0,
        "{}: the app exited {:.2} s after the deletion, before the hook's min (2 s)",
        graceful.form,
        graceful.exits.after_deletion("app")
    );
    assert!(
        graceful.released.iter().any(|e| e.starts_with("DrainReleased")),
        "{}: {:?}",
        graceful.form,
        graceful.released
    );
    assert!(
        bare.exits.after_deletion("app") < 1.5,
        "{}: the app exited {:.2} s after the deletion with no hook",
        bare.form,
        bare.exits.after_deletion("app")
    );
    assert!(
        !bare.released.iter().any(|e| e.starts_with("DrainReleased")),
        "{}: {:?}",
        bare.form,
        bare.released
    );
    assert!(
        bare.load.failed > 0,
        "{}: no request failed ({} sent) though the load balancer sent the pod new connections for {LATE:?}",
        bare.form,
        bare.load.requests
    );
}

#[test]
fn mesh_proxy_native_the_kubelet_keeps_the_proxy_and_graceful_holds_the_app() {
    let (cluster, _serial) = crate::node();
    let runs: Vec<Run> = [
        ("native + graceful", "mesh-proxy-native"),
        ("native, no hook", "mesh-proxy-native-bare"),
    ]
    .into_iter()
    .map(|(form, overlay)| {
        let ex = Example {
            overlay,
            selector: "app.kubernetes.io/name=mesh-app",
            pods: 2,
            backends: &[("app.kubernetes.io/name=web", "web", 3)],
            service: "mesh-app",
            late_lb: Some(LATE),
        };
        run(&cluster, form, ex, |svc| {
            assert_eq!(status(&cluster, svc, "GET", "/"), 200)
        })
    })
    .collect();
    check(&runs, "proxy");
}
