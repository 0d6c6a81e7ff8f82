//! Reading the per-cgroup counters back from the pinned maps. Works whether
//! or not an agent runs: the maps are pinned.

use std::collections::BTreeMap;

use aya::maps::{HashMap, Map, MapData, PerCpuArray};
use graceful_common::{names, stat, CgroupCounters};

use super::{
    layout::{self, LayoutError, PinState},
    paths::PinDir,
};

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("no graceful maps are pinned in {0}: start the agent with `graceful daemon` (or check GRACEFUL_PIN_DIR)")]
    NotInstalled(String),
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("cannot read {what}: {source}")]
    Map {
        what: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
}

/// All counters, by cgroup id.
pub fn read_all(pins: &PinDir) -> Result<BTreeMap<u64, CgroupCounters>, ReadError> {
    if layout::check(pins)? == PinState::Empty {
        return Err(ReadError::NotInstalled(pins.root().display().to_string()));
    }
    let data = MapData::from_pin(pins.map(names::COUNTERS)).map_err(|source| ReadError::Map {
        what: "the counters map",
        source,
    })?;
    let map: HashMap<MapData, u64, CgroupCounters> =
        HashMap::try_from(Map::HashMap(data)).map_err(|source| ReadError::Map {
            what: "the counters map",
            source,
        })?;
    let mut out = BTreeMap::new();
    // An entry deleted while iterating is skipped, not an error.
    for (k, v) in map.iter().flatten() {
        out.insert(k, v);
    }
    Ok(out)
}

/// The programs' own figures, summed over CPUs, indexed by `graceful_common::stat`.
pub fn read_stats(pins: &PinDir) -> Result<[u64; stat::COUNT as usize], ReadError> {
    let data = MapData::from_pin(pins.map(names::STATS)).map_err(|source| ReadError::Map {
        what: "the stats map",
        source,
    })?;
    let map: PerCpuArray<MapData, u64> =
        PerCpuArray::try_from(Map::PerCpuArray(data)).map_err(|source| ReadError::Map {
            what: "the stats map",
            source,
        })?;
    let mut out = [0u64; stat::COUNT as usize];
    for (i, slot) in out.iter_mut().enumerate() {
        let values = map.get(&(i as u32), 0).map_err(|source| ReadError::Map {
            what: "the stats map",
            source,
        })?;
        *slot = values.iter().sum();
    }
    Ok(out)
}

/// Drops the counters of cgroups that no longer exist and hold no live
/// connection or listener, so the map never fills with dead pods. A dead
/// cgroup that still holds a count keeps it: its sockets outlive it, and
/// their closes must find the entry. Returns how many were dropped.
///
/// The walk of the cgroup tree is a snapshot, and the map changes under
/// this pass. Cgroup ids only grow, so an id above every id the walk saw
/// may be a cgroup created since: it is kept until a later pass. Each
/// entry is read again right before it is removed.
pub fn collect_garbage(pins: &PinDir, hier: &crate::cgroupfs::Hierarchy) -> Result<usize, ReadError> {
    let live_ids = hier.walk();
    let newest = live_ids.keys().copied().max().unwrap_or(0);
    let data = MapData::from_pin(pins.map(names::COUNTERS)).map_err(|source| ReadError::Map {
        what: "the counters map",
        source,
    })?;
    let mut map: HashMap<MapData, u64, CgroupCounters> =
        HashMap::try_from(Map::HashMap(data)).map_err(|source| ReadError::Map {
            what: "the counters map",
            source,
        })?;
    let idle = |c: &CgroupCounters| c.inbound_live == 0 && c.outbound_live == 0 && c.listeners == 0;
    let dead: Vec<u64> = map
        .iter()
        .filter_map(Result::ok)
        .filter(|(id, c)| *id < newest && !live_ids.contains_key(id) && idle(c))
        .map(|(id, _)| id)
        .collect();
    let mut removed = 0;
    for id in dead {
        if map.get(&id, 0).is_ok_and(|c| idle(&c)) && map.remove(&id).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}
