use graceful_api::{
    hook_query::MAX_QUERY, DrainRequest, Point, Policy, Resumed, Scope, MAX_AFTER_CONTAINERS,
    MAX_CONTAINER_NAME, MAX_EXCLUSIONS_TEXT, MAX_RESUMED_POINTS,
};
use proptest::prelude::*;

use super::*;
use crate::{continuity::handover::wire, node::resolver::path::MAX_CONTAINER_ID_LEN};

/// The largest request a pod can make: every list at its bound, every
/// string of the characters JSON escapes most, every number at its widest.
fn worst_request() -> DrainRequest {
    let points = (0..MAX_RESUMED_POINTS as u64)
        .map(|i| Point {
            ms: u64::MAX - MAX_RESUMED_POINTS as u64 + i,
            inbound: u64::MAX - (i % 2),
        })
        .collect();
    DrainRequest {
        policy: Some(Policy::Quiet),
        scope: Some(Scope::Container),
        min_ms: Some(u64::MAX),
        max_ms: Some(u64::MAX),
        settle_ms: Some(u64::MAX),
        quiet_ms: Some(u64::MAX),
        after_containers: Some(vec!["x".repeat(MAX_CONTAINER_NAME); MAX_AFTER_CONTAINERS]),
        // A control character is escaped as \u0001 in the request, and
        // its backslash again in the record's string.
        ignore_ports: Some("\u{1}".repeat(MAX_EXCLUSIONS_TEXT)),
        ignore_peers: Some("\u{1}".repeat(MAX_EXCLUSIONS_TEXT)),
        started_unix_ms: u64::MAX,
        resumed: Some(Resumed {
            inbound_at_start: u64::MAX,
            peak_inbound: u64::MAX,
            timeline: points,
        }),
    }
}

/// A record, through a frame, as a taker reads it.
fn through_a_frame(r: &Record) -> Record {
    let bytes = wire::encode(&RecordFrame {
        version: VERSION,
        record: r.clone(),
    });
    assert!(bytes.len() - 4 <= MAX_FRAME, "{} bytes", bytes.len());
    wire::decode_record(&bytes, 1).unwrap()
}

#[test]
fn every_admissible_hook_fits_a_frame() {
    let body = serde_json::to_vec(&worst_request()).unwrap();
    let request = DrainRequest::parse(&body).expect("the worst request is admissible");
    let pod = "f".repeat(36);
    let container = "c".repeat(MAX_CONTAINER_ID_LEN);
    let exec = Hook::exec(pod.clone(), Some(container.clone()), u32::MAX, request, u64::MAX);
    let r = of(&exec).expect("the worst exec hook fits");
    eprintln!(
        "the worst exec hook's record: {} of {MAX_FRAME} bytes",
        frame_len(&r)
    );
    assert_eq!(hook_of(through_a_frame(&r)).unwrap().unwrap(), exec);

    // The query at its bound, of the characters JSON escapes.
    let query = "\\\"".repeat(MAX_QUERY / 2);
    let http = Hook {
        pod,
        container: Some(container),
        request: DrainRequest::default(),
        arrived_ns: u64::MAX,
        origin: Origin::Http {
            query: query.clone(),
            started_unix_ms: u64::MAX,
        },
        progress: exec.progress.clone(),
    };
    let r = of(&http).expect("the worst httpGet hook fits");
    eprintln!(
        "the worst httpGet hook's record: {} of {MAX_FRAME} bytes",
        frame_len(&r)
    );
    match through_a_frame(&r) {
        Record::HttpHook(h) => assert_eq!(h.query, query),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_padded_request_is_carried_as_parsed_not_as_sent() {
    // Just under the body's bound, nearly all of it whitespace: what the
    // record carries is the request, a few dozen bytes.
    let mut body = br#"{"policy":"drained","started_unix_ms":5"#.to_vec();
    body.resize(graceful_api::MAX_BODY - 1, b' ');
    body.push(b'}');
    let request = DrainRequest::parse(&body).unwrap();
    let hook = Hook::exec("p".into(), None, 7, request, 9);
    let r = of(&hook).unwrap();
    assert!(frame_len(&r) < 512, "{} bytes", frame_len(&r));
}

#[test]
fn a_reconnecting_clients_timeline_travels_once() {
    let resumed = Resumed {
        inbound_at_start: 3,
        peak_inbound: 4,
        timeline: vec![Point { ms: 0, inbound: 3 }, Point { ms: 9, inbound: 4 }],
    };
    let request = DrainRequest {
        started_unix_ms: 1,
        resumed: Some(resumed.clone()),
        ..DrainRequest::default()
    };
    let hook = Hook::exec("p".into(), None, 7, request, 9);
    assert_eq!(hook.progress, Some(resumed));
    // The request keeps a marker: the drain's start is bounded as a reconnect's.
    assert_eq!(hook.request.resumed, Some(Resumed::default()));
    let Record::ExecHook(h) = of(&hook).unwrap() else {
        panic!()
    };
    assert!(!h.request.contains("timeline\":[{"), "{}", h.request);
}

#[test]
fn an_earlier_releases_record_with_the_timeline_in_its_request_reads_the_same() {
    let record = Record::ExecHook(wire::ExecHook {
        pod: "p".into(),
        container: None,
        pid: 7,
        request: format!(
            "{{ \"started_unix_ms\": 1, \"resumed\": {{\"inbound_at_start\":1,\"peak_inbound\":1,\"timeline\":[{{\"ms\":0,\"inbound\":1}}]}} {} }}",
            " ".repeat(1000)
        ),
        arrived_ns: 9,
        progress: Some(Resumed::starting(Point { ms: 0, inbound: 1 })),
    });
    let hook = hook_of(record).unwrap().unwrap();
    assert_eq!(hook.request.resumed, Some(Resumed::default()));
    assert_eq!(hook.progress.as_ref().unwrap().timeline.len(), 1);
    assert!(frame_len(&of(&hook).unwrap()) < 512);
}

fn name() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-zA-Z0-9._-]{1,64}").unwrap()
}

