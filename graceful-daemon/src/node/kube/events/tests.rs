use super::*;

#[test]
fn an_event_is_well_formed() {
    let pod = PodRef {
        namespace: "shop".into(),
        name: "web-6d4cf56db6-7xq2b".into(),
        uid: "0b6a1c52-3f0e-4b8e-9a47-6f1d2c9e8a10".into(),
        workload: Some("deployment/web".into()),
    };
    let now: Timestamp = "2026-11-29T20:01:02.345678Z".parse().unwrap();
    let notes = vec![("graceful.dev/inbound-open", "3".to_string())];
    let ev = build_event(&pod, "InboundDrained", "a\nb\tc ", false, "node-a", now, &notes);
    let v = serde_json::to_value(&ev).unwrap();
    assert_eq!(v["apiVersion"], "v1");
    assert_eq!(v["kind"], "Event");
    assert_eq!(v["involvedObject"]["uid"], pod.uid);
    assert_eq!(v["involvedObject"]["kind"], "Pod");
    assert_eq!(v["message"], "a b c");
    assert_eq!(v["type"], "Normal");
    assert_eq!(v["source"]["component"], "graceful");
    assert_eq!(v["reportingInstance"], "node-a");
    assert_eq!(v["eventTime"], "2026-11-29T20:01:02.345678Z");
    assert_eq!(v["firstTimestamp"], "2026-11-29T20:01:02Z");
    let name = v["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("web-6d4cf56db6-7xq2b."), "{name}");
    assert_eq!(
        v["metadata"]["annotations"],
        serde_json::json!({"graceful.dev/workload": "deployment/web", "graceful.dev/inbound-open": "3"})
    );
    let bare = PodRef {
        workload: None,
        ..pod
    };
    let v = serde_json::to_value(build_event(&bare, "X", "m", false, "n", now, &[])).unwrap();
    assert!(v["metadata"]["annotations"].is_null(), "{v}");
}

#[test]
fn long_names_and_messages_are_cut_to_the_api_limits() {
    let now = Timestamp::now();
    let long = "a".repeat(300);
    assert!(event_name(&long, now).len() <= 253);
    let msg = "é".repeat(1000);
    let m = one_line(&msg);
    assert!(m.len() <= MESSAGE_LIMIT && m.chars().all(|c| c == 'é'));
}
