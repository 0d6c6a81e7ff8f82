use std::path::Path;

use super::*;

fn node() -> NodeAddrs {
    NodeAddrs::open(Path::new("/proc/self/ns/net")).unwrap()
}

const POD: &str = "10.244.1.7";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn sidecar() -> Mesh {
    Mesh::IstioSidecar {
        port_excluded: false,
        rewritten: true,
        native: false,
    }
}

#[test]
fn the_node_is_admitted_whatever_the_mesh() {
    let n = node();
    let me = n
        .fresh()
        .into_iter()
        .find(|a| !a.is_loopback())
        .expect("this namespace has an address");
    for mesh in [None, Some(sidecar()), Some(Mesh::IstioAmbient)] {
        assert_eq!(
            judge(&n, mesh.as_ref(), 9711, (me, Some(ip(POD))), false),
            Verdict::Admit
        );
    }
}

#[test]
fn a_relayed_hook_waits_for_the_termination_and_only_in_a_meshed_pod() {
    let n = node();
    let linkerd = Mesh::Linkerd {
        port_skipped: false,
        native: false,
    };
    // Istio's proxies speak from 127.0.0.6 (or ::6); Linkerd's from the
    // pod's own address.
    for (mesh, from) in [(sidecar(), "127.0.0.6"), (sidecar(), "::6"), (linkerd, POD)] {
        let at = (ip(from), Some(ip(POD)));
        assert_eq!(
            judge(&n, Some(&mesh), 9711, at, false),
            Verdict::OnceTerminating,
            "{from}"
        );
        assert_eq!(judge(&n, Some(&mesh), 9711, at, true), Verdict::Admit, "{from}");
    }
    // No mesh: the pod itself is no kubelet, terminating or not.
    let Verdict::Refuse(why) = judge(&n, None, 9711, (ip("127.0.0.6"), Some(ip(POD))), true) else {
        panic!()
    };
    assert!(why.contains("not this node but the pod itself"), "{why}");
    // A mesh whose proxy is off the hook's path relays nothing.
    let direct = Mesh::IstioSidecar {
        port_excluded: true,
        rewritten: false,
        native: false,
    };
    assert!(matches!(
        judge(&n, Some(&direct), 9711, (ip("127.0.0.6"), Some(ip(POD))), true),
        Verdict::Refuse(_)
    ));
}

#[test]
fn another_pod_is_refused_however_the_pod_is_meshed() {
    let n = node();
    let other = (ip("10.244.2.9"), Some(ip(POD)));
    for mesh in [None, Some(sidecar()), Some(Mesh::IstioAmbient)] {
        let Verdict::Refuse(why) = judge(&n, mesh.as_ref(), 9711, other, true) else {
            panic!("{mesh:?}")
        };
        assert!(why.starts_with("10.244.2.9 is not this node"), "{why}");
    }
    // Ambient's address stands for the node only for an enrolled pod.
    let snat = (ip("169.254.7.127"), Some(ip(POD)));
    assert_eq!(
        judge(&n, Some(&Mesh::IstioAmbient), 9711, snat, false),
        Verdict::Admit
    );
    assert!(matches!(judge(&n, None, 9711, snat, false), Verdict::Refuse(_)));
    assert!(matches!(
        judge(&n, Some(&sidecar()), 9711, snat, true),
        Verdict::Refuse(_)
    ));
}

#[test]
fn inside_the_pod_is_loopback_istios_passthrough_or_its_own_address() {
    let local = Some(ip(POD));
    for inside in [
        "127.0.0.1",
        "127.0.0.6",
        "::1",
        "::6",
        POD,
        "::ffff:10.244.1.7",
        "::ffff:127.0.0.6",
    ] {
        assert!(in_pod(ip(inside), local), "{inside}");
    }
    for outside in ["10.244.1.8", "169.254.7.127", "fe80::1"] {
        assert!(!in_pod(ip(outside), local), "{outside}");
    }
    assert!(in_pod(ip(POD), Some(ip("::ffff:10.244.1.7"))));
}
