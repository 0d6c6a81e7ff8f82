//! The agent's handle on the kernel side: the counters, the stats, the
//! watch map and the event ring, opened once and shared by every drain,
//! terminating pod and API request.

use std::sync::{Arc, Mutex};

use graceful_common::{stat, Event};
use tokio::sync::broadcast;

use super::{
    error::MapError,
    maps::{Counters, Stats, WatchSet},
    paths::PinDir,
    ring,
};
use crate::sync;

/// Everything the agent reads and writes of the kernel side. Cheap to
/// clone; the ring's reader stops with the last clone.
#[derive(Clone)]
pub struct Kernel {
    pub pins: PinDir,
    pub watch: Arc<Mutex<WatchSet>>,
    /// Read lock-free: every drain's look goes here.
    pub counters: Arc<Counters>,
    pub events: broadcast::Sender<Event>,
    stats: Arc<Stats>,
    _reader: Arc<ring::Reader>,
}

impl Kernel {
    /// Opens the maps and starts the ring's reader. Empties the watch map
    /// (see [`WatchSet::open`]): the agent's alone. Must be called inside a
    /// tokio runtime.
    pub fn open(pins: &PinDir) -> Result<Self, MapError> {
        let (events, reader) = ring::spawn(pins)?;
        Ok(Self {
            pins: pins.clone(),
            watch: Arc::new(Mutex::new(WatchSet::open(pins)?)),
            counters: Arc::new(Counters::open(pins)?),
            events,
            stats: Arc::new(Stats::open(pins)?),
            _reader: Arc::new(reader),
        })
    }

    /// The programs' own figures, summed over CPUs.
    pub fn stats(&self) -> Result<[u64; stat::COUNT as usize], MapError> {
        self.stats.read()
    }

    /// Puts `cgroups` in the watch map with `flags` for as long as the
    /// returned guard lives. All or none: on an error, those already added
    /// are taken out again.
    pub fn watch(&self, cgroups: &[u64], flags: u32) -> Result<Watched<'_>, MapError> {
        let mut guard = Watched {
            kernel: self,
            cgroups: Vec::with_capacity(cgroups.len()),
        };
        let mut w = sync::lock(&self.watch);
        for c in cgroups {
            w.add(*c, flags)?;
            guard.cgroups.push(*c);
        }
        drop(w);
        Ok(guard)
    }
}

/// Keeps cgroups in the watch map, with the flags they were added with,
/// until dropped.
pub struct Watched<'a> {
    kernel: &'a Kernel,
    cgroups: Vec<u64>,
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        let mut w = sync::lock(&self.kernel.watch);
        for c in &self.cgroups {
            w.remove(*c);
        }
    }
}
