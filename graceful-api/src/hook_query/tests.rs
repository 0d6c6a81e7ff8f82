use super::*;

#[test]
fn every_setting_under_its_flag_name() {
    let q = parse(
        "policy=quiet&scope=container&min=0s&max=25s&settle=200ms&quiet=1m30s&after-containers=app,%20waf&container=app",
        7,
    )
    .unwrap();
    let r = &q.request;
    assert_eq!(r.policy, Some(Policy::Quiet));
    assert_eq!(r.scope, Some(Scope::Container));
    assert_eq!(
        (r.min_ms, r.max_ms, r.settle_ms, r.quiet_ms),
        (Some(0), Some(25_000), Some(200), Some(90_000))
    );
    assert_eq!(
        r.after_containers,
        Some(vec!["app".to_string(), "waf".to_string()])
    );
    assert_eq!(r.started_unix_ms, 7);
    assert_eq!(q.container.as_deref(), Some("app"));
}

#[test]
fn nothing_given_is_every_setting_left_to_annotations_and_defaults() {
    let q = parse("", 1).unwrap();
    assert_eq!(
        q.request,
        DrainRequest {
            started_unix_ms: 1,
            ..DrainRequest::default()
        }
    );
    assert_eq!(q.container, None);
    // Empty pairs are nothing.
    assert_eq!(parse("&&max=2s&", 1).unwrap().request.max_ms, Some(2000));
}

#[test]
fn each_mistake_is_named() {
    for (query, says) in [
        (
            "polcy=drained",
            "unknown setting \"polcy\": the gate takes policy, scope,",
        ),
        ("policy=fast", "policy: drained or quiet, not \"fast\""),
        ("scope=node", "scope: pod or container, not \"node\""),
        ("max=0s", "max: must be above zero"),
        ("max=soon", "max: invalid duration \"soon\""),
        ("settle=", "settle has no value"),
        ("min", "min has no value"),
        ("max=2s&max=3s", "max is given twice"),
        ("container=App_1", "container: \"App_1\" is not a container name"),
        ("max=%zz", "bad escape in \"%zz\""),
        ("max=%ff", "is not UTF-8 once decoded"),
    ] {
        let e = parse(query, 0).unwrap_err();
        assert!(e.contains(says), "{query}: {e}");
        assert!(!e.contains('\n'), "{query}: {e}");
    }
    assert!(parse(&"a".repeat(MAX_QUERY + 1), 0)
        .unwrap_err()
        .contains("over 4096 bytes"));
}

#[test]
fn a_long_value_is_clipped_in_the_error() {
    let e = parse(&format!("policy={}", "x".repeat(3000)), 0).unwrap_err();
    assert!(e.len() < 400, "{} bytes", e.len());
}

#[test]
fn exclusions_are_carried_as_written_for_the_agent_to_check() {
    let q = parse("ignore-ports=9090%2C15020&ignore-peers=node,10.0.0.0%2F8", 1).unwrap();
    assert_eq!(q.request.ignore_ports.as_deref(), Some("9090,15020"));
    assert_eq!(q.request.ignore_peers.as_deref(), Some("node,10.0.0.0/8"));
    // A bad value is not the query's to refuse: the drain must still run.
    let q = parse("ignore-ports=99999", 1).unwrap();
    assert_eq!(q.request.ignore_ports.as_deref(), Some("99999"));
    assert_eq!(
        parse("ignore-ports=", 1).unwrap_err(),
        "ignore-ports has no value"
    );
}
