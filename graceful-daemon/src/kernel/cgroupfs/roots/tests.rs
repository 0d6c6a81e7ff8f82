use super::*;
use crate::node::resolver::path::parse_rooted;

const UID: &str = "0a1b2c3d-0000-4000-8000-000000000001";

fn pod_under(roots: &PodRoots, path: &str) -> bool {
    parse_rooted(path.as_bytes(), roots).is_some()
}

#[test]
fn the_kubelets_layouts_are_pods_under_the_default_roots() {
    let r = PodRoots::default();
    let us = UID.replace('-', "_");
    for p in [
        format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{us}.slice/cri-containerd-abc.scope"),
        format!("/kubepods.slice/kubepods-pod{us}.slice"),
        format!("/kubepods/besteffort/pod{UID}/abc"),
        format!("/kubepods/pod{UID}"),
        format!("/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod{us}.slice"),
        format!("/kubelet/kubepods/burstable/pod{UID}/abc"),
        format!("/system.slice/containerd.service/kubepods-besteffort-pod{us}.slice:cri-containerd:abc"),
    ] {
        assert!(pod_under(&r, &p), "{p}");
    }
}

#[test]
fn a_pod_shaped_name_elsewhere_is_no_pod() {
    let r = PodRoots::default();
    for p in [
        // A host user's delegated subtree, named like the victim's pod.
        format!("/user.slice/user-1000.slice/user@1000.service/kubepods/burstable/pod{UID}/abc"),
        format!("/user.slice/user-1000.slice/user@1000.service/app.slice/kubepods/pod{UID}"),
        // Seen from a private cgroup namespace: not a path from the top.
        format!("/../../kubepods/burstable/pod{UID}/abc"),
        // Deeper than a QoS level under the root.
        format!("/kubepods/extra/burstable/pod{UID}/abc"),
    ] {
        assert!(!pod_under(&r, &p), "{p}");
    }
}

#[test]
fn named_roots_with_a_wildcard_take_a_nested_node() {
    let r = PodRoots::parse(&["/system.slice/docker-*.scope/kubepods", "/k3s/kubepods"]).unwrap();
    assert!(pod_under(
        &r,
        &format!("/system.slice/docker-node1.scope/kubepods/burstable/pod{UID}/abc")
    ));
    assert!(pod_under(&r, &format!("/k3s/kubepods/pod{UID}")));
    assert!(
        !pod_under(&r, &format!("/kubepods/pod{UID}")),
        "the defaults are replaced"
    );
    assert_eq!(
        r.to_string(),
        "/system.slice/docker-*.scope/kubepods, /k3s/kubepods"
    );
}

#[test]
fn a_root_that_is_no_path_is_refused_in_one_line() {
    for bad in ["kubepods", "/", "/../kubepods", "/a/./b"] {
        let e = PodRoots::parse(&[bad]).unwrap_err();
        assert!(e.starts_with("--pod-cgroup-root") && !e.contains('\n'), "{e}");
    }
    assert!(PodRoots::parse::<&str>(&[]).is_err());
}
