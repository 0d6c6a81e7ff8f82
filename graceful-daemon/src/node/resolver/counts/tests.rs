use std::path::Path;

use super::*;

const UID: &str = "a3ae0dbd-38d5-48fe-808c-a4d5dada806d";

/// A pod's cgroup, and two container ids.
fn pod() -> (String, String, String) {
    (
        format!("/kubepods/burstable/pod{UID}"),
        "a".repeat(64),
        "b".repeat(64),
    )
}

#[test]
fn a_pod_counts_all_its_cgroups_and_each_container_its_own() {
    let (p, a, b) = pod();
    let mut ix = PodIndex::default();
    ix.insert(1, Path::new(&p));
    ix.insert(2, Path::new(&format!("{p}/{a}")));
    ix.insert(3, Path::new(&format!("{p}/crio-{b}")));
    ix.insert(4, Path::new(&format!("{p}/crio-{b}/container")));
    ix.insert(5, Path::new(&format!("{p}/crio-conmon-{b}")));
    let c = |i, o, l| CgroupCounters {
        inbound_live: i,
        outbound_live: o,
        listeners: l,
        ..Default::default()
    };
    let counters: BTreeMap<u64, CgroupCounters> = [
        (1, c(1, 0, 1)),
        (2, c(3, 1, 1)),
        (4, c(5, 0, 2)),
        (5, c(0, 2, 0)),
        (99, c(7, 7, 7)),
    ]
    .into();
    let v = &views(&ix, &counters)[0];
    let l = |i, o, l| Live {
        inbound_live: i,
        outbound_live: o,
        listeners: l,
        inbound_ignored: 0,
    };
    assert_eq!(v.live, l(9, 3, 4));
    assert_eq!(v.containers[0].live, l(3, 1, 1));
    assert_eq!((v.containers[1].cgroup_id, v.containers[1].live), (3, l(5, 0, 2)));
    assert_eq!(v.outside_containers(), l(1, 2, 1));
    let json = serde_json::to_value(v).unwrap();
    assert_eq!(json["qos"], "burstable");
    assert_eq!(json["state"], "Running");
    assert_eq!(json["namespace"], serde_json::Value::Null);
    assert_eq!(json["inbound_live"], 9);
    assert_eq!(json["containers"][1]["listeners"], 2);
    assert_eq!(json["containers"][1]["name"], serde_json::Value::Null);
    assert_eq!(json["containers"][1]["cgroup_id"], 3);
    // Nothing left out: no field, as before the exclusions.
    assert!(json.get("inbound_ignored").is_none(), "{json}");
    assert!(json["containers"][0].get("inbound_ignored").is_none(), "{json}");
}

#[test]
fn connections_left_out_are_summed_like_the_others_and_shown_when_some() {
    let (p, a, b) = pod();
    let mut ix = PodIndex::default();
    ix.insert(1, Path::new(&p));
    ix.insert(2, Path::new(&format!("{p}/{a}")));
    ix.insert(3, Path::new(&format!("{p}/{b}")));
    let c = |i, ignored| CgroupCounters {
        inbound_live: i,
        inbound_ignored_live: ignored,
        ..Default::default()
    };
    let counters: BTreeMap<u64, CgroupCounters> = [(1, c(1, 1)), (2, c(4, 3)), (3, c(2, 0))].into();
    let v = &views(&ix, &counters)[0];
    assert_eq!((v.live.inbound_live, v.live.inbound_ignored), (7, 4));
    assert_eq!(v.containers[0].live.inbound_ignored, 3);
    assert_eq!(v.containers[1].live.inbound_ignored, 0);
    assert_eq!(v.outside_containers().inbound_ignored, 1);
    let json = serde_json::to_value(v).unwrap();
    assert_eq!(json["inbound_live"], 7);
    assert_eq!(json["inbound_ignored"], 4);
    assert_eq!(json["containers"][0]["inbound_ignored"], 3);
    assert!(json["containers"][1].get("inbound_ignored").is_none(), "{json}");
    // JSON from an agent before the exclusions still reads, as zero.
    let old = serde_json::json!({
        "uid": UID, "namespace": null, "name": null, "qos": "burstable", "state": "Running",
        "inbound_live": 2, "outbound_live": 0, "listeners": 1, "containers": [],
        "driver": "cgroupfs", "cgroup_id": 1, "path": p,
    });
    let back: PodView = serde_json::from_value(old).unwrap();
    assert_eq!((back.live.inbound_live, back.live.inbound_ignored), (2, 0));
    let again: PodView = serde_json::from_value(json).unwrap();
    assert_eq!(again.live, v.live);
}

#[test]
fn a_huge_id_is_quoted_clipped_with_its_length() {
    let mut ix = PodIndex::default();
    ix.insert(1, Path::new(&pod().0));
    let pods = views(&ix, &BTreeMap::new());
    let huge = "f".repeat(60_000);
    for want in [huge.clone(), format!("ns/{huge}")] {
        let e = find(&pods, &want).unwrap_err();
        assert!(e.len() < 400, "{} bytes: {}…", e.len(), &e[..200]);
        assert!(e.contains("bytes)") && e.contains('…'), "{e}");
    }
    // A short one whole, as before.
    let e = find(&pods, "ffff").unwrap_err();
    assert!(e.contains("uid ffff on"), "{e}");
}
