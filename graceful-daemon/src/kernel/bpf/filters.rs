//! The exclusions of draining cgroups, as the programs match them
//! (`graceful-ebpf/src/filter.rs`): one [`Filter`] per cgroup, refcounted
//! like the watch map, since two drains of one pod share its cgroups.
//! The first drain to set a cgroup's exclusions decides them while it
//! lasts; a drain that asks for others is told so ([`Installed::Other`]).

use std::collections::HashMap as StdHashMap;

use aya::maps::{HashMap, MapData};
use graceful_common::{names, Filter, MAX_IGNORE_RULES};

use super::{error::MapError, maps, paths::PinDir};

pub struct FilterSet {
    map: HashMap<MapData, u64, Filter>,
    /// cgroup → (refcount, the filter as given).
    refs: StdHashMap<u64, (u32, Filter)>,
    /// The last [`Filter::generation`] set.
    generation: u8,
}

/// What [`FilterSet::add`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Installed {
    /// The cgroup now matches against the filter given.
    Given,
    /// Another drain of the cgroup set other exclusions first: they stay.
    Other,
}

impl FilterSet {
    /// Opens the pinned filter map and empties it: entries left by an
    /// agent killed mid-drain belong to drains whose clients re-register.
    pub fn open(pins: &PinDir) -> Result<Self, MapError> {
        Ok(Self {
            map: maps::emptied(pins, names::FILTERS)?,
            refs: StdHashMap::new(),
            generation: 0,
        })
    }

    pub fn add(&mut self, cgroup: u64, filter: &Filter) -> Result<Installed, MapError> {
        if let Some((n, f)) = self.refs.get_mut(&cgroup) {
            *n += 1;
            return Ok(if f == filter {
                Installed::Given
            } else {
                Installed::Other
            });
        }
        // A new generation: connections left out under an earlier filter
        // are tallied again under this one. Never 0, a fresh socket's.
        self.generation = self.generation.wrapping_add(1).max(1);
        let f = Filter {
            ignored: [0; MAX_IGNORE_RULES],
            generation: self.generation,
            ..*filter
        };
        self.map
            .insert(cgroup, f, 0)
            .map_err(MapError::using("update", "filters"))?;
        self.refs.insert(cgroup, (1, *filter));
        Ok(Installed::Given)
    }

    pub fn remove(&mut self, cgroup: u64) {
        if let Some((n, _)) = self.refs.get_mut(&cgroup) {
            *n -= 1;
            if *n == 0 {
                self.refs.remove(&cgroup);
                let _ = self.map.remove(&cgroup);
            }
        }
    }

    /// Connections each rule left out so far, summed over `cgroups`.
    pub fn tallies(&self, cgroups: &[u64]) -> [u64; MAX_IGNORE_RULES] {
        let mut out = [0; MAX_IGNORE_RULES];
        for c in cgroups {
            if let Ok(f) = self.map.get(c, 0) {
                for (o, t) in out.iter_mut().zip(f.ignored) {
                    *o += t;
                }
            }
        }
        out
    }
}
