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
    /// The scope's counts may be short (the counters map was full after
    /// its cgroups were made): zero proves nothing, so only the deadline
    /// (or the containers waited for) releases it.
    pub uncounted: bool,
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
    let candidates = if p.uncounted {
        [(None, Reason::Drained), (None, Reason::Quiet)]
    } else {
        candidates
    };
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
mod tests;
