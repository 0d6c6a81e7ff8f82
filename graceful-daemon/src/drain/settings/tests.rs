use super::*;

fn facts(annotations: &[(&str, &str)], grace: Option<i64>) -> PodFacts {
    PodFacts {
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        container: Some("app".into()),
        grace_period_seconds: grace,
        deletion_requested_unix_ms: None,
        stop_ranks: Default::default(),
        mesh_ports: Vec::new(),
    }
}

#[test]
fn a_mesh_proxys_own_ports_are_left_out_beside_what_is_asked() {
    let mut f = facts(&[("graceful.dev/ignore-ports", "9090,15020")], Some(30));
    f.mesh_ports = vec![15020, 15021, 15090];
    let a = resolve(&DrainRequest::default(), &f, BUDGET);
    assert_eq!(a.ignore_ports, vec![9090, 15020, 15021, 15090]);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
}

const BUDGET: Duration = Duration::from_secs(5);

#[test]
fn defaults_come_from_the_grace_period_or_the_fallback() {
    let req = DrainRequest::default();
    let a = resolve(&req, &facts(&[], Some(60)), BUDGET);
    assert_eq!((a.max_ms, a.min_ms, a.settle_ms), (55_000, 2000, 1000));
    assert_eq!(a.sources["max_ms"], Source::GracePeriod);
    assert_eq!(a.sources["policy"], Source::Default);
    assert_eq!(a.grace_period_ms, Some(60_000));
    assert!(a.warnings.is_empty());
    // No API: the fallback, 30 s less 5 s.
    let a = resolve(&req, &PodFacts::default(), BUDGET);
    assert_eq!((a.max_ms, a.sources["max_ms"]), (25_000, Source::Default));
    // A short grace period still leaves half of it to drain.
    let a = resolve(&req, &facts(&[], Some(4)), BUDGET);
    assert_eq!(a.max_ms, 2000);
}

#[test]
fn annotations_win_over_flags_and_this_container_over_the_pod() {
    let req = DrainRequest {
        policy: Some(Policy::Drained),
        max_ms: Some(10_000),
        settle_ms: Some(300),
        ..Default::default()
    };
    let f = facts(
        &[
            ("graceful.dev/policy", "quiet"),
            ("graceful.dev/max", "20s"),
            ("graceful.dev/max.app", "40s"),
            ("graceful.dev/max.proxy", "50s"),
            ("graceful.dev/after-containers", " app-a, app-b ,"),
            ("other.example/max", "1s"),
        ],
        Some(60),
    );
    let a = resolve(&req, &f, BUDGET);
    assert_eq!(a.policy, Policy::Quiet);
    assert_eq!(a.sources["policy"], Source::PodAnnotation);
    assert_eq!(
        (a.max_ms, a.sources["max_ms"]),
        (40_000, Source::ContainerAnnotation)
    );
    assert_eq!((a.settle_ms, a.sources["settle_ms"]), (300, Source::Flag));
    assert_eq!(a.after_containers, ["app-a", "app-b"]);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
}

#[test]
fn a_deadline_past_the_grace_period_is_clamped_and_reported() {
    let req = DrainRequest {
        max_ms: Some(30_000),
        ..Default::default()
    };
    let a = resolve(&req, &facts(&[], Some(30)), BUDGET);
    assert_eq!(a.max_ms, 25_000);
    assert_eq!(a.warnings.len(), 1);
    assert!(
        a.warnings[0].starts_with("misconfiguration: max 30s is at or past the pod's grace period 30s"),
        "{:?}",
        a.warnings
    );
    // Just under it is the user's call.
    let req = DrainRequest {
        max_ms: Some(29_000),
        min_ms: Some(40_000),
        ..Default::default()
    };
    let a = resolve(&req, &facts(&[], Some(30)), BUDGET);
    assert_eq!((a.max_ms, a.min_ms), (29_000, 29_000));
    assert!(a.warnings.is_empty());
}

