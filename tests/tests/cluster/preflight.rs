//! `kubectl graceful preflight` against the node, as before an install:
//! the node ready in graceful-system, where deploy/base's quota and
//! Pod Security admit the agent's pod; then each refusal the API server
//! can make here, made on purpose in a namespace of the test's own
//! (Pod Security at baseline, a quota that admits no pod of the agent's
//! priority class, as GKE's admission refuses one without a quota), and a
//! node whose pod cannot start (an image that is not the agent's). Every
//! run leaves no pod behind.

use std::time::Instant;

use graceful_tests::cluster::{Cluster, Namespace, AGENT_NAMESPACE, BUSYBOX_IMAGE};
use serde_json::Value;

use crate::kubectl_plugin::kubectl_graceful;

/// The preflight pods left in `ns`.
fn left(cluster: &Cluster, ns: &str) -> String {
    cluster.kubectl(&[
        "-n",
        ns,
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/component=preflight",
        "-o",
        "name",
    ])
}

/// `preflight ARGS -o json`: exit code and the answer.
fn preflight(cluster: &Cluster, args: &[&str]) -> (i32, Value, f64) {
    let start = Instant::now();
    let (code, out, err) = kubectl_graceful(cluster, None, &[&["preflight", "-o", "json"], args].concat());
    let took = start.elapsed().as_secs_f64();
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    (code, v, took)
}

fn check<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == name)
        .unwrap_or_else(|| panic!("no {name}: {list}"))
}

#[test]
fn preflight_passes_the_node_and_names_each_refusal_in_one_line() {
    let (cluster, _serial) = crate::node();
    let node = cluster.kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"]);

    // The node as it is: every line ok, as the table prints it.
    let start = Instant::now();
    let (code, out, err) = kubectl_graceful(&cluster, None, &["preflight"]);
    let took = start.elapsed().as_secs_f64();
    assert_eq!(code, 0, "{out}{err}");
    for line in ["ok   namespace", "ok   admission", "ok   image-volume"] {
        assert!(out.contains(line), "no {line:?}:\n{out}");
    }
    let row = out
        .lines()
        .find(|l| l.starts_with(node.as_str()))
        .unwrap_or_else(|| panic!("no line for {node}:\n{out}"));
    assert!(row.contains(" ready ") && row.contains("kernel "), "{row}");
    assert_eq!(left(&cluster, AGENT_NAMESPACE), "", "a preflight pod was left");
    let (code, v, _) = preflight(&cluster, &[]);
    assert_eq!(code, 0, "{v}");
    let findings = &v["nodes"][0]["findings"];
    for name in [
        "kernel",
        "btf",
        "bpffs",
        "lsm",
        "seccomp",
        "network",
        "programs",
        "image-volume",
    ] {
        assert_eq!(check(findings, name)["level"], "ok", "{name}: {findings}");
    }
    eprintln!("preflight of the node: {took:.1} s\n{out}");

    // Pod Security at baseline: the agent's pod is refused, in one line
    // that says which label to set; no node is checked.
    let ns = Namespace::create(&cluster, "preflight");
    ns.kubectl(&[
        "label",
        "namespace",
        &ns.name,
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    let (code, v, _) = preflight(&cluster, &["--agent-namespace", &ns.name]);
    assert_eq!(code, 1, "{v}");
    let admission = check(&v["cluster"], "admission");
    assert_eq!(admission["level"], "fail");
    let msg = admission["message"].as_str().unwrap();
    assert!(
        msg.contains("PodSecurity") && msg.contains("enforce=privileged"),
        "{msg}"
    );
    assert_eq!(v["nodes"], Value::Array(vec![]), "{v}");
    eprintln!("Pod Security baseline: {msg}");

    // A quota that admits no pod of the priority class: refused, and the
    // nodes are still checked, without the class.
    ns.kubectl(&[
        "label",
        "--overwrite",
        "namespace",
        &ns.name,
        "pod-security.kubernetes.io/enforce=privileged",
    ]);
    ns.apply(
        "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: no-critical-pods, namespace: NAMESPACE}\n\
         spec:\n  hard: {pods: \"0\"}\n  scopeSelector:\n    matchExpressions:\n\
         \x20     - {operator: In, scopeName: PriorityClass, values: [system-node-critical]}\n",
    );
    let (code, v, took) = preflight(&cluster, &["--agent-namespace", &ns.name]);
    assert_eq!(code, 1, "{v}");
    let msg = check(&v["cluster"], "admission")["message"].as_str().unwrap();
    assert!(
        msg.contains("exceeded quota") && msg.contains("resourceQuota.enabled"),
        "{msg}"
    );
    assert_eq!(v["nodes"][0]["ready"], true, "{v}");
    assert_eq!(left(&cluster, &ns.name), "");
    eprintln!("a quota without the class ({took:.1} s, the node checked without it): {msg}");

    // An image that is not the agent's: the node's line says the pod's
    // output is not the doctor's, and why.
    let (code, v, took) = preflight(
        &cluster,
        &["--agent-namespace", &ns.name, "--image", BUSYBOX_IMAGE],
    );
    assert_eq!(code, 1, "{v}");
    let pod = check(&v["nodes"][0]["findings"], "pod");
    assert_eq!(pod["level"], "fail", "{v}");
    eprintln!(
        "an image that is not the agent's ({took:.1} s): {}",
        pod["message"]
    );
    assert_eq!(left(&cluster, &ns.name), "");
}
