use serde_json::json;

use super::{apply_patch, rules, Kind};

/// A template of two containers: `web` without a hook (its metrics port
/// named), `side` with one of its own.
fn template() -> serde_json::Value {
    json!({
        "metadata": {"labels": {"app": "web"}, "annotations": {"prometheus.io/port": "9102"}},
        "spec": {
            "terminationGracePeriodSeconds": 10,
            "containers": [
                {"name": "web", "image": "nginx", "ports": [{"name": "metrics", "containerPort": 9090}]},
                {"name": "side", "image": "envoy", "lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}}}
            ]
        }
    })
}

#[test]
fn under_privileged_the_exec_gate_with_its_read_only_mount() {
    let mut t = template();
    assert_eq!(
        rules::inject(&mut t, "privileged"),
        rules::Outcome::Injected("exec")
    );
    let web = &t["spec"]["containers"][0];
    assert_eq!(
        web["lifecycle"]["preStop"]["exec"]["command"],
        json!(["/graceful/graceful-wait", "--policy", "drained", "--max", "25s"])
    );
    assert_eq!(
        web["volumeMounts"],
        json!([{"name": "graceful", "mountPath": "/graceful", "readOnly": true}])
    );
    assert_eq!(
        t["spec"]["containers"][1]["lifecycle"]["preStop"]["exec"]["command"][0],
        "sleep"
    );
    assert_eq!(t["spec"]["volumes"][0]["hostPath"]["path"], "/var/run/graceful");
    assert_eq!(t["spec"]["terminationGracePeriodSeconds"], 30);
    let a = &t["metadata"]["annotations"];
    assert_eq!(a["graceful.dev/injected"], "exec");
    assert_eq!(
        a["graceful.dev/inject-skipped"],
        "side: a preStop hook of its own, left as it is"
    );
    assert_eq!(a["graceful.dev/ignore-ports"], "9090,9102");
    assert!(a["graceful.dev/gate"].is_null());
}

#[test]
fn elsewhere_the_http_gate_on_the_pods_own_port_and_nothing_mounted() {
    let mut t = template();
    t["metadata"]["annotations"]["graceful.dev/gate-port"] = "7001".into();
    assert_eq!(
        rules::inject(&mut t, "restricted"),
        rules::Outcome::Injected("http")
    );
    let web = &t["spec"]["containers"][0];
    assert_eq!(
        web["lifecycle"]["preStop"]["httpGet"],
        json!({"path": "/drain?policy=drained&max=25s", "port": 7001})
    );
    assert!(web["volumeMounts"].is_null() && t["spec"]["volumes"].is_null());
    assert_eq!(t["metadata"]["annotations"]["graceful.dev/gate"], "http");
    // A volume of the pod's own named graceful: never the exec gate.
    let mut t = template();
    t["spec"]["volumes"] = json!([{"name": "graceful", "emptyDir": {}}]);
    t["metadata"]["annotations"]["graceful.dev/inject-gate"] = "exec".into();
    assert_eq!(
        rules::inject(&mut t, "privileged"),
        rules::Outcome::Injected("http")
    );
}

#[test]
fn opted_in_or_host_network_templates_are_left_alone() {
    let mut t = template();
    t["metadata"]["annotations"]["graceful.dev/gate"] = "http".into();
    let before = t.clone();
    assert!(matches!(
        rules::inject(&mut t, "privileged"),
        rules::Outcome::Left(_)
    ));
    assert_eq!(t, before);
    let mut t = template();
    t["spec"]["hostNetwork"] = true.into();
    assert!(matches!(rules::inject(&mut t, ""), rules::Outcome::Left(w) if w.contains("host network")));
    // Every container with a hook of its own: only the annotations.
    let mut t = template();
    t["spec"]["containers"] = json!([t["spec"]["containers"][1]]);
    assert_eq!(
        rules::inject(&mut t, "privileged"),
        rules::Outcome::Injected("none")
    );
    assert_eq!(t["spec"]["terminationGracePeriodSeconds"], 10);
}

#[test]
fn the_apply_patch_names_only_what_adopt_adds() {
    let before = template();
    let mut after = before.clone();
    rules::inject(&mut after, "privileged");
    let p = apply_patch(Kind::Deployment, "web", "shop", &before, &after);
    assert_eq!(p["kind"], "Deployment");
    let t = &p["spec"]["template"];
    // Not the labels, not prometheus.io/port, not the images or ports.
    assert!(t["metadata"]["labels"].is_null());
    assert!(t["metadata"]["annotations"]["prometheus.io/port"].is_null());
    assert_eq!(t["spec"]["containers"].as_array().unwrap().len(), 1, "{p}");
    assert_eq!(
        t["spec"]["containers"][0]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["lifecycle", "name", "volumeMounts"]
    );
    assert_eq!(t["spec"]["volumes"].as_array().unwrap().len(), 1);
    assert_eq!(t["spec"]["terminationGracePeriodSeconds"], 30);
}
