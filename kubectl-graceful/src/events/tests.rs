use super::*;

/// An Event as an agent posts it (`build_event`'s shape), with notes.
fn event(reason: &str, pod: &str, notes: serde_json::Value, at: &str, count: i32) -> Event {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{pod}.1"), "namespace": "shop", "annotations": notes},
        "involvedObject": {"kind": "Pod", "namespace": "shop", "name": pod, "uid": "u"},
        "reason": reason,
        "message": format!("{reason} of {pod}"),
        "type": if reason == "InboundDrained" || reason == "DrainReleased" { "Normal" } else { "Warning" },
        "reportingComponent": "graceful",
        "lastTimestamp": at,
        "count": count
    }))
    .unwrap()
}

#[test]
fn the_terminating_reports_events_rank_as_the_agents_reports_do() {
    let w = |w: &str, open: &str, opted: &str| serde_json::json!({"graceful.dev/workload": w, "graceful.dev/inbound-open": open, "graceful.dev/opted-in": opted});
    let list = [
        event(
            "ExitedBeforeDrain",
            "web-1",
            w("deployment/web", "4", "false"),
            "2026-12-07T10:00:00Z",
            1,
        ),
        event(
            "InboundDrained",
            "web-2",
            w("deployment/web", "0", "false"),
            "2026-12-07T10:00:01Z",
            1,
        ),
        event(
            "DrainReleased",
            "api-1",
            serde_json::json!({"graceful.dev/workload": "deployment/api"}),
            "2026-12-07T10:00:02Z",
            1,
        ),
        event(
            "DeletedBeforeDrain",
            "db-0",
            w("statefulset/db", "1", "true"),
            "2026-12-07T10:00:03Z",
            1,
        ),
        // An older agent's Event: no notes.
        event(
            "ExitedBeforeDrain",
            "old-1",
            serde_json::Value::Null,
            "2026-12-07T10:00:04Z",
            1,
        ),
    ];
    let seen = terminations(&list);
    assert_eq!(seen.len(), 4, "DrainReleased is no terminating report: {seen:?}");
    let ranked = graceful_api::views::at_risk::rank(seen);
    let rows: Vec<(&str, u64, u64, u64)> = ranked
        .iter()
        .map(|w| (w.workload.as_str(), w.before_drain, w.connections_cut, w.opted_in))
        .collect();
    assert_eq!(
        rows,
        [
            ("deployment/web", 1, 4, 0),
            ("statefulset/db", 1, 1, 1),
            ("-", 1, 0, 0)
        ]
    );
}

#[test]
fn the_history_is_one_row_an_event_with_its_age_and_repeats() {
    let now: Timestamp = "2026-12-07T10:05:00Z".parse().unwrap();
    let list = [
        event(
            "DrainReleased",
            "web-1",
            serde_json::json!({"graceful.dev/workload": "deployment/web"}),
            "2026-12-07T10:00:00Z",
            1,
        ),
        event(
            "DrainRefused",
            "web-2",
            serde_json::Value::Null,
            "2026-12-07T10:04:30Z",
            3,
        ),
    ];
    let t = render(&list, now);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 3, "{t}");
    assert!(
        lines[0].starts_with("LAST SEEN   TYPE      REASON          POD     WORKLOAD         MESSAGE"),
        "{t}"
    );
    assert!(
        lines[1].starts_with(
            "5m          Normal    DrainReleased   web-1   deployment/web   DrainReleased of web-1"
        ),
        "{t}"
    );
    assert!(
        lines[2].ends_with("-                DrainRefused of web-2 (x3)"),
        "{t}"
    );
    assert!(render(&[], now).starts_with("No Event"));
    assert_eq!(
        (age(59), age(61), age(7200), age(200_000)),
        ("59s".into(), "1m".into(), "2h".into(), "2d".into())
    );
}

#[test]
fn released_drains_events_are_what_recommend_reads() {
    let drained = serde_json::json!({
        "graceful.dev/workload": "deployment/web", "graceful.dev/waited-ms": "2400",
        "graceful.dev/release-reason": "drained", "graceful.dev/max-ms": "25000", "graceful.dev/grace-period-s": "30"
    });
    let cut = serde_json::json!({
        "graceful.dev/workload": "deployment/web", "graceful.dev/waited-ms": "25000",
        "graceful.dev/release-reason": "deadline", "graceful.dev/max-ms": "25000"
    });
    let list = [
        event("DrainReleased", "web-1", drained, "2026-12-07T10:00:00Z", 1),
        event("DrainDeadline", "web-2", cut, "2026-12-07T10:00:01Z", 1),
        // An older agent's: no figures, left out; not a drain: left out.
        event(
            "DrainReleased",
            "web-3",
            serde_json::Value::Null,
            "2026-12-07T10:00:02Z",
            1,
        ),
        event(
            "InboundDrained",
            "web-1",
            serde_json::json!({"graceful.dev/waited-ms": "1"}),
            "2026-12-07T10:00:03Z",
            1,
        ),
    ];
    let d = drains(&list);
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(
        (d[0].waited_ms, d[0].at_deadline, d[0].max_ms, d[0].grace_period_s),
        (2_400, false, Some(25_000), Some(30))
    );
    assert_eq!((d[1].at_deadline, d[1].grace_period_s), (true, None));
    let r = &graceful_api::views::recommend::recommend(d, 5_000)[0];
    assert_eq!(
        (r.workload.as_str(), r.drains, r.at_deadline, r.max_s),
        ("deployment/web", 2, 1, 50)
    );
}

#[test]
fn forged_events_are_kept_in_their_namespace_and_their_figures_bounded() {
    // Written in another namespace, naming a pod of shop: not shop's.
    let mut e = event(
        "ExitedBeforeDrain",
        "web-1",
        serde_json::json!({"graceful.dev/workload": "deployment/web", "graceful.dev/inbound-open": "18446744073709551615"}),
        "2026-12-07T10:00:00Z",
        1,
    );
    e.metadata.namespace = Some("tenant".into());
    assert!(terminations(std::slice::from_ref(&e)).is_empty());
    // In its own namespace, absurd figures neither panic nor wrap.
    e.metadata.namespace = Some("shop".into());
    let twice = [e.clone(), e];
    let ranked = graceful_api::views::at_risk::rank(terminations(&twice));
    assert_eq!(ranked[0].connections_cut, u64::MAX);
    let drain =
        serde_json::json!({"graceful.dev/waited-ms": "18446744073709551615", "graceful.dev/max-ms": "1000"});
    let list = [event("DrainReleased", "web-1", drain, "2026-12-07T10:00:00Z", 1)];
    assert!(
        graceful_api::views::recommend::recommend(drains(&list), u64::MAX).is_empty(),
        "a wait past a day is left out"
    );
    // Escapes in a forged message reach the terminal escaped.
    let mut bad = event(
        "DrainReleased",
        "web-1",
        serde_json::Value::Null,
        "2026-12-07T10:00:00Z",
        1,
    );
    bad.message = Some("ok\u{1b}[2J\rgone".into());
    let t = render(&[bad], "2026-12-07T10:00:01Z".parse().unwrap());
    assert!(
        !t.contains('\u{1b}') && !t.contains('\r') && t.contains("\\u{1b}[2J\\rgone"),
        "{t}"
    );
}
