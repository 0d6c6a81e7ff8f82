use super::*;

#[test]
fn requests_parse_with_defaults_and_reject_the_rest() {
    let r = DrainRequest::parse(br#"{"policy":"quiet","max_ms":5000,"started_unix_ms":1}"#).unwrap();
    assert_eq!(
        (r.policy, r.scope, r.max_ms, r.settle_ms),
        (Some(Policy::Quiet), None, Some(5000), None)
    );
    // Only the start is required: the rest comes from annotations and defaults.
    let r = DrainRequest::parse(br#"{"started_unix_ms":7}"#).unwrap();
    assert_eq!(
        r,
        DrainRequest {
            started_unix_ms: 7,
            ..Default::default()
        }
    );
    assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"started_unix_ms":7}"#);
    for bad in [
        &br#"{"policy":"soon","max_ms":1,"started_unix_ms":1}"#[..],
        br#"{"policy":"drained","max_ms":0,"started_unix_ms":1}"#,
        br#"{"policy":"drained","max_ms":1,"started_unix_ms":1,"pod":"someone-else"}"#,
        br#"{"policy":"drained","max_ms":1,"started_unix_ms":1,"after_containers":[""]}"#,
        br#"{"max_ms":1}"#,
        b"{",
        b"",
        // Found by the fuzzer: a newline inside an unknown variant.
        b"{\"policy\":\"a\nb\"}",
    ] {
        let e = DrainRequest::parse(bad).unwrap_err();
        assert!(!e.contains('\n'), "{e}");
    }
    assert_eq!(
        serde_json::to_string(&Reason::ContainersExited).unwrap(),
        "\"containers-exited\""
    );
}

#[test]
fn a_resumed_request_carries_what_the_client_saw_in_order() {
    let r = DrainRequest::parse(
        br#"{"started_unix_ms":1,"resumed":{"inbound_at_start":6,"peak_inbound":6,"timeline":[{"ms":0,"inbound":6},{"ms":40,"inbound":5}]}}"#,
    )
    .unwrap();
    let p = r.resumed.unwrap();
    assert_eq!((p.inbound_at_start, p.peak_inbound, p.timeline.len()), (6, 6, 2));
    assert_eq!(p.timeline[1], Point { ms: 40, inbound: 5 });
    let backwards = br#"{"started_unix_ms":1,"resumed":{"inbound_at_start":1,"peak_inbound":1,"timeline":[{"ms":9,"inbound":1},{"ms":3,"inbound":0}]}}"#;
    assert!(DrainRequest::parse(backwards).unwrap_err().contains("in order"));
    let points: Vec<String> = (0..=MAX_RESUMED_POINTS)
        .map(|i| format!(r#"{{"ms":{i},"inbound":1}}"#))
        .collect();
    let long = format!(
        r#"{{"started_unix_ms":1,"resumed":{{"inbound_at_start":1,"peak_inbound":1,"timeline":[{}]}}}}"#,
        points.join(",")
    );
    assert!(DrainRequest::parse(long.as_bytes())
        .unwrap_err()
        .contains("at most"));
}

#[test]
fn echoed_values_are_clipped_with_their_length() {
    assert_eq!(clip("short", MAX_ECHO), "short");
    let long = "a".repeat(60_000);
    let c = clip(&long, MAX_ECHO);
    assert!(c.starts_with(&"a".repeat(MAX_ECHO)), "{c}");
    assert!(c.ends_with("… (60000 bytes)"), "{c}");
    assert!(c.len() < 200);
    // Never split inside a character.
    assert_eq!(clip(&"é".repeat(200), 3), "ééé… (400 bytes)");
    // A parse error quoting a huge unknown variant stays short.
    let body = format!(r#"{{"policy":"{}","started_unix_ms":1}}"#, "x".repeat(60_000));
    let e = DrainRequest::parse(body.as_bytes()).unwrap_err();
    assert!(e.len() < 1000 && e.contains("bytes)"), "{}", e.len());
}

#[test]
fn progress_so_far_keeps_its_start_and_latest_points() {
    let mut r = Resumed::starting(Point { ms: 0, inbound: 3 });
    r.point(Point { ms: 5, inbound: 3 });
    r.point(Point { ms: 7, inbound: 9 });
    r.point(Point { ms: 6, inbound: 1 });
    assert_eq!((r.inbound_at_start, r.peak_inbound, r.timeline.len()), (3, 9, 2));
    for i in 0..2 * MAX_RESUMED_POINTS as u64 {
        r.point(Point {
            ms: 10 + i,
            inbound: i % 2,
        });
    }
    assert_eq!(r.timeline.len(), MAX_RESUMED_POINTS);
    assert_eq!(r.timeline[0], Point { ms: 0, inbound: 3 });
    assert_eq!(r.timeline.last().unwrap().ms, 9 + 2 * MAX_RESUMED_POINTS as u64);
    assert_eq!(r.peak_inbound, 9);
}

#[test]
fn the_gate_port_is_read_one_way() {
    for (raw, want) in [
        ("9711", Some(9711)),
        (" 09800 ", Some(9800)),
        ("65535", Some(65535)),
    ] {
        assert_eq!(gate_port(raw), want, "{raw:?}");
    }
    for raw in ["0", "65536", "+9800", "009800", "98 00", "", "http", "-1"] {
        assert_eq!(gate_port(raw), None, "{raw:?}");
    }
}

#[test]
fn a_usage_error_is_one_line_that_names_what_is_missing() {
    let missing = "error: the following required arguments were not provided:\n  --recommended\n  --up-to <D>\n\nUsage: kubectl-graceful adopt --recommended --budget <BUDGET>\n\nFor more information, try '--help'.\n";
    assert_eq!(
        usage_error_line(missing),
        "the following required arguments were not provided: --recommended, --up-to <D>"
    );
    let unexpected = "error: unexpected argument '--bogus' found\n\n  tip: to pass '--bogus' as a value, use '-- --bogus'\n\nUsage: graceful daemon [OPTIONS]\n";
    assert_eq!(
        usage_error_line(unexpected),
        "unexpected argument '--bogus' found"
    );
    assert_eq!(usage_error_line(""), "invalid arguments");
}
