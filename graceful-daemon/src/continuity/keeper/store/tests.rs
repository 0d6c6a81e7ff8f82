use super::*;
use crate::continuity::handover::wire::ExecHook;
use std::os::unix::net::UnixStream;

fn hook(n: u64) -> Record {
    Record::ExecHook(ExecHook {
        pod: format!("pod-{n}"),
        container: None,
        pid: 1,
        request: "{}".into(),
        arrived_ns: n,
        progress: None,
    })
}

fn dup(s: &UnixStream) -> Vec<OwnedFd> {
    vec![s.as_fd().try_clone_to_owned().unwrap()]
}

#[test]
fn a_deposit_is_kept_until_withdrawn_and_the_same_socket_replaces() {
    let (a, _pa) = UnixStream::pair().unwrap();
    let (b, _pb) = UnixStream::pair().unwrap();
    let mut s = Store::default();
    let ka = s.deposit(hook(1), dup(&a)).unwrap();
    // The same socket again (another descriptor of it): one item.
    assert_eq!(s.deposit(hook(1), dup(&a)).unwrap(), ka);
    let kb = s.deposit(hook(2), dup(&b)).unwrap();
    assert_eq!(
        s.tally(),
        Tally {
            listeners: 0,
            hooks: 2
        }
    );
    assert!(s.withdraw(ka));
    assert!(!s.withdraw(ka));
    assert_eq!(s.tally().hooks, 1);
    assert!(s.withdraw(kb));
}

#[test]
fn a_kept_hook_carries_its_drains_points_and_lends_them() {
    let (a, _pa) = UnixStream::pair().unwrap();
    let mut s = Store::default();
    let k = s.deposit(hook(1), dup(&a)).unwrap();
    for (ms, inbound) in [(0, 4), (10, 3), (20, 3), (30, 0)] {
        s.point(k, Point { ms, inbound });
    }
    assert!(
        !s.point((0, 0), Point { ms: 1, inbound: 1 }),
        "an unknown key is ignored"
    );
    let lent = s.lend();
    let Record::ExecHook(h) = lent[0].0 else { panic!() };
    let p = h.progress.as_ref().unwrap();
    assert_eq!((p.inbound_at_start, p.peak_inbound, p.timeline.len()), (4, 4, 3));
}

#[test]
fn what_was_lent_and_not_deposited_again_goes_at_the_settling() {
    let (a, _pa) = UnixStream::pair().unwrap();
    let (b, _pb) = UnixStream::pair().unwrap();
    let (l, _pl) = UnixStream::pair().unwrap();
    let mut s = Store::default();
    s.deposit(hook(1), dup(&a)).unwrap();
    s.deposit(hook(2), dup(&b)).unwrap();
    s.deposit(Record::GateListener { path: "/g".into() }, dup(&l))
        .unwrap();
    let lent = s.lend();
    assert_eq!(lent.len(), 3);
    assert!(
        matches!(lent[0].0, Record::GateListener { .. }),
        "listeners come first"
    );
    // The agent deposits the listener and one hook again, then settles.
    s.deposit(Record::GateListener { path: "/g".into() }, dup(&l))
        .unwrap();
    s.deposit(hook(1), dup(&a)).unwrap();
    assert_eq!(s.settle(), 1);
    assert_eq!(
        s.tally(),
        Tally {
            listeners: 1,
            hooks: 1
        }
    );
    // Lent again to an agent that dies before it settles: nothing goes
    // until the next one settles.
    assert_eq!(s.lend().len(), 2);
    assert_eq!(s.lend().len(), 2);
    s.clear();
    assert_eq!(s.tally(), Tally::default());
}
