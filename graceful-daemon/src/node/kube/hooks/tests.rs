use k8s_openapi::api::core::v1::PodSpec;

use super::*;

fn spec(json: serde_json::Value) -> PodSpec {
    serde_json::from_value(json).unwrap()
}

#[test]
fn every_containers_prestop_httpget_with_its_named_port_resolved() {
    let s = spec(serde_json::json!({
        "initContainers": [{"name": "proxy", "restartPolicy": "Always",
            "lifecycle": {"preStop": {"httpGet": {"path": "/drain?max=5s", "port": 9711}}}}],
        "containers": [
            {"name": "app", "ports": [{"name": "gate", "containerPort": 9712}],
             "lifecycle": {"preStop": {"httpGet": {"path": "drain?policy=quiet", "port": "gate"}}}},
            {"name": "exec", "lifecycle": {"preStop": {"exec": {"command": ["/graceful/graceful-wait"]}}}},
            {"name": "unnamed", "lifecycle": {"preStop": {"httpGet": {"path": "/drain", "port": "nope"}}}},
        ]
    }));
    assert_eq!(
        of(&s),
        vec![
            SpecHook {
                container: "proxy".into(),
                port: 9711,
                target: "/drain?max=5s".into()
            },
            SpecHook {
                container: "app".into(),
                port: 9712,
                target: "/drain?policy=quiet".into()
            },
        ]
    );
}

#[test]
fn a_hook_istio_rewrote_is_read_from_pilot_agents_probers() {
    // As tests/overlays/istio-sidecar has it, from the injector.
    let s = spec(serde_json::json!({
        "containers": [
            {"name": "web", "lifecycle": {"preStop": {"httpGet": {"path": "/app-lifecycle/web/prestopz", "port": 15020}}}},
            {"name": "istio-proxy", "env": [{"name": "ISTIO_KUBE_APP_PROBERS",
                "value": "{\"/app-lifecycle/web/prestopz\":{\"httpGet\":{\"path\":\"/drain?policy=drained&min=3s&max=25s\",\"port\":9711}},\"/app-health/web/readyz\":{\"httpGet\":{\"path\":\"/ready\",\"port\":8080}}}"}]},
        ]
    }));
    assert_eq!(
        of(&s),
        vec![
            SpecHook {
                container: "web".into(),
                port: 15020,
                target: "/app-lifecycle/web/prestopz".into()
            },
            SpecHook {
                container: "web".into(),
                port: 9711,
                target: "/drain?policy=drained&min=3s&max=25s".into()
            },
        ]
    );
}

#[test]
fn probers_that_do_not_parse_give_no_hook_and_no_panic() {
    for value in [
        "",
        "[]",
        "{\"/app-lifecycle/web/prestopz\": 7}",
        "{\"/app-lifecycle/ghost/prestopz\":{\"httpGet\":{\"port\":1}}}",
    ] {
        let s = spec(serde_json::json!({
            "containers": [{"name": "istio-proxy", "env": [{"name": "ISTIO_KUBE_APP_PROBERS", "value": value}]}]
        }));
        assert_eq!(of(&s), vec![], "{value}");
    }
}
