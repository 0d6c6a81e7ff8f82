use super::Footprint;

fn with_entries(entries: &[&str]) -> Footprint {
    Footprint {
        entries: entries.iter().map(|e| e.to_string()).collect(),
        ..Footprint::default()
    }
}

#[test]
fn what_iptables_makes_on_its_first_run_is_not_a_trace() {
    // A fresh machine: no /run/xtables.lock before the first `up`; the
    // node's iptables (kube-proxy, the CNI, istio-iptables) made it.
    let before = with_entries(&["/run/lock"]);
    let after = with_entries(&["/run/lock", "/run/xtables.lock"]);
    assert!(before.added_in(&after).is_empty());
}

#[test]
fn what_ip_netns_makes_is_not_a_trace() {
    // A fresh machine: neither /run/netns nor /run/mount before the first
    // `up`; `ip netns add` made both, and the node left /run/containerd.
    let before = with_entries(&["/run/lock", "/var/lib/dpkg"]);
    let after = with_entries(&[
        "/run/lock",
        "/var/lib/dpkg",
        "/run/netns",
        "/run/mount",
        "/run/containerd",
    ]);
    assert_eq!(before.added_in(&after), ["path /run/containerd"]);
}

#[test]
fn a_mount_at_run_netns_is_still_compared() {
    let before = Footprint::default();
    let after = Footprint {
        mounts: ["/run/netns".to_string()].into(),
        ..Footprint::default()
    };
    assert_eq!(before.added_in(&after), ["mount /run/netns"]);
}
