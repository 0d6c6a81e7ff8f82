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