fn text() -> impl Strategy<Value = String> {
    // Any characters, control characters and quotes among them.
    proptest::collection::vec(any::<char>(), 0..64)
        .prop_map(|c| c.into_iter().collect::<String>())
        .prop_map(|s| graceful_api::clip(&s, MAX_EXCLUSIONS_TEXT / 4))
}

fn request() -> impl Strategy<Value = DrainRequest> {
    (
        (
            proptest::option::of(prop_oneof![Just(Policy::Drained), Just(Policy::Quiet)]),
            proptest::option::of(prop_oneof![Just(Scope::Pod), Just(Scope::Container)]),
            proptest::option::of(any::<u64>()),
            proptest::option::of(1..u64::MAX),
            proptest::option::of(any::<u64>()),
        ),
        proptest::option::of(proptest::collection::vec(name(), 0..MAX_AFTER_CONTAINERS)),
        proptest::option::of(text()),
        proptest::option::of(text()),
        any::<u64>(),
        proptest::option::of(proptest::collection::vec(
            (any::<u32>(), any::<u64>()),
            0..MAX_RESUMED_POINTS,
        )),
    )
        .prop_map(
            |((policy, scope, min, max, settle), after, ports, peers, started, points)| DrainRequest {
                policy,
                scope,
                min_ms: min,
                max_ms: max,
                settle_ms: settle,
                quiet_ms: None,
                after_containers: after,
                ignore_ports: ports,
                ignore_peers: peers,
                started_unix_ms: started,
                resumed: points.map(|p| {
                    let mut ms = 0u64;
                    Resumed {
                        inbound_at_start: 1,
                        peak_inbound: 1,
                        timeline: p
                            .into_iter()
                            .map(|(d, inbound)| {
                                ms = ms.saturating_add(u64::from(d));
                                Point { ms, inbound }
                            })
                            .collect(),
                    }
                }),
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every request the gate admits makes a record that fits a frame, and
    /// a taker reads back the very hook.
    #[test]
    fn every_admitted_request_makes_a_record_a_taker_reads_back(r in request(), pid in any::<u32>(), at in any::<u64>()) {
        let body = serde_json::to_vec(&r).unwrap();
        prop_assume!(body.len() <= graceful_api::MAX_BODY);
        let Ok(parsed) = DrainRequest::parse(&body) else {
            return Ok(());
        };
        let hook = Hook::exec("0a1b2c3d-0000-4000-8000-000000000001".into(), Some("c".repeat(64)), pid, parsed, at);
        let record = of(&hook).expect("an admitted request fits");
        prop_assert_eq!(hook_of(through_a_frame(&record)).unwrap().unwrap(), hook);
    }
}
