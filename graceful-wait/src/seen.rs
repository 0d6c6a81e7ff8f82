//! What the hook saw of its drain, carried across a reconnect: an agent
//! that restarted mid-drain knows nothing of the drain's first part, so
//! the resumed request tells it, and its report counts from the drain's
//! true start with the counts seen then.

use graceful_api::{codec, DrainRequest, Point, Resumed};

use crate::args;

/// What the hook saw of the drain in its progress lines, across attempts:
/// after an agent restart the new agent knows none of it, so the resumed
/// request carries it (and the report, the history and the metrics count
/// from the drain's true start, not the reconnect).
#[derive(Default)]
pub struct Seen {
    /// The first point is the drain's start.
    timeline: Vec<(u64, u64)>,
    peak: u64,
}

/// The most points carried (the agent's bound, `MAX_RESUMED_POINTS`).
pub const MAX_POINTS: usize = 512;

impl Seen {
    pub fn point(&mut self, ms: u64, inbound: u64) {
        if self.timeline.last().is_some_and(|p| p.1 == inbound || p.0 > ms) {
            return;
        }
        if self.timeline.len() >= MAX_POINTS {
            // Keep the start, and the latest.
            self.timeline.remove(1);
        }
        self.timeline.push((ms, inbound));
        self.peak = self.peak.max(inbound);
    }

    /// The request's `resumed` field, for a reconnect.
    pub fn resumed(&self) -> Resumed {
        Resumed {
            inbound_at_start: self.timeline.first().map_or(0, |p| p.1),
            peak_inbound: self.peak,
            timeline: self
                .timeline
                .iter()
                .map(|&(ms, inbound)| Point { ms, inbound })
                .collect(),
        }
    }
}

/// The drain request: the flags' settings, the start, and on a reconnect
/// what the earlier attempts saw.
pub fn request(a: &args::Args, started_unix_ms: u64, seen: Option<&Seen>) -> String {
    codec::request(&DrainRequest {
        resumed: seen.map(Seen::resumed),
        ..a.request(started_unix_ms)
    })
}
