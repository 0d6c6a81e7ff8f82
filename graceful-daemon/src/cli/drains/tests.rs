use graceful_api::views::drains::SPARK;

use super::*;

#[test]
fn exclusions_show_as_rules_held_and_counts_released() {
    use graceful_api::{
        drain::{ActiveDrain, DrainReport, Ignored, Report},
        Policy, Reason, Scope,
    };
    let active = |pod: &str, ignoring: &[&str]| ActiveDrain {
        id: 1,
        pod: pod.into(),
        container: None,
        scope: Scope::Pod,
        policy: Policy::Drained,
        max_ms: 30_000,
        start_ns: 1,
        cgroups: vec![1],
        ignoring: ignoring.iter().map(|r| r.to_string()).collect(),
        inbound: None,
    };
    let released = |pod: &str, ignored: Vec<Ignored>, at_release| DrainReport {
        pod: pod.into(),
        container: None,
        scope: Scope::Pod,
        report: Report {
            reason: Reason::Drained,
            policy: Policy::Drained,
            waited_ms: 1500,
            inbound_at_start: 2,
            peak_inbound: 2,
            inbound_at_release: 0,
            new_connections: 0,
            start_ns: 1,
            release_ns: 2,
            after_last_close_ms: Some(500),
            timeline: vec![],
            cgroups: vec![1],
            ignored,
            ignored_at_release: at_release,
            uncounted: false,
        },
    };
    let rule = |rule: &str, connections| Ignored {
        rule: rule.into(),
        connections,
    };
    let d = serde_json::json!({
        "active": [active("web", &["9090", "node", "10.0.0.0/8"]), active("api", &[])],
        "released": [
            released("old", vec![], 0),
            released("shop", vec![rule("9090", 1), rule("node", 12), rule("10.0.0.0/8", 0)], 2),
        ],
        "terminating": [],
        "terminated": [],
    });
    // `-o json` is the structs' serde: the rules, and per rule its count.
    assert_eq!(
        d["active"][0]["ignoring"],
        serde_json::json!(["9090", "node", "10.0.0.0/8"])
    );
    assert!(d["active"][1].get("ignoring").is_none(), "{d}");
    assert_eq!(
        d["released"][1]["ignored"][1],
        serde_json::json!({"rule": "node", "connections": 12})
    );
    assert_eq!(d["released"][1]["ignored_at_release"], 2);
    assert!(d["released"][0].get("ignored").is_none(), "{d}");

    let t = render(&serde_json::from_value::<Drains>(d.clone()).unwrap());
    let lines: Vec<&str> = t.lines().collect();
    let at = |title: &str| lines.iter().position(|l| l.starts_with(title)).unwrap();
    let h = at("HOLDING");
    assert_eq!(
        lines[h + 1],
        "POD   CONTAINER   POLICY    SCOPE   MAX     INBOUND   IGNORING"
    );
    assert_eq!(
        lines[h + 2],
        "web   -           drained   pod     30.0s   -         9090,node,10.0.0.0/8"
    );
    assert_eq!(
        lines[h + 3],
        "api   -           drained   pod     30.0s   -         -"
    );
    let r = at("RELEASED");
    assert_eq!(
        lines[r + 1],
        "POD    CONTAINER   REASON    WAITED   INBOUND@START   PEAK   NEW   IGNORED                       INBOUND OVER THE DRAIN"
    );
    // Newest first.
    assert_eq!(
        lines[r + 2],
        format!(
            "shop   -           drained   1.5s     2               2      0     9090:1 node:12 10.0.0.0/8:0   |{}|",
            " ".repeat(SPARK)
        )
    );
    assert!(
        lines[r + 3]
            .starts_with("old    -           drained   1.5s     2               2      0     -        "),
        "{t}"
    );
}
