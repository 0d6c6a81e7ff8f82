use super::*;
use graceful_api::Point;

fn exec_hook() -> Record {
    Record::ExecHook(ExecHook {
        pod: "0b8c7d2e-1111-4a4a-9c9c-000000000001".into(),
        container: Some("containerd://4f1e".into()),
        pid: 4242,
        request: r#"{"policy":"drained","max_ms":25000}"#.into(),
        arrived_ns: 123_456_789,
        progress: Some(Resumed {
            inbound_at_start: 3,
            peak_inbound: 4,
            timeline: vec![Point { ms: 0, inbound: 3 }, Point { ms: 40, inbound: 4 }],
        }),
    })
}

#[test]
fn every_frame_round_trips() {
    let r = RecordFrame {
        version: VERSION,
        record: exec_hook(),
    };
    assert_eq!(decode::<RecordFrame>(&encode(&r)).unwrap(), r);
    let v = Verdict {
        version: VERSION,
        taken: false,
        why: Some("no".into()),
    };
    assert_eq!(decode::<Verdict>(&encode(&v)).unwrap(), v);
}

/// Format 1 as this release writes it, kept as recorded: a later release
/// must still read it (or say, in one line, that it cannot).
const RECORDED_V1: &[&str] = &[
    r#"{"version":1,"pid":77,"agent":"0.1.0","paused_ns":5000,"records":4}"#,
    r#"{"version":1,"record":{"kind":"gate_listener","path":"/var/run/graceful/gate.sock"}}"#,
    r#"{"version":1,"record":{"kind":"http_listener","uid":"u1","pod":"shop/web-1","port":9711}}"#,
    r#"{"version":1,"record":{"kind":"exec_hook","pod":"u2","container":null,"pid":9,"request":"{}","arrived_ns":1}}"#,
    r#"{"version":1,"record":{"kind":"http_hook","pod":"u1","container":"c","query":"policy=drained","arrived_ns":2,"started_unix_ms":3}}"#,
    r#"{"version":1,"records":4}"#,
];

