//! The kernel's side of a drain: which cgroups it watches (the watch map)
//! and what it says about them (the event ring), fanned out to every drain
//! in progress.

use std::{
    collections::HashMap as StdHashMap,
    sync::{Arc, Mutex},
};

use aya::maps::{HashMap, Map, MapData, RingBuf};
use graceful_common::{names, CgroupCounters, Event};
use tokio::{io::unix::AsyncFd, sync::broadcast};
use tracing::warn;

use crate::{bpf::paths::PinDir, sync};

#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error("cannot open pinned map {name}: {source}; is the agent installed (graceful daemon)?")]
    Open {
        name: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
    #[error("cannot update the watch map: {0}")]
    Watch(#[source] aya::maps::MapError),
    #[error("cannot poll the event ring: {0}")]
    Poll(#[source] std::io::Error),
}

fn open(pins: &PinDir, name: &'static str) -> Result<MapData, EventsError> {
    MapData::from_pin(pins.map(name)).map_err(|source| EventsError::Open { name, source })
}

/// The cgroups whose inbound changes the kernel reports, refcounted: two
/// drains of one pod (app and sidecar) share the same cgroups.
pub struct WatchSet {
    map: HashMap<MapData, u64, u32>,
    refs: StdHashMap<u64, (u32, u32)>, // cgroup → (refcount, flags)
}

impl WatchSet {
    /// Opens the pinned watch map and empties it: entries left by an agent
    /// killed mid-drain belong to drains whose clients will re-register.
    pub fn open(pins: &PinDir) -> Result<Self, EventsError> {
        let data = open(pins, names::WATCH)?;
        let mut map: HashMap<MapData, u64, u32> =
            HashMap::try_from(Map::HashMap(data)).map_err(|source| EventsError::Open {
                name: names::WATCH,
                source,
            })?;
        let stale: Vec<u64> = map.keys().filter_map(Result::ok).collect();
        for k in stale {
            let _ = map.remove(&k);
        }
        Ok(Self {
            map,
            refs: StdHashMap::new(),
        })
    }

    pub fn add(&mut self, cgroup: u64, flags: u32) -> Result<(), EventsError> {
        let e = self.refs.entry(cgroup).or_insert((0, 0));
        e.0 += 1;
        e.1 |= flags;
        let flags = e.1;
        self.map.insert(cgroup, flags, 0).map_err(EventsError::Watch)
    }

    pub fn remove(&mut self, cgroup: u64) {
        if let Some(e) = self.refs.get_mut(&cgroup) {
            e.0 -= 1;
            if e.0 == 0 {
                self.refs.remove(&cgroup);
                let _ = self.map.remove(&cgroup);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.refs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }
}

/// Reads the pinned counters map.
pub struct Counters {
    map: HashMap<MapData, u64, CgroupCounters>,
}

impl Counters {
    pub fn open(pins: &PinDir) -> Result<Self, EventsError> {
        let data = open(pins, names::COUNTERS)?;
        let map = HashMap::try_from(Map::HashMap(data)).map_err(|source| EventsError::Open {
            name: names::COUNTERS,
            source,
        })?;
        Ok(Self { map })
    }

    /// The counters of one cgroup; zero if it never had a connection.
    pub fn get(&self, cgroup: u64) -> CgroupCounters {
        self.map.get(&cgroup, 0).unwrap_or_default()
    }

    /// Every cgroup's counters. An entry deleted while iterating is
    /// skipped, not an error.
    pub fn all(&self) -> std::collections::BTreeMap<u64, CgroupCounters> {
        self.map.iter().flatten().collect()
    }
}

/// Starts the task that reads the event ring and broadcasts each event.
/// It wakes only when the kernel writes: no polling interval.
pub fn spawn_reader(pins: &PinDir) -> Result<broadcast::Sender<Event>, EventsError> {
    let data = open(pins, names::EVENTS)?;
    let ring = RingBuf::try_from(Map::RingBuf(data)).map_err(|source| EventsError::Open {
        name: names::EVENTS,
        source,
    })?;
    // SAFETY: the ring owns its fd, which stays open for as long as the
    // AsyncFd (which owns the ring) is registered.
    let mut fd = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(|e| EventsError::Poll(e.into()))?;
    let (tx, _) = broadcast::channel(4096);
    let out = tx.clone();
    tokio::spawn(async move {
        loop {
            let mut guard = match fd.readable_mut().await {
                Ok(g) => g,
                Err(e) => {
                    warn!(error = %e, "event ring poll failed; drains fall back to their timers");
                    return;
                }
            };
            drain(guard.get_inner_mut(), &out);
            // Edge-triggered: a record committed between the drain above and
            // this clear would leave no wake-up behind, so drain once more
            // after clearing. Anything later wakes us again.
            guard.clear_ready();
            drain(guard.get_inner_mut(), &out);
        }
    });
    Ok(tx)
}

/// Reads every record in the ring and broadcasts it.
fn drain(ring: &mut RingBuf<MapData>, out: &broadcast::Sender<Event>) {
    while let Some(item) = ring.next() {
        if item.len() >= std::mem::size_of::<Event>() {
            // SAFETY: the kernel wrote an Event; read unaligned to be safe.
            let ev = unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<Event>()) };
            let _ = out.send(ev);
        }
    }
}

/// Everything a drain needs from the kernel, shared by all drains.
#[derive(Clone)]
pub struct Kernel {
    pub watch: Arc<Mutex<WatchSet>>,
    pub counters: Arc<Counters>,
    pub events: broadcast::Sender<Event>,
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

impl Kernel {
    /// Puts `cgroups` in the watch map with `flags` for as long as the
    /// returned guard lives. All or none: on an error, those already added
    /// are taken out again.
    pub fn watch(&self, cgroups: &[u64], flags: u32) -> Result<Watched<'_>, EventsError> {
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

    /// Must be called inside a tokio runtime.
    pub fn open(pins: &PinDir) -> Result<Self, EventsError> {
        Ok(Self {
            watch: Arc::new(Mutex::new(WatchSet::open(pins)?)),
            counters: Arc::new(Counters::open(pins)?),
            events: spawn_reader(pins)?,
        })
    }
}
