use serde_json::Value;

use super::*;

/// deploy/base's DaemonSet pod template, as JSON.
fn daemonset_pod() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/base/daemonset.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let ds: Value = serde_norway::from_str(&text).unwrap();
    ds["spec"]["template"]["spec"].clone()
}

fn by_name(list: &Value) -> std::collections::BTreeMap<String, Value> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap().to_string(), v.clone()))
        .collect()
}

#[test]
fn the_preflight_pod_is_the_agents_pod_field_for_field_but_the_gate_and_probes() {
    let ds = daemonset_pod();
    let agent = &ds["containers"][0];
    let image = agent["image"].as_str().unwrap();
    let pod = serde_json::to_value(pod(&Spec {
        namespace: "graceful-system",
        run: "1",
        image,
        priority_class: ds["priorityClassName"].as_str().unwrap(),
        node: Some("node-a"),
    }))
    .unwrap();
    let spec = &pod["spec"];
    for field in ["hostPID", "priorityClassName", "tolerations"] {
        assert_eq!(spec[field], ds[field], "{field}");
    }
    let c = &spec["containers"][0];
    for field in [
        "name",
        "image",
        "imagePullPolicy",
        "securityContext",
        "resources",
        "terminationMessagePolicy",
    ] {
        assert_eq!(c[field], agent[field], "the container's {field}");
    }
    // Every mount and volume it has is the agent's; the agent's others
    // are the gate (a hostPath the kubelet would create) and the API
    // socket's emptyDir, which the doctor does not read.
    let (mine, theirs) = (by_name(&c["volumeMounts"]), by_name(&agent["volumeMounts"]));
    for (name, m) in &mine {
        assert_eq!(Some(m), theirs.get(name), "mount {name}");
    }
    let left: Vec<&String> = theirs.keys().filter(|k| !mine.contains_key(*k)).collect();
    assert_eq!(left, ["gate", "run"]);
    let (mine, theirs) = (by_name(&spec["volumes"]), by_name(&ds["volumes"]));
    for (name, v) in &mine {
        assert_eq!(Some(v), theirs.get(name), "volume {name}");
    }
    assert_eq!(spec["nodeName"], "node-a");
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(pod["metadata"]["labels"][RUN_LABEL], "1");
    assert_ne!(pod["metadata"]["labels"]["app.kubernetes.io/component"], "agent");
}

#[test]
fn without_a_class_and_node_the_dry_run_pod_names_neither() {
    let pod = serde_json::to_value(pod(&Spec {
        namespace: "ns",
        run: "1",
        image: "i",
        priority_class: "",
        node: None,
    }))
    .unwrap();
    assert!(pod["spec"].get("priorityClassName").is_none());
    assert!(pod["spec"].get("nodeName").is_none());
}
