use super::*;

fn limits(total: usize, per_caller: usize) -> Arc<Shares> {
    Shares::new(Limits { total, per_caller })
}

#[test]
fn one_caller_cannot_take_more_than_its_share_and_gets_it_back() {
    let s = limits(10, 3);
    let held: Vec<_> = (0..3).map(|_| s.connect("pod-a").unwrap()).collect();
    assert_eq!(
        s.connect("pod-a").unwrap_err(),
        Busy::Caller {
            who: "pod-a".into(),
            limit: 3
        }
    );
    // Another pod is not touched by pod A's flood.
    let b = s.connect("pod-b").unwrap();
    assert_eq!(s.open(), 4);
    drop(held);
    drop(b);
    assert_eq!(s.open(), 0);
    s.connect("pod-a").unwrap();
}

#[test]
fn the_gate_as_a_whole_is_bounded() {
    let s = limits(4, 3);
    let _held: Vec<_> = ["a", "b", "c", "d"]
        .iter()
        .map(|p| s.connect(p).unwrap())
        .collect();
    assert_eq!(s.connect("e").unwrap_err(), Busy::Full(4));
}

#[test]
fn one_drain_per_container_at_a_time() {
    let s = limits(10, 3);
    let d = s.drain("pod-a", Some("app"), None).unwrap();
    let again = s.drain("pod-a", Some("app"), None).unwrap_err();
    assert_eq!(again.to_string(), "a drain of container app of pod pod-a is already running: one per container at a time; retry once it ends");
    // Its other containers, and other pods, drain at the same time.
    let _sidecar = s.drain("pod-a", Some("proxy"), None).unwrap();
    let _other = s.drain("pod-b", Some("app"), None).unwrap();
    drop(d);
    s.drain("pod-a", Some("app"), None).unwrap();
}

#[test]
fn a_drain_begun_before_the_deletion_leaves_the_terminations_slot_free() {
    let s = limits(10, 3);
    let _before = s.drain("pod-a", Some("app"), None).unwrap();
    let during = s.drain("pod-a", Some("app"), Some("1733450000000")).unwrap();
    assert!(s.drain("pod-a", Some("app"), Some("1733450000000")).is_err());
    drop(during);
}

#[test]
fn limits_follow_the_descriptors_the_agent_may_open() {
    assert_eq!(
        Limits::for_nofile(1 << 20),
        Limits {
            total: 1024,
            per_caller: 32
        }
    );
    assert_eq!(
        Limits::for_nofile(400),
        Limits {
            total: 100,
            per_caller: 32
        }
    );
    assert_eq!(
        Limits::for_nofile(16),
        Limits {
            total: 8,
            per_caller: 8
        }
    );
}

#[test]
fn a_long_caller_name_is_cut_in_messages() {
    let long = "x".repeat(60_000);
    let msg = Busy::Caller {
        who: shown(&long),
        limit: 1,
    }
    .to_string();
    assert!(msg.len() < 200, "{msg}");
    assert!(msg.contains("(60000 bytes)"), "{msg}");
}
