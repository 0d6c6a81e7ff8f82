use super::*;

fn report(
    ns: &str,
    workload: Option<&str>,
    name: &str,
    outcome: Outcome,
    open: u64,
    opted: bool,
) -> TerminationReport {
    TerminationReport {
        uid: format!("u-{name}"),
        namespace: ns.into(),
        name: name.into(),
        outcome,
        seconds_since_deletion: 1.0,
        inbound_at_deletion: open,
        inbound_open: open,
        container: None,
        deletion_requested_at: None,
        grace_period_seconds: Some(30),
        observed_late: false,
        report_ns: 2,
        last_inbound_close_ns: 1,
        cgroups: vec![1],
        workload: workload.map(String::from),
        opted_in: Some(opted),
    }
}

#[test]
fn workloads_are_ranked_by_terminations_before_drain_then_connections_cut() {
    let r = [
        report("shop", Some("deployment/web"), "web-1", Outcome::Exited, 3, false),
        report(
            "shop",
            Some("deployment/web"),
            "web-2",
            Outcome::Drained,
            0,
            false,
        ),
        report("shop", Some("deployment/db"), "db-1", Outcome::Exited, 9, false),
        report("shop", Some("deployment/db"), "db-2", Outcome::Deleted, 1, false),
        report("pay", Some("deployment/web"), "pay-1", Outcome::Exited, 40, true),
        report("pay", Some("deployment/api"), "api-1", Outcome::Drained, 0, true),
        report("old", None, "x-1", Outcome::Exited, 1, false),
    ];
    let ranked = rank(r.iter().map(Seen::from));
    let names: Vec<(&str, &str)> = ranked
        .iter()
        .map(|w| (w.namespace.as_str(), w.workload.as_str()))
        .collect();
    // db: two before drain; pay's web: one, 40 cut; shop's web: one, 3 cut;
    // an older agent's report: one, 1 cut. Drained-only workloads are not at risk.
    assert_eq!(
        names,
        [
            ("shop", "deployment/db"),
            ("pay", "deployment/web"),
            ("shop", "deployment/web"),
            ("old", "-")
        ]
    );
    assert_eq!(ranked[0].connections_cut, 10);
    assert_eq!(ranked[0].last_pod, "db-2");
    assert_eq!((ranked[2].before_drain, ranked[2].terminations), (1, 2));
    let t = render(&ranked);
    assert!(t.starts_with("NAMESPACE   WORKLOAD         BEFORE DRAIN   OF TERMINATIONS   CONNECTIONS CUT   GATED   LAST POD\n"), "{t}");
    assert!(t.contains("\npay         deployment/web   1              1                 40                1/1     pay-1\n"), "{t}");
    assert!(render(&rank(r[5..6].iter().map(Seen::from))).starts_with("No workload"));
}
