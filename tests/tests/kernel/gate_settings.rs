//! A drain's settings from the pod's annotations and grace period, with
//! the Kubernetes API (a fake server replaying recorded payloads): an
//! annotation wins over the hook's flag, a deadline past the grace period
//! is clamped and reported, and the release is an Event on the pod.

use graceful_tests::{
    agent::{graceful, Agent},
    cgroup::Cgroup,
    gate::{finish, hook},
    k8s::{
        fake_api::{FakeApi, Reply},
        fill, fixture, with_api,
    },
    peer::held_connections,
    pod::SimPod,
};
use serde_json::Value;

use crate::require_root;

#[test]
fn annotations_override_flags_and_the_grace_period_bounds_the_deadline() {
    require_root!();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let pod = SimPod::create(1);
    // The recorded pod (container "app", terminationGracePeriodSeconds 30),
    // annotated by its team: quiet with a short window, and a deadline the
    // grace period cannot afford.
    let mut list: Value =
        serde_json::from_str(&fill(&fixture("terminating/pods-list.json"), &pod, None)).unwrap();
    let item = &mut list["items"][0];
    assert_eq!(item["spec"]["terminationGracePeriodSeconds"], 30);
    item["metadata"]["annotations"] = serde_json::json!({
        "graceful.dev/policy": "quiet",
        "graceful.dev/quiet.app": "300ms",
        "graceful.dev/max": "40s",
    });
    let api = rt.block_on(FakeApi::start());
    api.push_list(Reply::list(list.to_string()));
    let mut agent = Agent::with_gate();
    with_api(&mut agent, &api);
    agent.start();
    graceful_tests::wait_for(10, "the pod's name from the API", || {
        let out = graceful(&agent.pin_dir, &["pod", &pod.uid, "-o", "json"]);
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        (v["name"] == "checkout-84b7c9d5f6-n7x4r").then_some(())
    });

    // Idle keep-alive connections: `drained` (the flag) would wait for the
    // deadline; `quiet` (the annotation) releases after its window.
    let lb = Cgroup::unique("lb");
    let (_app, _clients) = held_connections(pod.container(0), &lb, 3);
    let child = hook(
        &agent,
        pod.container(0),
        &["--policy", "drained", "--min", "0s", "--max", "20s"],
    );
    let (report, out) = finish(child);
    assert_eq!(report["reason"], "quiet", "{out}");
    assert_eq!(report["policy"], "quiet");
    assert_eq!(report["inbound_at_release"], 3);
    assert!(report["waited_ms"].as_u64().unwrap() < 5000, "{out}");
    // The hook was told the settings, and the correction.
    assert!(
        out.contains("graceful-wait: draining (policy quiet, scope pod, max 25.0s)"),
        "{out}"
    );
    assert!(
        out.contains("the agent corrected the settings")
            && out.contains("misconfiguration: max 40s is at or past the pod's grace period 30s"),
        "{out}"
    );
    assert!(agent.log_text().contains("drain settings: misconfiguration"));

    // Two Events on the pod: the misconfiguration, then the release.
    let events = graceful_tests::wait_for(10, "two Events", || {
        let e = api.events();
        (e.len() >= 2).then_some(e)
    });
    let by_reason = |r: &str| -> Value {
        events
            .iter()
            .find(|e| e["reason"] == r)
            .cloned()
            .unwrap_or_else(|| panic!("no {r} Event in {events:?}"))
    };
    let mis = by_reason("DrainMisconfigured");
    assert_eq!(mis["type"], "Warning");
    assert_eq!(mis["involvedObject"]["uid"], pod.uid.as_str());
    assert!(
        mis["message"]
            .as_str()
            .unwrap()
            .starts_with("container app: misconfiguration"),
        "{mis}"
    );
    let rel = by_reason("DrainReleased");
    assert_eq!(rel["type"], "Normal");
    let msg = rel["message"].as_str().unwrap();
    assert!(
        msg.starts_with("held the SIGTERM of container app for ")
            && msg.contains(": quiet (3 inbound at start"),
        "{msg}"
    );
}
