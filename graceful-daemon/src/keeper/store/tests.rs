use super::*;
use crate::handover::wire::ExecHook;
use std::os::unix::net::UnixStream;

fn hook(n: u64) -> Record {
    Record::ExecHook(ExecHook {
        pod: format!("pod-{n}"),
        container: None,
        pid: 1,
        request: "{}".into(),
        arrived_ns: n,
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