#[test]
fn bad_and_unknown_annotations_are_reported_and_skipped() {
    let req = DrainRequest {
        max_ms: Some(8000),
        ..Default::default()
    };
    let f = facts(
        &[
            ("graceful.dev/max", "soon"),
            ("graceful.dev/policy", "eventually"),
            ("graceful.dev/maxx", "1s"),
            ("graceful.dev/after-containers", ""),
        ],
        None,
    );
    let a = resolve(&req, &f, BUDGET);
    assert_eq!((a.max_ms, a.sources["max_ms"]), (8000, Source::Flag));
    assert_eq!(a.policy, Policy::Drained);
    assert!(a.after_containers.is_empty());
    let w = a.warnings.join("\n");
    assert!(w.contains("annotation graceful.dev/max: invalid duration"), "{w}");
    assert!(
        w.contains("annotation graceful.dev/policy: policy must be drained or quiet"),
        "{w}"
    );
    assert!(w.contains("unknown annotation graceful.dev/maxx"), "{w}");
    assert!(a.warnings.iter().all(|w| !w.contains('\n')));
}

#[test]
fn the_gate_annotations_are_known_but_not_settings() {
    let f = facts(
        &[
            ("graceful.dev/gate", "http"),
            ("graceful.dev/gate-port", "9711"),
            ("graceful.dev/gate-portt", "9711"),
            // What injection by label writes on every pod it injects.
            ("graceful.dev/injected", "exec"),
            (
                "graceful.dev/inject-skipped",
                "proxy: a preStop hook of its own, left as it is",
            ),
            ("graceful.dev/inject-gate", "http"),
        ],
        None,
    );
    let a = resolve(&DrainRequest::default(), &f, BUDGET);
    assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
    assert!(a.warnings[0].contains("unknown annotation graceful.dev/gate-portt"));
}

#[test]
fn exclusions_take_the_same_precedence_and_bad_ones_are_left_out() {
    let req = DrainRequest {
        ignore_ports: Some("9090".into()),
        ignore_peers: Some("10.0.0.0/8".into()),
        ..Default::default()
    };
    // Flags alone.
    let a = resolve(&req, &facts(&[], Some(30)), BUDGET);
    assert_eq!(a.ignore_ports, vec![9090]);
    assert_eq!(
        a.ignore_peers,
        graceful_api::exclusions::parse_peers("10.0.0.0/8").unwrap()
    );
    assert_eq!(a.sources["ignore_ports"], Source::Flag);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    // This container's annotation over the pod's over the flag.
    let f = facts(
        &[
            ("graceful.dev/ignore-ports", "15020"),
            ("graceful.dev/ignore-peers", "node"),
            ("graceful.dev/ignore-peers.app", "node, fd00::/8"),
            ("graceful.dev/ignore-peers.proxy", "192.168.0.0/16"),
        ],
        Some(30),
    );
    let a = resolve(&req, &f, BUDGET);
    assert_eq!(a.ignore_ports, vec![15020]);
    assert_eq!(a.sources["ignore_ports"], Source::PodAnnotation);
    assert_eq!(
        a.ignore_peers.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["node", "fd00::/8"]
    );
    assert_eq!(a.sources["ignore_peers"], Source::ContainerAnnotation);
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    // A bad annotation falls back to the flag; a bad flag to nothing.
    let bad = DrainRequest {
        ignore_ports: Some("70000".into()),
        ignore_peers: Some("10.0.0.0/8".into()),
        ..Default::default()
    };
    let f = facts(&[("graceful.dev/ignore-peers", "10.0.0.1/8")], Some(30));
    let a = resolve(&bad, &f, BUDGET);
    assert!(a.ignore_ports.is_empty());
    assert_eq!(a.sources["ignore_ports"], Source::Default);
    assert_eq!(a.ignore_peers.len(), 1);
    assert_eq!(a.sources["ignore_peers"], Source::Flag);
    assert_eq!(
        a.warnings,
        [
            "the hook's ignore-ports: \"70000\" is not a port (1 to 65535); ignored",
            "annotation graceful.dev/ignore-peers: \"10.0.0.1/8\" has bits set past its prefix: write 10.0.0.0/8; ignored",
        ]
    );
    // The keys are known ones, per container too.
    let f = facts(&[("graceful.dev/ignore-ports.app", "9090")], Some(30));
    assert!(resolve(&DrainRequest::default(), &f, BUDGET).warnings.is_empty());
}
