//! The drains of this agent's run: those in progress, the last
//! [`HISTORY`] released, and a feed of both as they happen. The drainer
//! writes it; the local API reads it.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
};

use tokio::sync::broadcast;

use crate::{metrics::Recorder, sync};
use graceful_api::drain::{ActiveDrain, DrainEvent, DrainReport};

/// Reports kept for `graceful drains`.
pub const HISTORY: usize = 1000;

pub struct Drains {
    metrics: Arc<Recorder>,
    history: Mutex<VecDeque<DrainReport>>,
    active: Mutex<BTreeMap<u64, ActiveDrain>>,
    next_id: AtomicU64,
    events: broadcast::Sender<DrainEvent>,
}

impl Drains {
    pub fn new(metrics: Arc<Recorder>) -> Drains {
        Drains {
            metrics,
            history: Default::default(),
            active: Default::default(),
            next_id: AtomicU64::new(1),
            events: broadcast::channel(256).0,
        }
    }

    /// Drains in progress, oldest first.
    pub fn active(&self) -> Vec<ActiveDrain> {
        sync::lock(&self.active).values().cloned().collect()
    }

    /// Whether a drain of pod `uid` is in progress.
    pub fn draining(&self, uid: &str) -> bool {
        sync::lock(&self.active).values().any(|d| d.pod == uid)
    }

    /// The last released drains, oldest first.
    pub fn history(&self) -> Vec<DrainReport> {
        sync::lock(&self.history).iter().cloned().collect()
    }

    /// Drain starts, releases and abandons from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<DrainEvent> {
        self.events.subscribe()
    }

    /// Lists `d` (given its id here) until the guard is released or dropped.
    pub fn start(self: &Arc<Self>, mut d: ActiveDrain) -> Active {
        d.id = self.next_id.fetch_add(1, Ordering::Relaxed);
        sync::lock(&self.active).insert(d.id, d.clone());
        let _ = self.events.send(DrainEvent::DrainStarted(d.clone()));
        Active {
            drains: self.clone(),
            drain: Some(d),
        }
    }
}

/// A drain in the table; dropped without [`released`](Self::released)
/// (the client went away, or the engine failed) it counts as abandoned.
pub struct Active {
    drains: Arc<Drains>,
    drain: Option<ActiveDrain>,
}

impl Active {
    /// The drain's inbound count as it looked now, for `graceful drains`.
    pub(super) fn looked(&self, inbound: u64) {
        if let Some(d) = &self.drain {
            if let Some(listed) = sync::lock(&self.drains.active).get_mut(&d.id) {
                listed.inbound = Some(inbound);
            }
        }
    }

    /// Out of the table, into the history and the feed.
    pub(super) fn released(mut self, report: DrainReport) {
        if let Some(d) = self.drain.take() {
            sync::lock(&self.drains.active).remove(&d.id);
        }
        {
            let mut h = sync::lock(&self.drains.history);
            if h.len() == HISTORY {
                h.pop_front();
            }
            h.push_back(report.clone());
        }
        let _ = self
            .drains
            .events
            .send(DrainEvent::DrainReleased(Box::new(report)));
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        if let Some(d) = self.drain.take() {
            sync::lock(&self.drains.active).remove(&d.id);
            self.drains.metrics.drain_abandoned();
            let _ = self.drains.events.send(DrainEvent::DrainAbandoned(d));
        }
    }
}
