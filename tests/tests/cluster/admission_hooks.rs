//! graceful's hook policy (deploy/admission/hook-policy.yaml; the chart's
//! `admission.hooks`) on the node's real API server, with `--dry-run=server`
//! into a namespace of the test's own:
//!
//! - each rule reports an object made to break it, a pod or a workload's
//!   template, naming the field and the fix: a deadline that with the
//!   agent's 5 s budget outlasts the grace period (graceful-wait's `--max`,
//!   an httpGet hook's `max=`, the `graceful.dev/max` annotation, a native
//!   sidecar's hook), a gate annotation without its hook or a hook without
//!   its annotation (httpGet and socket), a gate that is no gate, a gate
//!   port that is no port or that a container declares, a gate on a
//!   hostNetwork pod, an httpGet gate hook that a classic Istio or Linkerd
//!   sidecar relays and would cut;
//! - the deadlines that fit, to the second, and the meshed pods whose hook
//!   reaches the gate directly or through a native sidecar, are not
//!   reported;
//! - every workload of deploy/examples is admitted without a word from it;
//! - a tenant's oversized annotation (a 240,000-byte port list) is
//!   answered within seconds, and the next object is checked as before;
//! - with the binding's actions set to Deny, a broken object is refused
//!   and the examples still pass.

use graceful_tests::cluster::{workspace, Cluster, Namespace};
use serde_json::{json, Value};

use crate::pod_security::admit;

/// What VAP warnings and refusals start with for this policy.
const POLICY: &str = "ValidatingAdmissionPolicy 'graceful-hooks'";

/// A pod with one container `app`, whose preStop is `pre_stop` (or none),
/// with `annotations` and `grace` seconds.
fn pod(name: &str, annotations: Value, grace: u32, pre_stop: Option<Value>) -> Value {
    let mut app = json!({"name": "app", "image": "busybox"});
    if let Some(p) = pre_stop {
        app["lifecycle"] = json!({"preStop": p});
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"terminationGracePeriodSeconds": grace, "containers": [app]},
    })
}

fn exec(args: &[&str]) -> Value {
    let cmd: Vec<&str> = std::iter::once("/graceful/graceful-wait")
        .chain(args.iter().copied())
        .collect();
    json!({"exec": {"command": cmd}})
}

fn http(path: &str, port: u16) -> Value {
    json!({"httpGet": {"path": path, "port": port}})
}

/// `p`'s pod spec and metadata as a Deployment's template, or a CronJob's.
fn as_workload(kind: &str, p: &Value) -> Value {
    let template = json!({"metadata": {"labels": {"app": "w"}, "annotations": p["metadata"]["annotations"]}, "spec": p["spec"]});
    let name = p["metadata"]["name"].as_str().unwrap();
    match kind {
        "Deployment" => json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": template},
        }),
        _ => {
            let mut template = template;
            template["spec"]["restartPolicy"] = json!("Never");
            json!({
                "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
                "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": template}}},
            })
        }
    }
}

