use super::*;
use crate::resolver::{
    counts::{ContainerView, PodState},
    path::{Driver, QosClass, Runtime},
};

fn pod(uid: &str) -> PodView {
    PodView {
        uid: uid.into(),
        namespace: None,
        name: None,
        qos: QosClass::Burstable,
        state: PodState::Running,
        since_deletion_s: None,
        live: Live {
            inbound_live: 5,
            outbound_live: 0,
            listeners: 2,
        },
        containers: vec![ContainerView {
            id: "a".repeat(64),
            name: None,
            runtime: Runtime::Containerd,
            cgroup_id: 11,
            path: "/k/p/c".into(),
            live: Live {
                inbound_live: 3,
                outbound_live: 0,
                listeners: 1,
            },
        }],
        driver: Driver::Systemd,
        cgroup_id: Some(10),
        path: Some("/k/p".into()),
    }
}

#[test]
fn tables_show_uids_while_names_are_unknown() {
    let u = "a3ae0dbd-38d5-48fe-808c-a4d5dada806d";
    let t = pods_table(&[pod(u)], false);
    let lines: Vec<_> = t.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "NAMESPACE   POD{}   CONTAINERS   INBOUND   OUTBOUND   LISTEN   STATE",
            " ".repeat(33)
        )
    );
    assert_eq!(
        lines[1],
        format!("-           {u}   1            5         0          2        Running")
    );
    assert!(pods_table(&[pod(u)], true)
        .lines()
        .next()
        .unwrap()
        .ends_with("STATE     CGROUP   PATH"));
    let d = pod_detail(&pod(u));
    assert!(
        d.contains("Connections: 5 inbound, 0 outbound, 2 listening"),
        "{d}"
    );
    // The pod row is what the containers do not hold.
    let words = |first: &str| -> Vec<String> {
        let line = d.lines().find(|l| l.starts_with(first)).unwrap();
        line.split_whitespace().map(String::from).collect()
    };
    assert_eq!(words("(pod)"), ["(pod)", "-", "-", "10", "2", "0", "1", "/k/p"]);
    assert_eq!(
        words("aaaa"),
        ["aaaaaaaaaaaa", "-", "containerd", "11", "3", "0", "1", "/k/p/c"]
    );
}

#[test]
fn pods_are_found_by_uid_prefix_or_cgroup_spelling() {
    let pods = [
        pod("a3ae0dbd-38d5-48fe-808c-a4d5dada806d"),
        pod("a3af0dbd-38d5-48fe-808c-a4d5dada806d"),
    ];
    assert_eq!(find(&pods, "a3ae").unwrap().uid, pods[0].uid);
    assert_eq!(
        find(&pods, "A3AE0DBD_38d5_48fe_808c_a4d5dada806d").unwrap().uid,
        pods[0].uid
    );
    assert!(find(&pods, "a3a").unwrap_err().contains("2 pods"));
    assert!(find(&pods, "ffff").is_err());
    assert!(find(&pods, "").is_err());
    assert!(find(&pods, "shop/web-0").unwrap_err().contains("uid"));
}
