//! `kubectl graceful adopt` on a Deployment written with no hook, through
//! the node's API server, with no admission policy: it gets the gate that
//! fits (exec, in a namespace enforcing privileged), rolls, and its pod is
//! held by that gate at its deletion; `adopt --recommended` then writes
//! the `max` and grace period `recommend` proposes from that drain, and
//! again with another budget, and the gate's volume and mount the first
//! adopt set stay (server-side apply drops a field its manager stops
//! sending); a forged Event of a 23 h drain is not written past
//! `--up-to`. Nothing here needs MutatingAdmissionPolicy: the test runs on
//! any node of 1.33 to 1.37 (`GRACEFUL_KUBE_VERSION=1.33 cargo xtask test
//! -- -- adopt::`).

use graceful_tests::cluster::{pod::Pod, Namespace, TEST_APP_IMAGE};
use serde_json::Value;

use crate::kubectl_plugin::kubectl_graceful;

#[test]
fn adopt_writes_the_gate_then_the_max_and_grace_period_its_drains_call_for() {
    let (cluster, _serial) = crate::node();
    let ns = Namespace::create(&cluster, "adopt");
    ns.kubectl(&[
        "label",
        "namespace",
        &ns.name,
        "pod-security.kubernetes.io/enforce=privileged",
    ]);
    ns.apply(&format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: NAMESPACE}}\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      terminationGracePeriodSeconds: 10\n      containers:\n        - name: app\n          image: {TEST_APP_IMAGE}\n          ports: [{{containerPort: 8080}}, {{name: metrics, containerPort: 9090}}]\n"
    ));
    let plugin = |args: &[&str]| {
        let args = [args, &["-n", &ns.name, "-o", "json"]].concat();
        let (code, out, err) = kubectl_graceful(&cluster, None, &args);
        assert_eq!(code, 0, "kubectl graceful {args:?}: {out}{err}");
        serde_json::from_str::<Value>(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    let template = || ns.json(&["get", "deployment", "web"])["spec"]["template"].clone();
    let adopt = |extra: &[&str]| {
        let args = [&["adopt", "deploy/web", "--force-conflicts"], extra].concat();
        plugin(&args)[0]["result"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };

    // No drain yet: the gate, with the default max.
    let said = adopt(&["--recommended"]);
    assert_eq!(
        said,
        "deployment/web: got the exec gate (no drain of it measured yet: the default max)"
    );
    let t = template();
    let hook = &t["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"];
    assert_eq!(
        hook,
        &serde_json::json!(["/graceful/graceful-wait", "--policy", "drained", "--max", "25s"]),
        "{t}"
    );
    assert_eq!(t["spec"]["terminationGracePeriodSeconds"], 30, "{t}");
    ns.kubectl(&["rollout", "status", "deployment/web", "--timeout=90s"]);

    // Its pod, deleted, drains through the gate adopt wrote.
    let pod = Pod::wait_ready(&ns, "app=web", 1, 60).remove(0);
    ns.kubectl(&["scale", "deployment", "web", "--replicas=0"]);
    let rec = graceful_tests::wait_for(60, &format!("a drain of {} in recommend", pod.name), || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        plugin(&["recommend"])
            .as_array()?
            .iter()
            .find(|r| r["workload"] == "deployment/web")
            .cloned()
    });
    let (max_s, grace_s) = (
        rec["max_s"].as_u64().unwrap(),
        rec["grace_period_s"].as_u64().unwrap(),
    );
    assert_eq!(
        (&rec["drains"], &rec["at_deadline"], grace_s),
        (&1.into(), &0.into(), max_s + 5),
        "{rec}"
    );

    // The recommendation, written into the template of a workload opted
    // in already; then again with another budget.
    let said = adopt(&["--recommended"]);
    assert!(
        said.starts_with(&format!(
            "deployment/web: its hook got max {max_s}s and a grace period of {grace_s}s, from 1 drain(s)"
        )),
        "{said}"
    );
    let said = adopt(&["--recommended", "--budget", "9s"]);
    let t = template();
    let c = &t["spec"]["containers"][0];
    assert_eq!(
        (
            &c["lifecycle"]["preStop"]["exec"]["command"][4],
            &t["spec"]["terminationGracePeriodSeconds"]
        ),
        (&format!("{max_s}s").into(), &(max_s + 9).into()),
        "{said}: {t}"
    );
    let named = |v: &Value| {
        v.as_array()
            .into_iter()
            .flatten()
            .any(|m| m["name"] == "graceful")
    };
    assert!(
        named(&c["volumeMounts"])
            && named(&t["spec"]["volumes"])
            && t["metadata"]["annotations"]["graceful.dev/injected"] == "exec"
            && t["metadata"]["annotations"]["graceful.dev/ignore-ports"] == "9090",
        "a later adopt dropped a field the first set: {t}"
    );

    // Anyone allowed to create Events in the namespace can write a drain:
    // one forged of 23 h makes the proposal 46 h, which adopt does not
    // write past --up-to (10m): one line, exit 1, the template as it was.
    ns.apply(
        "apiVersion: v1\nkind: Event\nmetadata:\n  name: forged-drain\n  namespace: NAMESPACE\n  annotations: {graceful.dev/workload: deployment/web, graceful.dev/waited-ms: \"82800000\", graceful.dev/release-reason: drained}\n\
         involvedObject: {kind: Pod, name: web-forged, namespace: NAMESPACE}\nreason: DrainReleased\nmessage: forged\ntype: Normal\n\
         reportingComponent: graceful\nreportingInstance: forged\nfirstTimestamp: \"2026-12-07T00:00:00Z\"\nlastTimestamp: \"2026-12-07T00:00:00Z\"\n",
    );
    let forged = plugin(&["recommend"]);
    let forged = forged
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["workload"] == "deployment/web")
        .unwrap_or_else(|| panic!("{forged}"));
    assert!(
        forged["max_s"].as_u64().unwrap() > 86_400,
        "the forged drain counts: {forged}"
    );
    let args = [
        "adopt",
        "deploy/web",
        "--recommended",
        "--force-conflicts",
        "-n",
        &ns.name,
    ];
    let (code, out, err) = kubectl_graceful(&cluster, None, &args);
    assert_eq!((code, err.trim().lines().count()), (1, 1), "{out}{err}");
    assert!(err.contains("past --up-to 600s: left as it is"), "{err}");
    assert_eq!(template(), t, "the refused recommendation changed the template");

    eprintln!(
        "adopt --recommended after {} drained ({} ms): {said}; with a forged drain of 23 h: {}",
        pod.name,
        rec["longest_ms"],
        err.trim()
    );
}
