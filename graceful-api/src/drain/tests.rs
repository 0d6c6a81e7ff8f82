use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::{
    codec::{
        fields,
        tests::{field, policy, scope, text},
    },
    Source,
};

fn accepted() -> impl Strategy<Value = Accepted> {
    (
        (policy(), scope(), proptest::array::uniform4(any::<u64>())),
        proptest::collection::vec(text(), 0..3),
        proptest::collection::vec(any::<u16>(), 0..3),
        proptest::option::of(any::<u64>()),
        proptest::collection::btree_map(text(), Just(Source::Flag), 0..3),
        proptest::collection::vec(text(), 0..3),
    )
        .prop_map(
            |(
                (policy, scope, [min_ms, max_ms, settle_ms, quiet_ms]),
                after,
                ports,
                grace,
                sources,
                warnings,
            )| Accepted {
                policy,
                scope,
                min_ms,
                max_ms,
                settle_ms,
                quiet_ms,
                after_containers: after,
                ignore_ports: ports,
                ignore_peers: Vec::new(),
                grace_period_ms: grace,
                sources: sources.into_iter().collect::<BTreeMap<_, _>>(),
                warnings,
            },
        )
}

fn report() -> impl Strategy<Value = DrainReport> {
    let reason = prop_oneof![
        Just(Reason::Drained),
        Just(Reason::Quiet),
        Just(Reason::Deadline),
        Just(Reason::ContainersExited),
    ];
    (
        (text(), proptest::option::of(text()), scope(), reason, policy()),
        proptest::array::uniform8(any::<u64>()),
        proptest::option::of(any::<u64>()),
        proptest::collection::vec((any::<u64>(), any::<u64>()), 0..4),
        proptest::collection::vec((text(), any::<u64>()), 0..3),
        (any::<u64>(), any::<bool>()),
    )
        .prop_map(
            |(
                (pod, container, scope, reason, policy),
                n,
                after,
                timeline,
                ignored,
                (at_release, uncounted),
            )| {
                DrainReport {
                    pod,
                    container,
                    scope,
                    report: Report {
                        reason,
                        policy,
                        waited_ms: n[0],
                        inbound_at_start: n[1],
                        peak_inbound: n[2],
                        inbound_at_release: n[3],
                        new_connections: n[4],
                        start_ns: n[5],
                        release_ns: n[6],
                        after_last_close_ms: after,
                        timeline: timeline
                            .into_iter()
                            .map(|(ms, inbound)| Point { ms, inbound })
                            .collect(),
                        cgroups: vec![n[7]],
                        ignored: ignored
                            .into_iter()
                            .map(|(rule, connections)| Ignored { rule, connections })
                            .collect(),
                        ignored_at_release: at_release,
                        uncounted,
                    },
                }
            },
        )
}

fn line() -> impl Strategy<Value = Line> {
    prop_oneof![
        accepted().prop_map(|a| Line::Accepted(Box::new(a))),
        (any::<u64>(), any::<u64>()).prop_map(|(ms, inbound)| Line::Progress { ms, inbound }),
        report().prop_map(|r| Line::Report(Box::new(r))),
    ]
}

/// A member of `line` as graceful-wait reads it: decoded if a string, its
/// JSON text otherwise.
fn member(line: &str, key: &str) -> Option<String> {
    field(line, key).map(|f| f.text().to_owned())
}

fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap()
}

proptest! {
    /// Every line the agent writes reads back as written with serde (the
    /// CLI, the plugin, the tests), and member by member with the std-only
    /// codec, the members graceful-wait acts on as serde wrote them.
    #[test]
    fn every_line_reads_back_by_serde_and_by_member(l in line()) {
        let text = json(&l);
        prop_assert_eq!(&serde_json::from_str::<Line>(&text).unwrap(), &l);
        let type_ = member(&text, "type");
        match &l {
            Line::Accepted(a) => {
                prop_assert_eq!(type_, Some("accepted".to_owned()));
                prop_assert_eq!(member(&text, "max_ms"), Some(a.max_ms.to_string()));
                prop_assert_eq!(member(&text, "policy"), Some(a.policy.as_str().to_owned()));
                prop_assert_eq!(member(&text, "scope"), serde_json::to_value(a.scope).unwrap().as_str().map(str::to_owned));
                prop_assert_eq!(member(&text, "warnings"), Some(json(&a.warnings)));
            }
            Line::Progress { ms, inbound } => {
                prop_assert_eq!(type_, Some("progress".to_owned()));
                prop_assert_eq!(member(&text, "ms"), Some(ms.to_string()));
                prop_assert_eq!(member(&text, "inbound"), Some(inbound.to_string()));
            }
            Line::Report(r) => {
                prop_assert_eq!(type_, Some("report".to_owned()));
                prop_assert_eq!(member(&text, "reason"), Some(r.report.reason.as_str().to_owned()));
                prop_assert_eq!(member(&text, "pod"), Some(r.pod.clone()));
                prop_assert_eq!(member(&text, "waited_ms"), Some(r.report.waited_ms.to_string()));
            }
        }
        prop_assert_eq!(member(&text, "error"), None);
    }

    /// An error reads as one member, whatever it says.
    #[test]
    fn an_error_reads_back_by_serde_and_by_member(error in text()) {
        let e = ErrorBody { error };
        let text = json(&e);
        prop_assert_eq!(&serde_json::from_str::<ErrorBody>(&text).unwrap(), &e);
        prop_assert_eq!(fields(&text).map(|m| m.len()), Some(1));
        prop_assert_eq!(member(&text, "error"), Some(e.error.clone()));
        prop_assert_eq!(member(&text, "type"), None);
    }

    /// The feed's events read back as written.
    #[test]
    fn events_read_back_as_written(r in report(), id in any::<u64>(), inbound in proptest::option::of(any::<u64>())) {
        let active = ActiveDrain {
            id,
            pod: r.pod.clone(),
            container: r.container.clone(),
            scope: r.scope,
            policy: r.report.policy,
            max_ms: r.report.waited_ms,
            start_ns: r.report.start_ns,
            cgroups: r.report.cgroups.clone(),
            ignoring: r.report.ignored.iter().map(|i| i.rule.clone()).collect(),
            inbound,
        };
        for e in [
            DrainEvent::DrainStarted(active.clone()),
            DrainEvent::DrainReleased(Box::new(r.clone())),
            DrainEvent::DrainAbandoned(active.clone()),
        ] {
            prop_assert_eq!(&serde_json::from_str::<DrainEvent>(&json(&e)).unwrap(), &e);
        }
    }
}

/// The names the contract carries, as the docs and the dashboards use
/// them: a change here is a change of the wire.
#[test]
fn the_lines_carry_their_documented_names() {
    let progress = json(&Line::Progress { ms: 1500, inbound: 3 });
    assert_eq!(progress, r#"{"type":"progress","ms":1500,"inbound":3}"#);
    let started = json(&DrainEvent::DrainStarted(ActiveDrain {
        id: 1,
        pod: "shop/web-0".into(),
        container: None,
        scope: Scope::Pod,
        policy: Policy::Drained,
        max_ms: 25_000,
        start_ns: 7,
        cgroups: vec![42],
        ignoring: vec![],
        inbound: None,
    }));
    assert_eq!(
        started,
        r#"{"type":"drain_started","id":1,"pod":"shop/web-0","container":null,"scope":"pod","policy":"drained","max_ms":25000,"start_ns":7,"cgroups":[42]}"#
    );
}
