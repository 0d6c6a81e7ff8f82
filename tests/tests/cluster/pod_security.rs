//! Pod Security admission, by the node's own API server (on since 1.25):
//! each example's pod, as its Deployment would create it, sent with
//! `--dry-run=server` into a namespace of the test's own that enforces a
//! level. The manifest tests (tests/tests/manifests/pod_security.rs) check
//! the same rules offline; these show what a real apiserver says.
//!
//! - The restricted examples (the httpGet gate; the socket gate with an
//!   image volume) are admitted under restricted, with no warning.
//! - Every exec-gate example is refused under baseline, for its hostPath.
//! - A preStop httpGet hook with `host` is refused under baseline from
//!   1.34 on (KEP-4940); 1.33 still admits it.

use graceful_tests::cluster::{workspace, Cluster, Namespace};
use serde_json::{json, Value};

/// The objects `kubectl kustomize deploy/examples/<example>` renders.
fn rendered(cluster: &Cluster, example: &str) -> Vec<Value> {
    render(cluster, &workspace().join("deploy/examples").join(example))
}

/// The objects `kubectl kustomize <dir>` renders.
pub(crate) fn render(cluster: &Cluster, dir: &std::path::Path) -> Vec<Value> {
    let yaml = cluster.kubectl(&["kustomize", &dir.to_string_lossy()]);
    serde_norway::Deserializer::from_str(&yaml)
        .map(|doc| <Value as serde::Deserialize>::deserialize(doc).expect("kustomize renders YAML"))
        .collect()
}

/// The pod that the example's Deployment would create, in no namespace.
fn pod_of(cluster: &Cluster, example: &str) -> Value {
    let objects = rendered(cluster, example);
    let d = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap_or_else(|| panic!("deploy/examples/{example} has no Deployment"));
    let template = &d["spec"]["template"];
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("psa-{example}"),
            "labels": template["metadata"]["labels"],
            "annotations": template["metadata"]["annotations"],
        },
        "spec": template["spec"],
    })
}

/// A namespace of the test's own that enforces (and warns at) `level`.
fn enforcing<'a>(cluster: &'a Cluster, level: &str) -> Namespace<'a> {
    let ns = Namespace::create(cluster, &format!("psa-{level}"));
    ns.kubectl(&[
        "label",
        "namespace",
        &ns.name,
        "--overwrite",
        &format!("pod-security.kubernetes.io/enforce={level}"),
        "pod-security.kubernetes.io/enforce-version=latest",
        &format!("pod-security.kubernetes.io/warn={level}"),
        "pod-security.kubernetes.io/warn-version=latest",
    ]);
    ns
}

/// `kubectl create --dry-run=server` of `pod` (or any object, a List of
/// them too) in `ns`: Ok(what kubectl printed on stderr, its warnings) if
/// admitted, Err(the refusal) if not.
pub(crate) fn admit(cluster: &Cluster, ns: &Namespace, pod: &Value) -> Result<String, String> {
    let out = cluster.kubectl_stdin(
        &[
            "-n",
            &ns.name,
            "create",
            "--dry-run=server",
            "-o",
            "name",
            "-f",
            "-",
        ],
        &pod.to_string(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() {
        Ok(stderr)
    } else {
        Err(stderr)
    }
}

fn server_minor(cluster: &Cluster) -> u32 {
    let v: Value = serde_json::from_str(&cluster.kubectl(&["version", "-o", "json"])).unwrap();
    v["serverVersion"]["minor"]
        .as_str()
        .and_then(|m| m.trim_end_matches('+').parse().ok())
        .expect("the API server's minor version")
}

#[test]
fn the_restricted_examples_are_admitted_under_restricted_with_no_warning() {
    let (cluster, _serial) = crate::node();
    let ns = enforcing(&cluster, "restricted");
    // The httpGet gate; the socket gate, with graceful's image as a volume.
    for example in ["restricted", "restricted-socket"] {
        let pod = pod_of(&cluster, example);
        let warnings = admit(&cluster, &ns, &pod)
            .unwrap_or_else(|e| panic!("{example} was refused under restricted: {e}"));
        assert!(
            warnings.is_empty(),
            "{example}: admitted with warnings: {warnings}"
        );
    }
}

#[test]
fn the_exec_gate_examples_are_refused_under_baseline_for_their_host_path() {
    let (cluster, _serial) = crate::node();
    let ns = enforcing(&cluster, "baseline");
    for example in ["web", "haproxy-waf", "mesh-proxy", "policy-sidecar"] {
        let pod = pod_of(&cluster, example);
        let refusal = admit(&cluster, &ns, &pod)
            .map(|w| panic!("{example}: admitted under baseline ({w})"))
            .unwrap_err();
        eprintln!("{example} under baseline: {refusal}");
        assert!(
            refusal.contains(r#"violates PodSecurity "baseline:latest""#)
                && refusal.contains(r#"hostPath volumes (volume "graceful")"#),
            "{example}: {refusal}"
        );
    }
    // The same pods are admitted where the level allows host paths.
    let privileged = enforcing(&cluster, "privileged");
    admit(&cluster, &privileged, &pod_of(&cluster, "web")).expect("web under privileged");
}

#[test]
fn a_hook_with_host_is_refused_under_baseline_from_1_34() {
    let (cluster, _serial) = crate::node();
    let ns = enforcing(&cluster, "baseline");
    let mut pod = pod_of(&cluster, "restricted");
    let hook = &mut pod["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"];
    assert!(
        hook.is_object(),
        "the restricted example has no httpGet preStop hook"
    );
    hook["host"] = json!("10.201.0.1");
    let minor = server_minor(&cluster);
    match admit(&cluster, &ns, &pod) {
        Err(refusal) if minor >= 34 => {
            eprintln!("a hook with host under baseline (1.{minor}): {refusal}");
            assert!(
                refusal.contains(r#"violates PodSecurity "baseline:latest""#)
                    && refusal.contains(r#"probe or lifecycle host (container "web" uses probe or lifecycle host "10.201.0.1")"#),
                "{refusal}"
            );
        }
        Ok(warnings) if minor < 34 => {
            eprintln!(
                "a hook with host under baseline: admitted by 1.{minor}, as before KEP-4940 ({warnings})"
            )
        }
        other => panic!("Kubernetes 1.{minor}: a hook with host under baseline: {other:?}"),
    }
}
