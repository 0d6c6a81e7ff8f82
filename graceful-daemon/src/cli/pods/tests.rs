use super::*;

#[test]
fn pods_are_found_by_uid_prefix_or_cgroup_spelling() {
    let pod = |uid: &str| -> PodView {
        serde_json::from_value(serde_json::json!({
            "uid": uid, "namespace": null, "name": null, "qos": "burstable",
            "state": "Running", "inbound_live": 0, "outbound_live": 0, "listeners": 0,
            "containers": [], "driver": "systemd", "cgroup_id": null, "path": null
        }))
        .unwrap()
    };
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
