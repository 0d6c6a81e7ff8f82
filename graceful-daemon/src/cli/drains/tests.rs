use super::*;

#[test]
fn sections_show_what_the_daemon_sent() {
    let d = serde_json::json!({
        "active": [{"id": 3, "pod": "p1", "container": "c".repeat(64), "scope": "pod",
                    "policy": "drained", "max_ms": 25000, "start_ns": 1, "cgroups": [1],
                    "inbound": 4}],
        "released": [
            {"pod": "p0", "container": null, "scope": "pod", "reason": "deadline", "waited_ms": 900,
             "inbound_at_start": 1, "peak_inbound": 1, "new_connections": 0},
            {"pod": "p2", "container": null, "scope": "pod", "reason": "drained", "waited_ms": 4200,
             "inbound_at_start": 7, "peak_inbound": 9, "new_connections": 2}],
        "terminating": [],
        "terminated": [{"namespace": "shop", "name": "web-0", "outcome": "drained",
                        "seconds_since_deletion": 3.25, "inbound_at_deletion": 4}]
    });
    let t = render(&d);
    assert!(t.contains("HOLDING (1)\nPOD   CONTAINER      POLICY"), "{t}");
    assert!(
        t.contains("p1    cccccccccccc   drained   pod     25.0s   4 "),
        "{t}"
    );
    // Newest first.
    let released: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("p0") || l.starts_with("p2"))
        .collect();
    assert!(
        released[0].starts_with("p2") && released[0].contains("drained    4.2s"),
        "{t}"
    );
    assert!(t.contains("TERMINATING (0)\n\n"), "{t}");
    assert!(t.contains("|                |"), "no timeline, no bars: {t}");
    assert!(t.contains("shop        web-0   drained   3.25s"), "{t}");
}

#[test]
fn the_sparkline_follows_the_inbound_count() {
    let t = serde_json::json!([
        {"ms": 0, "inbound": 8}, {"ms": 500, "inbound": 4},
        {"ms": 1000, "inbound": 2}, {"ms": 1500, "inbound": 0}
    ]);
    let line = sparkline(t.as_array().unwrap(), 2000);
    assert_eq!(line.chars().count(), SPARK);
    assert_eq!(line, "████▄▄▄▄▂▂▂▂    ");
    // A brief spike inside a slice still shows.
    let t =
        serde_json::json!([{"ms": 0, "inbound": 0}, {"ms": 130, "inbound": 5}, {"ms": 140, "inbound": 0}]);
    assert_eq!(sparkline(t.as_array().unwrap(), 1600), " █              ");
    assert_eq!(sparkline(&[], 100), " ".repeat(SPARK));
}

#[test]
fn exclusions_show_as_rules_held_and_counts_released() {
    use crate::drain::{
        engine::{Ignored, Report},
        policy::{Policy, Reason},
        report::{ActiveDrain, DrainReport, Scope},
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

    let t = render(&d);
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
