//! When a drain may be released: a pure function of the policy, the clock
//! and the scope's counters, so it can be tested without a kernel and the
//! engine can be event-driven (it asks again on every event, and sleeps
//! exactly until the next moment the answer could change).

use std::time::Duration;

pub use graceful_api::{Policy, Reason};

/// The knobs of one drain. All instants are CLOCK_MONOTONIC nanoseconds,
/// the clock the kernel programs stamp their counters with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub policy: Policy,
    /// When the drain started (the client's start, kept across agent restarts).
    pub start_ns: u64,
    /// Least wait, for endpoint removal to propagate.
    pub min: Duration,
    /// Deadline, from start.
    pub max: Duration,
    pub settle: Duration,
    pub quiet: Duration,
}

impl Params {
    /// The instant the drain is released whatever the traffic says.
    pub fn deadline_ns(&self) -> u64 {
        self.start_ns.saturating_add(ns(self.max))
    }
}

/// What the scope's counters say now (summed or maxed over its cgroups).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub inbound_live: u64,
    pub last_inbound_open_ns: u64,
    pub last_inbound_close_ns: u64,
    pub last_inbound_rx_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Release(Reason),
    /// Ask again at this instant at the latest (an event may come sooner).
    WaitUntil(u64),
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The decision at `now_ns`.
pub fn decide(p: &Params, o: &Observed, now_ns: u64) -> Decision {
    let deadline = p.deadline_ns();
    let earliest = p.start_ns.saturating_add(ns(p.min));
    if now_ns >= deadline {
        return Decision::Release(Reason::Deadline);
    }

    // Drained: zero live inbound since the later of the drain's start and
    // the last inbound open or close, for `settle`.
    let drained_at = (o.inbound_live == 0).then(|| {
        p.start_ns
            .max(o.last_inbound_open_ns)
            .max(o.last_inbound_close_ns)
            .saturating_add(ns(p.settle))
    });
    // Quiet: nothing new in, neither a connection nor payload, for `quiet`.
    let quiet_at = (p.policy == Policy::Quiet).then(|| {
        p.start_ns
            .max(o.last_inbound_open_ns)
            .max(o.last_inbound_rx_ns)
            .saturating_add(ns(p.quiet))
    });

    let candidates = [(drained_at, Reason::Drained), (quiet_at, Reason::Quiet)];
    let mut next = deadline;
    for (at, reason) in candidates {
        let Some(at) = at else { continue };
        let at = at.max(earliest);
        if now_ns >= at {
            return Decision::Release(reason);
        }
        next = next.min(at);
    }
    Decision::WaitUntil(next)
}

#[cfg(test)]
mod tests {
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
}
