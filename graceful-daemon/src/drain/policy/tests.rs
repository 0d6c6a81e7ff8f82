use super::*;

const MS: u64 = 1_000_000;
const S: u64 = 1_000 * MS;

fn params(policy: Policy) -> Params {
    Params {
        policy,
        start_ns: 100 * S,
        min: Duration::from_secs(2),
        max: Duration::from_secs(30),
        settle: Duration::from_secs(1),
        quiet: Duration::from_secs(3),
        uncounted: false,
    }
}

#[test]
fn drained_waits_for_min_then_settle_after_last_close() {
    let p = params(Policy::Drained);
    // Already at zero when the drain starts: min wins.
    let o = Observed::default();
    assert_eq!(decide(&p, &o, 100 * S), Decision::WaitUntil(102 * S));
    assert_eq!(decide(&p, &o, 102 * S), Decision::Release(Reason::Drained));
    // Last close at 105 s: released at 106 s exactly, not a poll later.
    let o = Observed {
        last_inbound_close_ns: 105 * S,
        last_inbound_open_ns: 104 * S,
        ..o
    };
    assert_eq!(decide(&p, &o, 105 * S + 1), Decision::WaitUntil(106 * S));
    assert_eq!(decide(&p, &o, 106 * S), Decision::Release(Reason::Drained));
}

#[test]
fn a_new_connection_restarts_settle_and_live_ones_block() {
    let p = params(Policy::Drained);
    let o = Observed {
        inbound_live: 1,
        last_inbound_open_ns: 105 * S,
        ..Default::default()
    };
    assert_eq!(decide(&p, &o, 110 * S), Decision::WaitUntil(130 * S));
    let o = Observed {
        inbound_live: 0,
        last_inbound_open_ns: 110 * S + 500 * MS,
        last_inbound_close_ns: 110 * S + 600 * MS,
        ..o
    };
    assert_eq!(decide(&p, &o, 111 * S), Decision::WaitUntil(111 * S + 600 * MS));
}

#[test]
fn drained_hits_the_deadline_with_idle_keepalives() {
    let p = params(Policy::Drained);
    let o = Observed {
        inbound_live: 20,
        last_inbound_open_ns: 50 * S,
        ..Default::default()
    };
    assert_eq!(decide(&p, &o, 129 * S), Decision::WaitUntil(130 * S));
    assert_eq!(decide(&p, &o, 130 * S), Decision::Release(Reason::Deadline));
}

#[test]
fn quiet_releases_idle_keepalives_after_the_window() {
    let p = params(Policy::Quiet);
    let o = Observed {
        inbound_live: 20,
        last_inbound_open_ns: 50 * S,
        last_inbound_rx_ns: 101 * S,
        ..Default::default()
    };
    assert_eq!(decide(&p, &o, 102 * S), Decision::WaitUntil(104 * S));
    assert_eq!(decide(&p, &o, 104 * S), Decision::Release(Reason::Quiet));
    // Payload keeps it waiting.
    let o = Observed {
        last_inbound_rx_ns: 103 * S + 900 * MS,
        ..o
    };
    assert_eq!(decide(&p, &o, 104 * S), Decision::WaitUntil(106 * S + 900 * MS));
}

#[test]
fn quiet_also_releases_when_drained_first() {
    let p = params(Policy::Quiet);
    let o = Observed {
        inbound_live: 0,
        last_inbound_close_ns: 101 * S,
        last_inbound_rx_ns: 101 * S,
        ..Default::default()
    };
    assert_eq!(decide(&p, &o, 102 * S), Decision::Release(Reason::Drained));
}

#[test]
fn min_above_max_releases_at_the_deadline() {
    let mut p = params(Policy::Drained);
    p.min = Duration::from_secs(60);
    assert_eq!(
        decide(&p, &Observed::default(), 101 * S),
        Decision::WaitUntil(130 * S)
    );
    assert_eq!(
        decide(&p, &Observed::default(), 130 * S),
        Decision::Release(Reason::Deadline)
    );
}
