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

fn host(_: IpAddr) -> NodeCaller {
    NodeCaller::Host { uid: 0 }
}

#[test]
fn the_kubelet_is_admitted_whatever_the_mesh_and_a_host_network_pod_never() {
    let n = node();
    let me = n
        .fresh()
        .into_iter()
        .find(|a| !a.is_loopback())
        .expect("this namespace has an address");
    for mesh in [None, Some(sidecar()), Some(Mesh::IstioAmbient)] {
        let at = (me, Some(ip(POD)));
        assert_eq!(judge(&n, mesh.as_ref(), 9711, at, host), Ok(Peer::Kubelet));
        // The same address, from a hostNetwork pod's socket.
        let pod = |_| NodeCaller::Pod { uid: "u-1".into() };
        let why = judge(&n, mesh.as_ref(), 9711, at, pod).unwrap_err();
        assert!(why.contains("used by pod u-1 on the host network"), "{why}");
        // A socket the node's kernel does not show: judged as relayed.
        assert_eq!(
            judge(&n, mesh.as_ref(), 9711, at, |_| NodeCaller::Unknown),
            Ok(Peer::Relayed)
        );
    }
}

#[test]
fn a_relay_is_a_meshed_pods_proxy_or_ambients_address() {
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
            judge(&n, Some(&mesh), 9711, at, host),
            Ok(Peer::Relayed),
            "{from}"
        );
    }
    // No mesh: the pod itself is no kubelet.
    let why = judge(&n, None, 9711, (ip("127.0.0.6"), Some(ip(POD))), host).unwrap_err();
    assert!(why.contains("not this node but the pod itself"), "{why}");
    // A mesh whose proxy is off the hook's path relays nothing.
    let direct = Mesh::IstioSidecar {
        port_excluded: true,
        rewritten: false,
        native: false,
    };
    assert!(judge(&n, Some(&direct), 9711, (ip("127.0.0.6"), Some(ip(POD))), host).is_err());
}

#[test]
fn another_pod_is_refused_however_the_pod_is_meshed() {
    let n = node();
    let other = (ip("10.244.2.9"), Some(ip(POD)));
    for mesh in [None, Some(sidecar()), Some(Mesh::IstioAmbient)] {
        let why = judge(&n, mesh.as_ref(), 9711, other, host).unwrap_err();
        assert!(why.starts_with("10.244.2.9 is not this node"), "{why}");
    }
    // Ambient's address stands for the node only for an enrolled pod, its
    // socket looked up from the node's own addresses.
    let snat = (ip("169.254.7.127"), Some(ip(POD)));
    let ambient = Some(&Mesh::IstioAmbient);
    assert_eq!(judge(&n, ambient, 9711, snat, host), Ok(Peer::Kubelet));
    // As a dual-stack listener meets it: the node's IPv4 addresses asked.
    let mapped = (ip("::ffff:169.254.7.127"), Some(ip(POD)));
    let v4_only = |a: IpAddr| match a {
        IpAddr::V4(_) => NodeCaller::Host { uid: 0 },
        IpAddr::V6(_) => NodeCaller::Unknown,
    };
    assert_eq!(judge(&n, ambient, 9711, mapped, v4_only), Ok(Peer::Kubelet));
    let pod = |_| NodeCaller::Pod { uid: "u-2".into() };
    assert!(judge(&n, ambient, 9711, snat, pod).is_err());
    let unknown = |_| NodeCaller::Unknown;
    assert_eq!(judge(&n, ambient, 9711, snat, unknown), Ok(Peer::Relayed));
    assert!(judge(&n, None, 9711, snat, host).is_err());
    assert!(judge(&n, Some(&sidecar()), 9711, snat, host).is_err());
}

fn hook(port: u16, target: &str) -> SpecHook {
    SpecHook {
        container: "app".into(),
        port,
        target: target.into(),
    }
}

#[test]
fn a_drain_is_only_the_pods_own_hook_however_its_query_is_spelled() {
    let hooks = [hook(9711, "/drain?policy=drained&max=25s"), hook(8080, "/other")];
    // The same settings in another order, or as a kubelet joins the path.
    assert_eq!(
        spec_hook(&hooks, 9711, "/drain", "policy=drained&max=25s"),
        Ok(())
    );
    assert_eq!(
        spec_hook(&hooks, 9711, "/drain", "max=25000ms&policy=drained"),
        Ok(())
    );
    // Other settings: refused, naming what the spec sends.
    let why = spec_hook(&hooks, 9711, "/drain", "policy=drained&max=1s").unwrap_err();
    assert!(
        why.contains("its spec sends /drain?policy=drained&max=25s to port 9711"),
        "{why}"
    );
    assert!(spec_hook(&hooks, 9711, "/drain", "").is_err());
    assert!(spec_hook(&hooks, 9711, "/drain", "max=bogus").is_err());
    // No hook on this port at all.
    let why = spec_hook(&hooks, 9712, "/drain", "policy=drained&max=25s").unwrap_err();
    assert!(why.contains("no preStop httpGet hook on port 9712"), "{why}");
    // A spec'd hook without a leading slash is sent with one.
    assert_eq!(spec_hook(&[hook(9711, "drain")], 9711, "/drain", ""), Ok(()));
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