/// Every workload of every example, in no namespace.
fn example_workloads(cluster: &Cluster) -> Vec<(String, Value)> {
    let dir = workspace().join("deploy/examples");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let example = entry.file_name().to_string_lossy().into_owned();
        for mut o in crate::pod_security::render(cluster, &entry.path()) {
            if ["Deployment", "StatefulSet", "DaemonSet"].contains(&o["kind"].as_str().unwrap_or("")) {
                o["metadata"].as_object_mut().unwrap().remove("namespace");
                out.push((example.clone(), o));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn each_broken_hook_is_reported_at_admission_and_every_example_passes() {
    let (cluster, _serial) = crate::node();
    let policy = workspace().join("deploy/admission");
    cluster.kubectl(&["apply", "-k", policy.to_str().unwrap()]);
    let ns = Namespace::create(&cluster, "hookpolicy");
    let result = || {
        let no = json!({});
        let gate_http = json!({"graceful.dev/gate": "http"});
        let gate_socket = json!({"graceful.dev/gate": "socket"});
        let socket_hook = exec(&["--socket", "@graceful.dev/gate", "--max", "20s"]);
        // The policy takes a moment to be in force after it is made.
        let first = pod("max", no.clone(), 35, Some(exec(&["--max", "40s"])));
        let warned = graceful_tests::wait_for(30, "the hook policy to be in force", || {
            admit(&cluster, &ns, &first).ok().filter(|w| w.contains(POLICY))
        });
        assert!(
            warned.contains(
                "container app: its graceful hook may hold SIGTERM for 40s, and the agent keeps 5s of the grace period \
                 for the app after it, but terminationGracePeriodSeconds is 35"
            ),
            "{warned}"
        );
        let mut sidecar = pod("sidecar", no.clone(), 30, None);
        sidecar["spec"]["initContainers"] = json!([{
            "name": "proxy", "image": "busybox", "restartPolicy": "Always",
            "lifecycle": {"preStop": exec(&["--max=26s"])},
        }]);
        let mut host_network = pod("hostnet", gate_http.clone(), 30, Some(http("/drain", 9711)));
        host_network["spec"]["hostNetwork"] = json!(true);
        // A mesh's sidecar, as its injector leaves the pod: a container
        // beside the app (classic), or a native sidecar.
        let meshed = |name: &str, annotations: Value, proxy: &str, native: bool| {
            let mut p = pod(name, annotations, 30, Some(http("/drain", 9711)));
            let c = json!({"name": proxy, "image": "busybox"});
            if native {
                let mut c = c;
                c["restartPolicy"] = json!("Always");
                p["spec"]["initContainers"] = json!([c]);
            } else {
                p["spec"]["containers"].as_array_mut().unwrap().push(c);
            }
            p
        };
        // A hook Istio's injector rewrote to pilot-agent, the original in
        // the proxy's ISTIO_KUBE_APP_PROBERS, its `&` as Go's JSON writes it.
        let mut rewritten = pod(
            "istio-rewritten-hook",
            gate_http.clone(),
            30,
            Some(http("/app-lifecycle/app/prestopz", 15020)),
        );
        rewritten["spec"]["containers"].as_array_mut().unwrap().push(json!({
            "name": "istio-proxy", "image": "busybox",
            "env": [{"name": "ISTIO_KUBE_APP_PROBERS",
                     "value": r#"{"/app-lifecycle/app/prestopz":{"httpGet":{"path":"/drain?max=40s\u0026policy=drained","port":9711}}}"#}],
        }));
        let mut sidecar_port = pod("sidecar-port", gate_http.clone(), 30, Some(http("/drain", 9711)));
        sidecar_port["spec"]["initContainers"] = json!([{
            "name": "proxy", "image": "busybox", "restartPolicy": "Always", "ports": [{"containerPort": 9711}],
        }]);
        let mut declared = pod("declared", gate_http.clone(), 30, Some(http("/drain", 9711)));
        declared["spec"]["containers"][0]["ports"] = json!([{"containerPort": 9711}]);
        let broken = [
            (pod("max-eq", no.clone(), 35, Some(exec(&["--max=31s"]))), "may hold SIGTERM for 31s"),
            (pod("bare", no.clone(), 30, Some(exec(&["--max", "40"]))), "may hold SIGTERM for 40,"),
            (
                pod("annotated", json!({"graceful.dev/max": "1m"}), 60, Some(exec(&["--max", "10s"]))),
                "may hold SIGTERM for 1m,",
            ),
            (
                pod("http-max", gate_http.clone(), 30, Some(http("/drain?policy=drained&max=30s", 9711))),
                "may hold SIGTERM for 30s",
            ),
            (sidecar, "container proxy: its graceful hook may hold SIGTERM for 26s"),
            (
                pod("typo", json!({"graceful.dev/gate": "htpp"}), 30, Some(http("/drain", 9711))),
                "annotation graceful.dev/gate: \"htpp\" is not a gate",
            ),
            (host_network, "a hostNetwork pod shares the node's network namespace"),
            (
                pod("http-no-hook", gate_http.clone(), 30, None),
                "graceful.dev/gate: http, but no container has a preStop httpGet to /drain on port 9711",
            ),
            (
                pod(
                    "http-other-port",
                    json!({"graceful.dev/gate": "http", "graceful.dev/gate-port": "9712"}),
                    30,
                    Some(http("/drain", 9711)),
                ),
                "no container has a preStop httpGet to /drain on port 9712",
            ),
            (
                pod("http-no-annotation", no.clone(), 30, Some(http("/drain?max=10s", 9711))),
                "container app has a preStop httpGet to /drain on port 9711, graceful's gate, but the pod has no annotation graceful.dev/gate: http",
            ),
            (
                pod("socket-no-hook", gate_socket.clone(), 30, Some(exec(&["--max", "20s"]))),
                "graceful.dev/gate: socket, but no container's preStop runs graceful-wait --socket @graceful.dev/gate",
            ),
            (
                pod("socket-no-annotation", no.clone(), 30, Some(socket_hook.clone())),
                "container app runs graceful-wait --socket @graceful.dev/gate, but the pod has no annotation graceful.dev/gate: socket",
            ),
            (
                pod(
                    "bad-port",
                    json!({"graceful.dev/gate": "http", "graceful.dev/gate-port": "99999"}),
                    30,
                    Some(http("/drain", 9711)),
                ),
                "annotation graceful.dev/gate-port: \"99999\" is not a port",
            ),
            (declared, "container app declares port 9711, the gate's port"),
            (sidecar_port, "container proxy declares port 9711, the gate's port"),
            (rewritten.clone(), "Istio's sidecar relays this pod's preStop hook"),
            (rewritten, "container app: its graceful hook may hold SIGTERM for 40s"),
            (
                // An annotation that is no duration is skipped, as the agent
                // skips it: the hook's own 60s stands.
                pod("bad-annotation", json!({"graceful.dev/max": "30 s"}), 30, Some(exec(&["--max", "60s"]))),
                "may hold SIGTERM for 60s",
            ),
            (
                // The agent reads no `*` in a skip list.
                meshed(
                    "linkerd-star",
                    json!({"graceful.dev/gate": "http", "config.linkerd.io/skip-inbound-ports": "*"}),
                    "linkerd-proxy",
                    false,
                ),
                "Linkerd's proxy relays this pod's preStop hook",
            ),
            (
                meshed("istio", gate_http.clone(), "istio-proxy", false),
                "Istio's sidecar relays this pod's preStop hook to the httpGet gate (port 9711); it stops at the deletion and cuts the hook",
            ),
            (
                meshed(
                    "istio-rewritten",
                    json!({"graceful.dev/gate": "http", "traffic.sidecar.istio.io/excludeInboundPorts": "9711"}),
                    "istio-proxy",
                    false,
                ),
                "Istio's sidecar relays this pod's preStop hook",
            ),
            (
                meshed("linkerd", gate_http.clone(), "linkerd-proxy", false),
                "Linkerd's proxy relays this pod's preStop hook to the httpGet gate (port 9711) and cuts it",
            ),
        ];
        let mut figures = Vec::new();
        for (object, want) in &broken {
            let name = object["metadata"]["name"].as_str().unwrap();
            let w =
                admit(&cluster, &ns, object).unwrap_or_else(|e| panic!("{name}: refused under Warn: {e}"));
            assert!(
                w.contains(POLICY) && w.contains(want),
                "{name}: wanted {want:?}, got:\n{w}"
            );
            figures.push(name.to_string());
        }
        // The same through a workload's template.
        for kind in ["Deployment", "CronJob"] {
            let w = admit(&cluster, &ns, &as_workload(kind, &first)).unwrap();
            assert!(
                w.contains("its graceful hook may hold SIGTERM for 40s"),
                "{kind}: {w}"
            );
        }
        // What fits, to the second, and the gates done right.
        let fine = [
            pod("fits", no.clone(), 35, Some(exec(&["--max", "30s"]))),
            pod("fits-eq", no.clone(), 35, Some(exec(&["--max=30s"]))),
            pod("default", no.clone(), 10, Some(exec(&["--policy", "drained"]))),
            pod(
                "http-ok",
                gate_http.clone(),
                35,
                Some(http("/drain?policy=drained&max=25s", 9711)),
            ),
            pod("socket-ok", gate_socket.clone(), 30, Some(socket_hook.clone())),
            pod("plain", no.clone(), 30, None),
            meshed(
                "istio-excluded",
                json!({
                    "graceful.dev/gate": "http",
                    "traffic.sidecar.istio.io/excludeInboundPorts": "15020,9711",
                    "sidecar.istio.io/rewriteAppHTTPProbers": "false",
                }),
                "istio-proxy",
                false,
            ),
            meshed("istio-native", gate_http.clone(), "istio-proxy", true),
            // The container's own annotation wins over the pod's.
            pod(
                "per-container",
                json!({"graceful.dev/max": "40s", "graceful.dev/max.app": "20s"}),
                30,
                Some(exec(&["--policy", "drained"])),
            ),
            // graceful-wait takes its socket from GRACEFUL_SOCKET too.
            {
                let mut p = pod(
                    "socket-env",
                    gate_socket.clone(),
                    30,
                    Some(exec(&["--max", "20s"])),
                );
                p["spec"]["containers"][0]["env"] =
                    json!([{"name": "GRACEFUL_SOCKET", "value": "@graceful.dev/gate"}]);
                p
            },
            pod(
                "port-09711",
                json!({"graceful.dev/gate": "http", "graceful.dev/gate-port": "09711"}),
                30,
                Some(http("/drain", 9711)),
            ),
            meshed(
                "linkerd-skipped",
                json!({"graceful.dev/gate": "http", "config.linkerd.io/skip-inbound-ports": "9000-9999"}),
                "linkerd-proxy",
                false,
            ),
        ];
        for object in &fine {
            let name = object["metadata"]["name"].as_str().unwrap();
            let w = admit(&cluster, &ns, object).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!w.contains(POLICY), "{name}: reported:\n{w}");
        }
        // A tenant's oversized input: a port list near the API server's
        // 256 KiB limit on annotations, which the policy splits. CEL's cost
        // limit bounds the work; the policy fails open on its own object
        // (these are warnings, not a boundary), and answers the next
        // object as before.
        let huge = "9000-9001,".repeat(24_000);
        let started = std::time::Instant::now();
        let oversized = meshed(
            "oversized",
            json!({"graceful.dev/gate": "http", "config.linkerd.io/skip-inbound-ports": huge}),
            "linkerd-proxy",
            false,
        );
        admit(&cluster, &ns, &oversized)
            .unwrap_or_else(|e| panic!("an oversized annotation was refused: {e}"));
        let oversized_ms = started.elapsed().as_millis();
        assert!(
            oversized_ms < 10_000,
            "the oversized object took {oversized_ms} ms"
        );
        let after = admit(&cluster, &ns, &first).unwrap();
        assert!(
            after.contains("may hold SIGTERM for 40s"),
            "after the oversized object: {after}"
        );
        let examples = example_workloads(&cluster);
        assert!(examples.len() >= 8, "{examples:?}");
        for (example, object) in &examples {
            let w = admit(&cluster, &ns, object).unwrap_or_else(|e| panic!("{example}: {e}"));
            assert!(!w.contains(POLICY), "deploy/examples/{example}: reported:\n{w}");
        }
        // Deny: the binding's actions changed, a broken object refused.
        cluster.kubectl(&[
            "patch",
            "validatingadmissionpolicybinding",
            "graceful-hooks",
            "--type=merge",
            "-p",
            r#"{"spec":{"validationActions":["Deny"]}}"#,
        ]);
        let refused =
            graceful_tests::wait_for(30, "Deny to be in force", || admit(&cluster, &ns, &first).err());
        assert!(refused.contains("may hold SIGTERM for 40s"), "{refused}");
        for (example, object) in &examples {
            admit(&cluster, &ns, object)
                .unwrap_or_else(|e| panic!("deploy/examples/{example} refused under Deny: {e}"));
        }
        (figures.len(), examples.len(), refused, oversized_ms)
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(result));
    cluster.kubectl(&["delete", "-k", policy.to_str().unwrap(), "--ignore-not-found"]);
    let (broken, examples, refused, oversized_ms) = outcome.unwrap_or_else(|e| std::panic::resume_unwind(e));
    eprintln!(
        "hook policy: {broken} broken objects reported (and a Deployment and a CronJob), 12 right ones and \
         {examples} example workloads not; a 240,000-byte port list answered in {oversized_ms} ms; under Deny: {}",
        refused.lines().next().unwrap_or_default()
    );
}
