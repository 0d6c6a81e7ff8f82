use super::*;

fn drain(workload: &str, waited_ms: u64, at_deadline: bool) -> Drain {
    Drain {
        namespace: "shop".into(),
        workload: workload.into(),
        waited_ms,
        at_deadline,
        max_ms: Some(25_000),
        grace_period_s: Some(30),
    }
}

#[test]
fn a_workload_that_drains_gets_twice_its_p99_and_the_budget_on_top() {
    // 100 drains of 1.0 to 10.9 s: p50 5.9 s, p99 10.8 s, longest 10.9 s.
    let ds: Vec<Drain> = (0..100)
        .map(|i| drain("deployment/web", 1_000 + i * 100, false))
        .collect();
    let r = &recommend(ds, 5_000)[0];
    assert_eq!(
        (r.drains, r.p50_ms, r.p99_ms, r.longest_ms),
        (100, 5_900, 10_800, 10_900)
    );
    assert_eq!((r.max_s, r.grace_period_s), (22, 27), "{r:?}");
    assert_eq!((r.max_now_ms, r.grace_period_now_s), (Some(25_000), Some(30)));
    assert_eq!(r.rule, "2x p99, >= 1.5x the longest, >= 5s");
}

#[test]
fn few_or_short_drains_keep_the_floor_and_say_so() {
    let r = &recommend(
        [
            drain("deployment/api", 40, false),
            drain("deployment/api", 900, false),
        ],
        5_000,
    )[0];
    assert_eq!((r.p50_ms, r.p99_ms, r.max_s, r.grace_period_s), (40, 900, 5, 10));
    assert!(
        r.rule.ends_with("few drains: p99 is near the longest"),
        "{}",
        r.rule
    );
    // One long drain among short ones: 1.5x the longest wins over 2x p99.
    let mut ds: Vec<Drain> = (0..199).map(|_| drain("deployment/api", 1_000, false)).collect();
    ds.push(drain("deployment/api", 30_000, false));
    let r = &recommend(ds, 5_500)[0];
    assert_eq!((r.p99_ms, r.max_s, r.grace_period_s), (1_000, 45, 51));
}

#[test]
fn drains_cut_at_their_deadline_double_it() {
    let ds = [
        drain("statefulset/db", 25_000, true),
        drain("statefulset/db", 3_000, false),
    ];
    let rows = recommend(ds, 5_000);
    assert_eq!(
        (rows[0].at_deadline, rows[0].max_s, rows[0].grace_period_s),
        (1, 50, 55)
    );
    assert!(rows[0].rule.starts_with("1 hit the deadline"), "{}", rows[0].rule);
    let t = render(&rows);
    assert!(t.starts_with("NAMESPACE   WORKLOAD         DRAINS   P50    P99     LONGEST   AT DEADLINE   MAX NOW   GRACE NOW   MAX   GRACE   RULE\n"), "{t}");
    assert!(t.contains("\nshop        statefulset/db   2        3.0s   25.0s   25.0s     1             25.0s     30s         50s   55s     1 hit"), "{t}");
    assert!(render(&[]).starts_with("No released drain"));
}
