use super::*;
use crate::{
    drain::{Ignored, Report},
    termination::Outcome,
    Policy, Reason, Scope,
};

fn released(pod: &str, reason: Reason, waited_ms: u64, start: u64, peak: u64, new: u64) -> DrainReport {
    DrainReport {
        pod: pod.into(),
        container: None,
        scope: Scope::Pod,
        report: Report {
            reason,
            policy: Policy::Drained,
            waited_ms,
            inbound_at_start: start,
            peak_inbound: peak,
            inbound_at_release: 0,
            new_connections: new,
            start_ns: 1,
            release_ns: 2,
            after_last_close_ms: None,
            timeline: Vec::new(),
            cgroups: vec![1],
            ignored: Vec::new(),
            ignored_at_release: 0,
            uncounted: false,
        },
    }
}

fn drains() -> Drains {
    let mut p2 = released("p2", Reason::Drained, 4200, 7, 9, 2);
    p2.report.ignored = vec![
        Ignored {
            rule: "9090".into(),
            connections: 1,
        },
        Ignored {
            rule: "node".into(),
            connections: 12,
        },
    ];
    Drains {
        active: vec![ActiveDrain {
            id: 3,
            pod: "p1".into(),
            container: Some("c".repeat(64)),
            scope: Scope::Pod,
            policy: Policy::Drained,
            max_ms: 25000,
            start_ns: 1,
            cgroups: vec![1],
            ignoring: vec!["9090".into(), "node".into()],
            inbound: Some(4),
        }],
        released: vec![released("p0", Reason::Deadline, 900, 1, 1, 0), p2],
        terminating: Vec::new(),
        terminated: vec![TerminationReport {
            uid: "u1".into(),
            namespace: "shop".into(),
            name: "web-0".into(),
            outcome: Outcome::Drained,
            seconds_since_deletion: 3.25,
            inbound_at_deletion: 4,
            inbound_open: 0,
            container: None,
            deletion_requested_at: None,
            grace_period_seconds: Some(30),
            observed_late: false,
            report_ns: 5,
            last_inbound_close_ns: 4,
            cgroups: vec![1],
            workload: Some("deployment/web".into()),
            opted_in: Some(true),
        }],
    }
}

#[test]
fn sections_show_what_the_daemon_sent() {
    let t = render(&drains());
    assert!(t.contains("HOLDING (1)\nPOD   CONTAINER      POLICY"), "{t}");
    assert!(
        t.contains("p1    cccccccccccc   drained   pod     25.0s   4         9090,node"),
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
    assert!(released[0].contains("9090:1 node:12"), "{t}");
    assert!(
        released[1].contains("deadline") && released[1].contains(" - "),
        "{t}"
    );
    assert!(t.contains("TERMINATING (0)\n\n"), "{t}");
    assert!(t.contains("|                |"), "no timeline, no bars: {t}");
    assert!(t.contains("shop        web-0   drained   3.25s"), "{t}");
}

#[test]
fn the_view_reads_back_what_it_wrote_and_an_older_agents_sections() {
    let d = drains();
    let json = serde_json::to_string(&d).unwrap();
    assert_eq!(serde_json::from_str::<Drains>(&json).unwrap(), d);
    // An agent that sent no `terminating` or `terminated` (standalone, or
    // older): those sections read as empty, the rest as sent.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("terminating");
    o.remove("terminated");
    o.insert("from_a_newer_agent".into(), serde_json::json!(1));
    let older: Drains = serde_json::from_value(v).unwrap();
    assert_eq!((older.active, older.released), (d.active, d.released));
    assert!(older.terminated.is_empty());
}

#[test]
fn the_sparkline_follows_the_inbound_count() {
    let points =
        |p: &[(u64, u64)]| -> Vec<Point> { p.iter().map(|&(ms, inbound)| Point { ms, inbound }).collect() };
    let line = sparkline(&points(&[(0, 8), (500, 4), (1000, 2), (1500, 0)]), 2000);
    assert_eq!(line.chars().count(), SPARK);
    assert_eq!(line, "████▄▄▄▄▂▂▂▂    ");
    // A brief spike inside a slice still shows.
    assert_eq!(
        sparkline(&points(&[(0, 0), (130, 5), (140, 0)]), 1600),
        " █              "
    );
    assert_eq!(sparkline(&[], 100), " ".repeat(SPARK));
}