fn framed(json: &str) -> Vec<u8> {
    let mut b = (json.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(json.as_bytes());
    b
}

#[test]
fn the_recorded_format_1_reads() {
    let offer: Offer = decode(&framed(RECORDED_V1[0])).unwrap();
    assert_eq!((offer.pid, offer.records), (77, 4));
    let want_fds = [1, 2, 1, 1];
    for (json, fds) in RECORDED_V1[1..5].iter().zip(want_fds) {
        decode_record(&framed(json), fds).unwrap_or_else(|e| panic!("{json}: {e}"));
    }
    let done: Done = decode(&framed(RECORDED_V1[5])).unwrap();
    assert_eq!(done.records, 4);
}

#[test]
fn another_version_is_named_as_such() {
    let json = RECORDED_V1[0].replace("\"version\":1", "\"version\":4");
    assert_eq!(
        decode::<Offer>(&framed(&json)).unwrap_err(),
        WireError::Version { got: 4 }
    );
    assert_eq!(
        WireError::Version { got: 4 }.to_string(),
        "handover format 4, this agent reads 1 to 3"
    );
}

#[test]
fn a_pod_socket_gate_is_format_3_and_no_older_frame_carries_one() {
    let r = Record::PodSocket {
        uid: "u1".into(),
        pod: "shop/web-1".into(),
    };
    assert_eq!((r.since(), r.fds(), r.is_listener()), (3, 2, true));
    let v3 = encode(&RecordFrame {
        version: 3,
        record: r.clone(),
    });
    assert_eq!(decode_record(&v3, 2).unwrap(), r);
    assert_eq!(
        decode_record(&v3, 1).unwrap_err().to_string(),
        "a pod socket gate came with 1 descriptors, not 2"
    );
    // Format 2 has no such record: a frame that says so is refused whole.
    let v2 = encode(&RecordFrame {
        version: 2,
        record: r,
    });
    let e = decode_record(&v2, 2).unwrap_err().to_string();
    assert!(e.contains("a pod socket gate in a frame of format 2"), "{e}");
    // Every other record is in every format.
    for old in [exec_hook(), Record::GateListener { path: "/g".into() }] {
        assert_eq!(old.since(), 1);
    }
}

/// Format 1's hello, as that release writes it: no `reads`.
const RECORDED_V1_HELLO: &str = r#"{"version":1,"pid":12,"agent":"0.1.0"}"#;

#[test]
fn the_giver_writes_the_newest_format_both_read() {
    // A taker of format 1 (the release before this one): format 1.
    let old: Hello = decode(&framed(RECORDED_V1_HELLO)).unwrap();
    assert_eq!(old.format(), Some(1));
    // This release's taker, which an agent of format 1 also reads.
    let ours = Hello::ours(5, "0.1.0");
    let bytes = encode(&ours);
    assert_eq!(ours.version, 1, "format 1's giver reads only format 1 hellos");
    assert_eq!(decode::<Hello>(&bytes).unwrap().format(), Some(VERSION));
    // A later taker that still reads format 1 and 2: this agent's newest.
    let later = r#"{"version":1,"pid":1,"agent":"9","reads":7}"#;
    assert_eq!(decode::<Hello>(&framed(later)).unwrap().format(), Some(VERSION));
}

#[test]
fn format_1_carries_no_progress_and_format_2_carries_it_whole() {
    let r = exec_hook();
    let v1 = RecordFrame {
        version: 1,
        record: r.clone().in_format(1),
    };
    let bytes = encode(&v1);
    assert!(!String::from_utf8_lossy(&bytes).contains("progress"));
    // What an agent of format 1 reads: the frame of its own release.
    let Record::ExecHook(h) = decode_record(&bytes, 1).unwrap() else {
        panic!()
    };
    assert_eq!(h.progress, None);
    let v2 = RecordFrame {
        version: 2,
        record: r.clone().in_format(2),
    };
    assert_eq!(decode_record(&encode(&v2), 1).unwrap(), r);
}

#[test]
fn progress_starts_at_a_hooks_first_point_and_listeners_have_none() {
    let mut r = Record::HttpHook(HttpHook {
        pod: "u".into(),
        container: None,
        query: String::new(),
        arrived_ns: 0,
        started_unix_ms: 0,
        progress: None,
    });
    assert!(r.carry_on(Point { ms: 3, inbound: 5 }));
    assert!(!r.carry_on(Point { ms: 9, inbound: 5 }));
    assert!(r.carry_on(Point { ms: 12, inbound: 2 }));
    let Record::HttpHook(h) = &r else { panic!() };
    let p = h.progress.as_ref().unwrap();
    assert_eq!((p.inbound_at_start, p.peak_inbound, p.timeline.len()), (5, 5, 2));
    let mut l = Record::GateListener { path: "/g".into() };
    assert!(!l.carry_on(Point { ms: 1, inbound: 1 }));
}

#[test]
fn bad_frames_say_what_is_wrong() {
    assert_eq!(
        decode::<Done>(&[0, 0]).unwrap_err(),
        WireError::Truncated("length")
    );
    assert_eq!(
        decode::<Done>(&[0, 0, 0, 9, b'{']).unwrap_err(),
        WireError::Truncated("body")
    );
    let big = ((MAX_READ_FRAME + 1) as u32).to_be_bytes();
    assert_eq!(
        decode::<Done>(&big).unwrap_err(),
        WireError::TooLarge(MAX_READ_FRAME + 1)
    );
    let mut extra = framed(RECORDED_V1[5]);
    extra.push(0);
    assert_eq!(decode::<Done>(&extra).unwrap_err(), WireError::Trailing(1));
    assert!(matches!(
        decode::<Done>(&framed("{\"version\":1}")),
        Err(WireError::Json(_))
    ));
    assert!(matches!(
        decode_record(&framed(r#"{"version":1,"record":{"kind":"socket_of_doom"}}"#), 1),
        Err(WireError::Json(_))
    ));
    assert_eq!(
        decode_record(&framed(RECORDED_V1[2]), 1).unwrap_err(),
        WireError::Fds {
            what: "httpGet listener",
            got: 1,
            want: 2
        }
    );
}
