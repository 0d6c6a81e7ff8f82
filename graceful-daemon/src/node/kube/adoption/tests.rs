use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::node::kube::PodInfo;

fn pod(v: serde_json::Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn info(v: serde_json::Value) -> PodInfo {
    PodInfo::from_pod(&pod(v)).unwrap()
}

fn plain(ns: &str, labels: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": "web-1", "namespace": ns, "uid": "u1", "labels": labels},
        "spec": {"containers": [{"name": "web", "lifecycle": {"preStop": {"exec": {"command": ["sleep", "15"]}}}}]}
    })
}

#[test]
fn a_pod_opts_in_with_anything_of_gracefuls() {
    assert!(!info(plain("shop", serde_json::json!({"app": "web"}))).opted_in);
    let mut v = plain("shop", serde_json::json!({}));
    v["metadata"]["annotations"] = serde_json::json!({"graceful.dev/gate": "http"});
    assert!(info(v).opted_in, "the httpGet gate's annotation");
    let v = plain("shop", serde_json::json!({"graceful.dev/inject": "enabled"}));
    assert!(info(v).opted_in, "injection's label");
    let mut v = plain("shop", serde_json::json!({}));
    v["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"] =
        serde_json::json!(["/graceful/graceful-wait", "--max", "25s"]);
    assert!(info(v).opted_in, "the exec gate");
    let mut v = plain("shop", serde_json::json!({}));
    v["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"] =
        serde_json::json!(["sh", "-c", "graceful-wait"]);
    assert!(!info(v).opted_in, "a word of a shell's script is not the hook");
    let mut v = plain("shop", serde_json::json!({}));
    v["metadata"]["annotations"] = serde_json::json!({"example.com/graceful.dev": "x"});
    assert!(!info(v).opted_in, "only the prefix counts");
}

#[test]
fn the_workload_is_the_controller_with_deployments_named() {
    let owned = |kind: &str, name: &str, hash: Option<&str>| {
        let mut v = plain("shop", serde_json::json!({}));
        v["metadata"]["ownerReferences"] = serde_json::json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "o", "controller": true}]);
        if let Some(h) = hash {
            v["metadata"]["labels"] = serde_json::json!({"pod-template-hash": h});
        }
        info(v).workload
    };
    assert_eq!(
        owned("ReplicaSet", "checkout-84b7c9d5f6", Some("84b7c9d5f6")),
        "deployment/checkout"
    );
    assert_eq!(owned("ReplicaSet", "checkout", None), "replicaset/checkout");
    assert_eq!(owned("StatefulSet", "db", None), "statefulset/db");
    // A CronJob's runs are one workload, the CronJob; other Jobs their own.
    assert_eq!(owned("Job", "backup-29412345", None), "cronjob/backup");
    assert_eq!(owned("Job", "db-backup-29412346", None), "cronjob/db-backup");
    for job in [
        "migrate",
        "migrate-1",
        "db-20261207",
        "x-294123456",
        "x-2941234a",
        "-29412345",
    ] {
        assert_eq!(owned("Job", job, None), format!("job/{job}"), "{job}");
    }
    assert_eq!(info(plain("shop", serde_json::json!({}))).workload, NO_CONTROLLER);
    // An owner that is not the controller names nothing.
    let mut v = plain("shop", serde_json::json!({}));
    v["metadata"]["ownerReferences"] =
        serde_json::json!([{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "o"}]);
    assert_eq!(info(v).workload, NO_CONTROLLER);
    // A controller a bare pod's author invented, unprintable or huge:
    // no workload.
    for (kind, name) in [
        ("Deploy\u{1b}[2J", "web"),
        ("ReplicaSet", "web\nnext"),
        ("StatefulSet", &"a".repeat(300)),
    ] {
        let mut v = plain("shop", serde_json::json!({}));
        v["metadata"]["ownerReferences"] = serde_json::json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "o", "controller": true}]);
        assert_eq!(info(v).workload, NO_CONTROLLER, "{kind:?} {name:?}");
    }
}
