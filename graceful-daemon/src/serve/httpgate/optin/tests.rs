use std::collections::BTreeMap;

use super::*;

fn pod(annotations: &[(&str, &str)]) -> PodInfo {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1"},
        "spec": {"containers": [
            {"name": "web", "ports": [{"containerPort": 8080}, {"containerPort": 9090, "protocol": "UDP"}]}
        ]},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    let mut p = PodInfo::from_pod(&pod).unwrap();
    p.annotations = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<BTreeMap<_, _>>();
    p
}

#[test]
fn only_the_annotated_pods_on_their_port() {
    assert_eq!(want(&pod(&[])), Want::Nothing);
    assert_eq!(
        want(&pod(&[(ANNOTATION, "http")])),
        Want::Listen(Endpoint::Port(DEFAULT_PORT))
    );
    assert_eq!(
        want(&pod(&[(ANNOTATION, "http"), (PORT_ANNOTATION, " 7001 ")])),
        Want::Listen(Endpoint::Port(7001))
    );
    // The socket gate takes no port: one on a container's port is no conflict.
    assert_eq!(
        want(&pod(&[(ANNOTATION, " socket"), (PORT_ANNOTATION, "8080")])),
        Want::Listen(Endpoint::Socket)
    );
    let mut done = pod(&[(ANNOTATION, "http")]);
    done.phase = Some("Succeeded".into());
    assert_eq!(want(&done), Want::Nothing);
}

#[test]
fn each_refusal_says_what_to_change() {
    let refused = |p: &PodInfo| match want(p) {
        Want::Refused(why) => why,
        other => panic!("{other:?}"),
    };
    let why = refused(&pod(&[(ANNOTATION, "http"), (PORT_ANNOTATION, "8080")]));
    assert!(why.contains("port 8080 is container web's port"), "{why}");
    assert!(why.contains("set graceful.dev/gate-port"), "{why}");
    // A UDP port is as declared as a TCP one.
    let why = refused(&pod(&[(ANNOTATION, "http"), (PORT_ANNOTATION, "9090")]));
    assert!(why.contains("port 9090 is container web's port"), "{why}");
    // Read as the policies read it: " 09800 " is 9800; a sign or a sixth
    // digit is no port there, so none here.
    assert_eq!(
        want(&pod(&[(ANNOTATION, "http"), (PORT_ANNOTATION, " 09800 ")])),
        Want::Listen(Endpoint::Port(9800))
    );
    for bad in ["0", "65536", "http", "", "+9800", "009800", "98 00"] {
        let why = refused(&pod(&[(ANNOTATION, "http"), (PORT_ANNOTATION, bad)]));
        assert!(why.contains("is not a port (1 to 65535)"), "{bad}: {why}");
    }
    let why = refused(&pod(&[(ANNOTATION, "htpp")]));
    assert!(why.contains("\"htpp\" is not a gate"), "{why}");
    assert!(why.contains("`http`") && why.contains("`socket`"), "{why}");
    for gate in ["http", "socket"] {
        let mut host = pod(&[(ANNOTATION, gate)]);
        host.host_network = true;
        let why = refused(&host);
        assert!(
            why.contains("hostNetwork") && why.contains("graceful-wait on the node's socket"),
            "{why}"
        );
    }
}
