use std::collections::BTreeMap;

use super::*;

/// A pod opted in to the httpGet gate, with these annotations and, beside
/// its `web` container, these (name, native sidecar?) containers.
fn pod(annotations: &[(&str, &str)], sidecars: &[(&str, bool)]) -> PodInfo {
    let mut init = Vec::new();
    let mut containers = vec![serde_json::json!({"name": "web"})];
    for (name, native) in sidecars {
        if *native {
            init.push(serde_json::json!({"name": name, "restartPolicy": "Always"}));
        } else {
            containers.push(serde_json::json!({"name": name}));
        }
    }
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1"},
        "spec": {"initContainers": init, "containers": containers},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    let mut p = PodInfo::from_pod(&pod).unwrap();
    let mut a: BTreeMap<String, String> = [("graceful.dev/gate".to_string(), "http".to_string())].into();
    a.extend(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    p.annotations = a;
    p
}

#[test]
fn each_mesh_is_known_by_what_its_injector_leaves() {
    assert_eq!(of(&pod(&[], &[]), 9711), None);
    let istio = of(
        &pod(&[("sidecar.istio.io/status", "{}")], &[("istio-proxy", false)]),
        9711,
    );
    assert_eq!(
        istio,
        Some(Mesh::IstioSidecar {
            port_excluded: false,
            rewritten: true,
            native: false
        })
    );
    // The injector's native form: istio-proxy an init container that restarts.
    let native = of(&pod(&[], &[("istio-proxy", true)]), 9711).unwrap();
    assert!(
        matches!(native, Mesh::IstioSidecar { native: true, .. }),
        "{native:?}"
    );
    let linkerd = of(&pod(&[("linkerd.io/proxy-version", "edge-25.1.1")], &[]), 9711);
    assert_eq!(
        linkerd,
        Some(Mesh::Linkerd {
            port_skipped: false,
            native: false
        })
    );
    // Enrolled in ambient: no sidecar, and ambient wins.
    let ambient = of(&pod(&[("ambient.istio.io/redirection", "enabled")], &[]), 9711);
    assert_eq!(ambient, Some(Mesh::IstioAmbient));
    assert_eq!(
        of(&pod(&[("ambient.istio.io/redirection", "disabled")], &[]), 9711),
        None
    );
}

#[test]
fn the_opt_outs_take_the_proxy_off_the_hooks_path() {
    let istio = |a: &[(&str, &str)]| of(&pod(a, &[("istio-proxy", false)]), 9711).unwrap();
    // Rewritten by default: pilot-agent relays the hook, whatever the capture.
    assert!(istio(&[]).proxied());
    assert!(istio(&[("traffic.sidecar.istio.io/excludeInboundPorts", "15090, 9711")]).proxied());
    // Both opt-outs: the kubelet reaches the gate itself.
    let direct = istio(&[
        ("traffic.sidecar.istio.io/excludeInboundPorts", "9000-9999"),
        ("sidecar.istio.io/rewriteAppHTTPProbers", "false"),
    ]);
    assert!(!direct.proxied(), "{direct:?}");
    // Captured only where listed.
    let listed = istio(&[
        ("traffic.sidecar.istio.io/includeInboundPorts", "8080"),
        ("sidecar.istio.io/rewriteAppHTTPProbers", "false"),
    ]);
    assert!(!listed.proxied());
    let all = istio(&[
        ("traffic.sidecar.istio.io/includeInboundPorts", "*"),
        ("sidecar.istio.io/rewriteAppHTTPProbers", "false"),
    ]);
    assert!(all.proxied());
    let linkerd = |a: &[(&str, &str)]| of(&pod(a, &[("linkerd-proxy", false)]), 9711).unwrap();
    assert!(linkerd(&[]).proxied());
    assert!(!linkerd(&[("config.linkerd.io/skip-inbound-ports", "4190,9711")]).proxied());
    assert!(!Mesh::IstioAmbient.proxied());
}

#[test]
fn a_classic_sidecar_that_relays_the_hook_is_warned_of_with_the_annotations_to_add() {
    use crate::serve::httpgate::optin::mesh_warning as warning_for;
    let w = warning_for(&pod(&[], &[("istio-proxy", false)])).unwrap();
    assert!(
        w.contains("traffic.sidecar.istio.io/excludeInboundPorts: \"9711\"")
            && w.contains("sidecar.istio.io/rewriteAppHTTPProbers: \"false\"")
            && w.contains("graceful.dev/gate: socket"),
        "{w}"
    );
    let w = warning_for(&pod(
        &[("graceful.dev/gate-port", "9800")],
        &[("linkerd-proxy", false)],
    ))
    .unwrap();
    assert!(
        w.contains("config.linkerd.io/skip-inbound-ports: \"9800\""),
        "{w}"
    );
    // Native sidecars outlive the app's hook; opted out, nothing relays it;
    // ambient has no proxy in the pod; the socket gate has no port.
    for quiet in [
        pod(&[], &[("istio-proxy", true)]),
        pod(
            &[("config.linkerd.io/skip-inbound-ports", "9711")],
            &[("linkerd-proxy", false)],
        ),
        pod(&[("ambient.istio.io/redirection", "enabled")], &[]),
        pod(&[("graceful.dev/gate", "socket")], &[("istio-proxy", false)]),
    ] {
        assert_eq!(warning_for(&quiet), None, "{:?}", quiet.annotations);
    }
}

#[test]
fn only_ambients_own_address_stands_for_the_node() {
    let v4: IpAddr = "169.254.7.127".parse().unwrap();
    let v6: IpAddr = "fd16:9254:7127:1337:ffff:ffff:ffff:ffff".parse().unwrap();
    let mapped: IpAddr = "::ffff:169.254.7.127".parse().unwrap();
    for ip in [v4, v6, mapped] {
        assert!(Mesh::IstioAmbient.node_alias(ip), "{ip}");
    }
    assert!(!Mesh::IstioAmbient.node_alias("169.254.7.128".parse().unwrap()));
    let sidecar = Mesh::IstioSidecar {
        port_excluded: false,
        rewritten: true,
        native: false,
    };
    assert!(!sidecar.node_alias(v4));
}

#[test]
fn a_drain_leaves_out_the_proxys_own_ports() {
    assert_eq!(
        own_ports(&pod(&[], &[("istio-proxy", true)])),
        &[15020, 15021, 15090]
    );
    assert_eq!(
        own_ports(&pod(&[("linkerd.io/proxy-version", "x")], &[])),
        &[4191]
    );
    assert!(own_ports(&pod(&[("ambient.istio.io/redirection", "enabled")], &[])).is_empty());
    assert!(own_ports(&pod(&[], &[])).is_empty());
}
