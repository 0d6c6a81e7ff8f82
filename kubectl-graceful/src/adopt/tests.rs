use serde_json::json;

use super::{apply_patch, rules, tuned_patch, Kind};

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
    t["metadata"]["annotations"]["graceful.dev/gate-port"] = " 07001".into();
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

#[test]
fn a_recommendation_sets_each_gates_max_and_the_grace_period() {
    // The exec gate adopt injects: its --max, the grace period.
    let mut t = template();
    rules::inject(&mut t, "privileged");
    assert_eq!(rules::tune(&mut t, 12, 17), ["web"]);
    assert_eq!(
        t["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"],
        json!(["/graceful/graceful-wait", "--policy", "drained", "--max", "12s"])
    );
    assert_eq!(t["spec"]["terminationGracePeriodSeconds"], 17);
    assert_eq!(
        t["spec"]["containers"][1]["lifecycle"]["preStop"]["exec"]["command"],
        json!(["sleep", "5"]),
        "a hook of its own is not graceful's"
    );
    // The httpGet gate: its max= parameter, the others kept.
    let mut t = template();
    rules::inject(&mut t, "restricted");
    rules::tune(&mut t, 40, 45);
    assert_eq!(
        t["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"]["path"],
        "/drain?policy=drained&max=40s"
    );
    // A team's own hooks: the socket gate's --max=, a graceful-wait with
    // no --max, an httpGet gate with no query; another path is not ours.
    // The annotations that win over a hook's max: set too, for graceful's
    // hooks alone.
    let mut t = json!({"metadata": {"annotations": {
        "graceful.dev/max": "1m", "graceful.dev/max.a": "2m", "graceful.dev/max.d": "3m", "graceful.dev/min": "1s"
    }}, "spec": {"containers": [
        {"name": "a", "lifecycle": {"preStop": {"exec": {"command": ["/graceful/graceful-wait", "--socket", "@graceful", "--max=1m"]}}}},
        {"name": "b", "lifecycle": {"preStop": {"exec": {"command": ["graceful-wait"]}}}},
        {"name": "c", "lifecycle": {"preStop": {"httpGet": {"path": "/drain", "port": 9711}}}},
        {"name": "d", "lifecycle": {"preStop": {"httpGet": {"path": "/quit?max=1s", "port": 80}}}},
        {"name": "e", "lifecycle": {"preStop": {"exec": {"command": ["/bin/graceful-wait-not", "--max", "1s"]}}}}
    ]}});
    assert_eq!(rules::tune(&mut t, 9, 14), ["a", "b", "c"]);
    let hook = |i: usize| t["spec"]["containers"][i]["lifecycle"]["preStop"].clone();
    assert_eq!(
        hook(0)["exec"]["command"],
        json!(["/graceful/graceful-wait", "--socket", "@graceful", "--max=9s"])
    );
    assert_eq!(
        hook(1)["exec"]["command"],
        json!(["graceful-wait", "--max", "9s"])
    );
    assert_eq!(hook(2)["httpGet"]["path"], "/drain?max=9s");
    assert_eq!(hook(3)["httpGet"]["path"], "/quit?max=1s");
    assert_eq!(hook(4)["exec"]["command"][2], "1s");
    assert_eq!(t["spec"]["terminationGracePeriodSeconds"], 14);
    assert_eq!(
        t["metadata"]["annotations"],
        json!({"graceful.dev/max": "9s", "graceful.dev/max.a": "9s", "graceful.dev/max.d": "3m", "graceful.dev/min": "1s"})
    );
    // No graceful hook: nothing changes, not the grace period either.
    let mut t = template();
    let before = t.clone();
    assert!(rules::tune(&mut t, 9, 14).is_empty());
    assert_eq!(t, before);
}

#[test]
fn a_tuned_patch_sends_every_field_of_graceful_so_none_adopt_set_is_dropped() {
    // Adopted before (the exec gate), then tuned: server-side apply drops
    // a field its manager sent before and omits now, so the volume, the
    // mount and the annotations go again with the new figures.
    let mut t = template();
    t["metadata"]["annotations"]["graceful.dev/settle"] = "2s".into();
    t["metadata"]["annotations"]["graceful.dev/max.web"] = "1m".into();
    rules::inject(&mut t, "privileged");
    let tuned = rules::tune(&mut t, 12, 17);
    let p = tuned_patch(Kind::StatefulSet, "db", "shop", &t, &tuned);
    assert_eq!(p["kind"], "StatefulSet");
    let spec = &p["spec"]["template"]["spec"];
    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(
        containers.len(),
        1,
        "not the container with a hook of its own: {p}"
    );
    assert_eq!(containers[0]["lifecycle"]["preStop"]["exec"]["command"][4], "12s");
    assert_eq!(containers[0]["volumeMounts"][0]["name"], "graceful");
    assert!(containers[0]["image"].is_null() && containers[0]["ports"].is_null());
    assert_eq!(spec["volumes"][0]["name"], "graceful");
    assert_eq!(spec["terminationGracePeriodSeconds"], 17);
    let a = p["spec"]["template"]["metadata"]["annotations"]
        .as_object()
        .unwrap();
    assert!(a.keys().all(|k| k.starts_with("graceful.dev/")), "{a:?}");
    assert_eq!(a["graceful.dev/injected"], "exec");
    assert_eq!(a["graceful.dev/max.web"], "12s", "the max tune set");
    assert!(
        !a.contains_key("graceful.dev/settle"),
        "the team's own setting is not sent, so adopt does not come to own it: {a:?}"
    );
}
