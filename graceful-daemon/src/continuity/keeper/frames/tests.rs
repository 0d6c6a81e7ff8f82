use super::*;
use crate::continuity::handover::held::key_of;
use crate::continuity::handover::wire::HttpHook;

#[test]
fn every_operation_comes_back_as_it_went() {
    let hook = Record::HttpHook(HttpHook {
        pod: "uid-1".into(),
        container: None,
        query: "policy=drained".into(),
        arrived_ns: 7,
        started_unix_ms: 9,
        progress: None,
    });
    for (op, fds) in [
        (Op::Deposit { record: hook }, 1),
        (Op::Withdraw { dev: 1, ino: 2 }, 0),
        (
            Op::Point {
                dev: 1,
                ino: 2,
                point: graceful_api::Point { ms: 4, inbound: 1 },
            },
            0,
        ),
        (Op::Take, 0),
        (Op::Settled, 0),
        (Op::Given, 0),
    ] {
        assert_eq!(decode(&encode(op.clone()), fds), Ok(op));
    }
}

#[test]
fn a_deposit_without_its_descriptors_is_refused_by_name() {
    let op = Op::Deposit {
        record: Record::GateListener { path: "/g".into() },
    };
    let e = decode(&encode(op), 0).unwrap_err();
    assert_eq!(e.to_string(), "a gate listener came with 0 descriptors, not 1");
    let e = decode(&encode(Op::Take), 2).unwrap_err();
    assert_eq!(e.to_string(), "a keeper operation came with 2 descriptors, not 0");
}

#[test]
fn another_format_or_garbage_is_named_as_such() {
    let other = wire::encode(&serde_json::json!({"version": 4, "op": "take"}));
    assert_eq!(decode(&other, 0), Err(WireError::Version { got: 4 }));
    let unknown = wire::encode(&serde_json::json!({"version": 1, "op": "dance"}));
    assert!(matches!(decode(&unknown, 0), Err(WireError::Json(_))));
    assert!(matches!(decode(b"\0\0", 0), Err(WireError::Truncated(_))));
}

#[test]
fn a_key_names_the_socket_not_the_descriptor() {
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    let dup = std::os::fd::AsFd::as_fd(&a).try_clone_to_owned().unwrap();
    let (c, _d) = std::os::unix::net::UnixStream::pair().unwrap();
    use std::os::fd::AsFd as _;
    assert_eq!(key_of(a.as_fd()).unwrap(), key_of(dup.as_fd()).unwrap());
    assert_ne!(key_of(a.as_fd()).unwrap(), key_of(c.as_fd()).unwrap());
}
