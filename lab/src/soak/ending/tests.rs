use super::*;

#[test]
fn weights_add_up_to_a_hundred() {
    assert_eq!(Ending::ALL.iter().map(|e| e.weight()).sum::<u64>(), 100);
}

#[test]
fn the_mix_follows_the_weights_and_never_targets_its_own_cgroup() {
    let mut seen = [0u64; 6];
    let mut v6 = 0;
    let n = 100_000;
    for i in 0..n {
        let p = plan(7, 3, 8, i);
        assert_ne!(p.target, 3);
        assert!(p.target < 8);
        assert!(!(p.ipv6 && p.ending.queued()));
        seen[p.ending.index()] += 1;
        v6 += u64::from(p.ipv6);
    }
    for e in Ending::ALL {
        let share = seen[e.index()] as f64 * 100.0 / n as f64;
        assert!((share - e.weight() as f64).abs() < 1.0, "{e:?}: {share:.2} %");
    }
    assert!(v6 > n / 6 && v6 < n / 4, "{v6} over ::1");
}

#[test]
fn the_mix_is_deterministic_and_depends_on_the_seed() {
    let a: Vec<Plan> = (0..1000).map(|i| plan(1, 0, 4, i)).collect();
    let b: Vec<Plan> = (0..1000).map(|i| plan(1, 0, 4, i)).collect();
    let c: Vec<Plan> = (0..1000).map(|i| plan(2, 0, 4, i)).collect();
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn every_target_is_used_with_two_workers_too() {
    assert!((0..100).all(|i| plan(0, 0, 2, i).target == 1));
    assert!((0..100).all(|i| plan(0, 1, 2, i).target == 0));
}

#[test]
fn the_server_reads_what_the_client_sends() {
    assert_eq!(server_does(Ending::ServerFin.byte().unwrap()), ServerDoes::Close);
    assert_eq!(server_does(Ending::ServerRst.byte().unwrap()), ServerDoes::Abort);
    assert_eq!(server_does(Ending::ClientFin.byte().unwrap()), ServerDoes::Drain);
    assert_eq!(server_does(Ending::ClientRst.byte().unwrap()), ServerDoes::Drain);
    assert_eq!(server_does(HOLD), ServerDoes::Hold);
    assert_eq!(server_does(KILLED), ServerDoes::DrainAside);
}
