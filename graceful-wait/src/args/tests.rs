use graceful_api::codec;

use super::*;

fn p(args: &[&str]) -> Result<Args, ArgsError> {
    parse(args.iter().map(|s| s.to_string()), |_| None)
}

#[test]
fn flags_and_durations() {
    let a = p(&[
        "--policy",
        "quiet",
        "--scope=container",
        "--min",
        "500ms",
        "--max",
        "1m",
        "--after-containers",
        "app,db",
    ])
    .unwrap();
    assert_eq!(a.policy.as_deref(), Some("quiet"));
    assert_eq!(a.scope.as_deref(), Some("container"));
    assert_eq!(a.min, Some(Duration::from_millis(500)));
    assert_eq!(a.max, Some(Duration::from_secs(60)));
    assert_eq!(a.after_containers, Some(vec!["app".into(), "db".into()]));
    assert_eq!(
        codec::request(&a.request(7)),
        r#"{"policy":"quiet","scope":"container","min_ms":500,"max_ms":60000,"after_containers":["app","db"],"started_unix_ms":7}"#
    );
    // Flags left out are left to the pod's annotations and the agent.
    assert_eq!(
        codec::request(&p(&[]).unwrap().request(1)),
        r#"{"started_unix_ms":1}"#
    );
    assert_eq!(duration("--max", "1m30s"), Ok(Duration::from_secs(90)));
    // The one syntax of every flag, annotation and query: decimals too.
    assert_eq!(
        p(&["--max", "1.5s"]).unwrap().max,
        Some(Duration::from_millis(1500))
    );
    assert_eq!(p(&["--help"]), Err(ArgsError::Help));
    assert_eq!(
        p(&["--settle", "soon"]),
        Err(ArgsError::Bad(
            "--settle: invalid duration \"soon\": write it like 500ms, 2s or 1m".into()
        ))
    );
    assert!(p(&["--policy", "soon"]).is_err());
    assert!(p(&["--min"]).is_err());
    assert!(p(&["--max", "0s"]).is_err());
    assert!(p(&["--bogus"]).is_err());
    assert!(duration("--min", "5x").is_err());
    let env = parse(Vec::new(), |k| {
        (k == "GRACEFUL_SOCKET").then(|| "/x.sock".to_string())
    })
    .unwrap();
    assert_eq!(env.socket, "/x.sock");
}

#[test]
fn exclusions_go_to_the_agent_as_given() {
    let a = p(&["--ignore-ports", "9090,15020", "--ignore-peers=node,10.0.0.0/8"]).unwrap();
    assert_eq!(
        codec::request(&a.request(3)),
        r#"{"ignore_ports":"9090,15020","ignore_peers":"node,10.0.0.0/8","started_unix_ms":3}"#
    );
    // A bad value is the agent's to report: the hook still drains.
    let bad = p(&["--ignore-ports", "99999\"x\\"]).unwrap();
    let json = codec::request(&bad.request(1));
    let req = graceful_api::DrainRequest::parse(json.as_bytes()).unwrap();
    assert_eq!(req.ignore_ports.as_deref(), Some("99999\"x\\"));
}
