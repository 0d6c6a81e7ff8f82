use super::*;

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
            inbound_ignored: 0,
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
                inbound_ignored: 0,
            },
        }],
        driver: Driver::Systemd,
        cgroup_id: Some(10),
        path: Some("/k/p".into()),
        gate_warning: None,
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
    assert!(
        pods_table(&[pod(u)], true)
            .lines()
            .nth(1)
            .unwrap()
            .contains(" 5         -         0 "),
        "IGNORED is a dash while nothing is left out"
    );
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
fn a_draining_pod_shows_what_its_exclusions_leave_out() {
    let u = "a3ae0dbd-38d5-48fe-808c-a4d5dada806d";
    let mut p = pod(u);
    p.namespace = Some("shop".into());
    p.name = Some("web-0".into());
    p.state = PodState::Draining;
    p.since_deletion_s = Some(2.5);
    p.live.outbound_live = 1;
    p.live.inbound_ignored = 3;
    p.containers[0].live.inbound_ignored = 2;
    let t = pods_table(std::slice::from_ref(&p), true);
    let lines: Vec<_> = t.lines().collect();
    let words = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        words(lines[0]),
        [
            "NAMESPACE",
            "POD",
            "UID",
            "QOS",
            "CONTAINERS",
            "INBOUND",
            "IGNORED",
            "OUTBOUND",
            "LISTEN",
            "STATE",
            "CGROUP",
            "PATH"
        ]
    );
    assert_eq!(
        lines[1],
        format!("shop        web-0   {u}   burstable   1            5         3         1          2        Draining (2.5s)   10       /k/p")
    );
    // INBOUND stays the whole count, and the narrow table has no IGNORED.
    let narrow = pods_table(std::slice::from_ref(&p), false);
    assert!(!narrow.contains("IGNORED"), "{narrow}");
    assert_eq!(
        words(narrow.lines().nth(1).unwrap()),
        ["shop", "web-0", "1", "5", "1", "2", "Draining", "(2.5s)"]
    );
    let d = pod_detail(&p);
    assert!(
        d.contains(
            "Connections: 5 inbound (3 left out by the drain's exclusions), 1 outbound, 2 listening\n"
        ),
        "{d}"
    );
    // The pod's JSON carries the part left out.
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(
        (json["inbound_live"].as_u64(), json["inbound_ignored"].as_u64()),
        (Some(5), Some(3))
    );
    assert_eq!(json["containers"][0]["inbound_ignored"], 2);
}
