//! The pinned maps, opened by path through [`open_path`]: a type for each
//! map user space reads or writes. They work whether or not an agent runs.
//!
//! - [`Counters`]: per-cgroup counts, read lock-free on every drain's look
//!   (and, after a layout check, by readers without an agent:
//!   [`Counters::open_checked`]);
//! - [`Stats`]: the programs' own figures;
//! - [`WatchSet`]: the cgroups whose changes the kernel reports (the agent's
//!   alone: opening it empties it);
//! - [`Control`]: what the agent tells the programs;
//! - [`adopt_map`]: the adoption hand-over, from the loaded object.

use std::collections::BTreeMap;

use aya::{
    maps::{Array, HashMap, Map, MapData, PerCpuArray},
    Ebpf,
};
use graceful_common::{control, names, stat, AdoptEntry, CgroupCounters};

use super::{
    error::MapError,
    layout::{self, PinState},
    open::open_path,
    paths::PinDir,
};
use crate::kernel::cgroupfs::Hierarchy;

/// Opens the pinned map `name` of `pins` as a `T` (`Map::HashMap`, ...).
fn open<T>(pins: &PinDir, name: &'static str, kind: fn(MapData) -> Map) -> Result<T, MapError>
where
    T: TryFrom<Map, Error = aya::maps::MapError>,
{
    let path = pins.map(name);
    let data = open_path(&path)?;
    T::try_from(kind(data)).map_err(|source| MapError::Open { path, source })
}

/// The pinned hash map `name` of `pins`, emptied: what the agent alone
/// writes (the watch map, the filter map), whose entries an agent killed
/// mid-drain left for drains whose clients will re-register.
pub(super) fn emptied<V: aya::Pod>(
    pins: &PinDir,
    name: &'static str,
) -> Result<HashMap<MapData, u64, V>, MapError> {
    let mut map: HashMap<MapData, u64, V> = open(pins, name, Map::HashMap)?;
    let stale: Vec<u64> = map.keys().filter_map(Result::ok).collect();
    for k in stale {
        let _ = map.remove(&k);
    }
    Ok(map)
}

/// The per-cgroup counters.
pub struct Counters {
    map: HashMap<MapData, u64, CgroupCounters>,
}

impl Counters {
    pub fn open(pins: &PinDir) -> Result<Self, MapError> {
        Ok(Self {
            map: open(pins, names::COUNTERS, Map::HashMap)?,
        })
    }

    /// The counters of a pin directory whose layout this build reads: what
    /// a reader without an agent opens (`graceful cgroups`, the offline
    /// `graceful pods`). It never touches the watch map.
    pub fn open_checked(pins: &PinDir) -> Result<Self, MapError> {
        if layout::check(pins)? == PinState::Empty {
            return Err(MapError::NotInstalled(pins.root().display().to_string()));
        }
        Self::open(pins)
    }

    /// The counters of one cgroup; zero if it never had a connection.
    pub fn get(&self, cgroup: u64) -> CgroupCounters {
        self.map.get(&cgroup, 0).unwrap_or_default()
    }

    /// Every cgroup's counters. An entry deleted while iterating is
    /// skipped, not an error.
    pub fn all(&self) -> BTreeMap<u64, CgroupCounters> {
        self.map.iter().flatten().collect()
    }

    /// Drops the counters of cgroups that no longer exist and hold no live
    /// connection or listener, so the map never fills with dead pods. A
    /// dead cgroup that still holds a count keeps it: its sockets outlive
    /// it, and their closes must find the entry. Returns how many were
    /// dropped.
    ///
    /// The walk of the cgroup tree is a snapshot, and the map changes under
    /// this pass. Cgroup ids only grow, so an id above every id the walk
    /// saw may be a cgroup created since: it is kept until a later pass.
    /// Each entry is read again right before it is removed.
    pub fn collect_garbage(&mut self, hier: &Hierarchy) -> usize {
        let live_ids = hier.walk();
        let newest = live_ids.keys().copied().max().unwrap_or(0);
        let idle = |c: &CgroupCounters| c.inbound_live == 0 && c.outbound_live == 0 && c.listeners == 0;
        let dead: Vec<u64> = self
            .map
            .iter()
            .filter_map(Result::ok)
            .filter(|(id, c)| *id < newest && !live_ids.contains_key(id) && idle(c))
            .map(|(id, _)| id)
            .collect();
        let mut removed = 0;
        for id in dead {
            if self.map.get(&id, 0).is_ok_and(|c| idle(&c)) && self.map.remove(&id).is_ok() {
                removed += 1;
            }
        }
        removed
    }
}

/// [`Counters::collect_garbage`] on a handle of its own (the agent's
/// periodic pass; the drains' handle is shared and read-only).
pub fn collect_garbage(pins: &PinDir, hier: &Hierarchy) -> Result<usize, MapError> {
    Ok(Counters::open(pins)?.collect_garbage(hier))
}

/// The programs' own figures, per CPU.
pub struct Stats {
    map: PerCpuArray<MapData, u64>,
}

impl Stats {
    pub fn open(pins: &PinDir) -> Result<Self, MapError> {
        Ok(Self {
            map: open(pins, names::STATS, Map::PerCpuArray)?,
        })
    }

    /// The figures summed over CPUs, indexed by `graceful_common::stat`.
    pub fn read(&self) -> Result<[u64; stat::COUNT as usize], MapError> {
        let mut out = [0u64; stat::COUNT as usize];
        for (i, slot) in out.iter_mut().enumerate() {
            let values = self
                .map
                .get(&(i as u32), 0)
                .map_err(MapError::using("read", "stats"))?;
            *slot = values.iter().sum();
        }
        Ok(out)
    }
}

/// [`Stats::read`] of a handle opened for it.
pub fn read_stats(pins: &PinDir) -> Result<[u64; stat::COUNT as usize], MapError> {
    Stats::open(pins)?.read()
}

/// The cgroups whose inbound changes the kernel reports, refcounted: two
/// drains of one pod (app and sidecar) share the same cgroups.
pub struct WatchSet {
    map: HashMap<MapData, u64, u32>,
    refs: std::collections::HashMap<u64, (u32, u32)>, // cgroup → (refcount, flags)
    /// `control::WATCHING` is set while the map has entries: set before the
    /// first goes in, cleared after the last is out.
    control: Control,
}

impl WatchSet {
    /// Opens the pinned watch map and empties it: entries left by an agent
    /// killed mid-drain belong to drains whose clients will re-register.
    /// The agent's alone: a reader beside it would stop its drains.
    pub fn open(pins: &PinDir) -> Result<Self, MapError> {
        let mut control = Control::open(pins)?;
        let map = emptied(pins, names::WATCH)?;
        control.set(control::WATCHING, false)?;
        Ok(Self {
            map,
            refs: Default::default(),
            control,
        })
    }

    pub fn add(&mut self, cgroup: u64, flags: u32) -> Result<(), MapError> {
        if self.refs.is_empty() {
            self.control.set(control::WATCHING, true)?;
        }
        let e = self.refs.entry(cgroup).or_insert((0, 0));
        e.0 += 1;
        e.1 |= flags;
        let flags = e.1;
        self.map
            .insert(cgroup, flags, 0)
            .map_err(MapError::using("update", "watch"))
    }

    pub fn remove(&mut self, cgroup: u64) {
        if let Some(e) = self.refs.get_mut(&cgroup) {
            e.0 -= 1;
            if e.0 == 0 {
                self.refs.remove(&cgroup);
                let _ = self.map.remove(&cgroup);
                if self.refs.is_empty() {
                    let _ = self.control.set(control::WATCHING, false);
                }
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

/// The adoption map of the loaded object: cookie → owner, handed to the
/// adoption iterator (see `adopt::pass`).
pub fn adopt_map(ebpf: &mut Ebpf) -> Result<HashMap<&mut MapData, u64, AdoptEntry>, MapError> {
    let map = ebpf.map_mut(names::ADOPT).ok_or_else(|| MapError::Mismatch {
        path: names::ADOPT.into(),
        what: "missing from the loaded object".into(),
    })?;
    HashMap::try_from(map).map_err(MapError::using("open", "adoption"))
}

/// The control map's one word (`graceful_common::control` bits).
pub struct Control {
    map: Array<MapData, u32>,
}

impl Control {
    pub fn open(pins: &PinDir) -> Result<Self, MapError> {
        Ok(Self {
            map: open(pins, names::CONTROL, Map::Array)?,
        })
    }

    pub fn get(&self) -> Result<u32, MapError> {
        self.map.get(&0, 0).map_err(MapError::using("read", "control"))
    }

    /// Sets (`on`) or clears `bit`. The agent writes different bits from
    /// different threads (the drains' watches, the state programs'
    /// retirement): one lock for every read-modify-write of the word.
    pub fn set(&mut self, bit: u32, on: bool) -> Result<(), MapError> {
        static WRITE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = crate::sync::lock(&WRITE);
        let now = self.get()?;
        let next = if on { now | bit } else { now & !bit };
        self.map
            .set(0, next, 0)
            .map_err(MapError::using("update", "control"))
    }
}
