//! The pinned maps outlive the agent that made them, so a new agent must
//! make sure it reads them the way they were written. Each pin directory
//! holds a one-entry meta map with the layout version and value sizes; each
//! map is also checked against its expected type and sizes.

use aya::maps::{Array, Map, MapData, MapType};
use graceful_common::{
    names, AdoptEntry, CgroupCounters, Filter, Meta, SockOwner, LAYOUT_MAGIC, LAYOUT_VERSION,
};

use super::{error::MapError, open::open_path as open, paths::PinDir};

/// What the pin directory holds.
#[derive(Debug, PartialEq, Eq)]
pub enum PinState {
    /// Nothing pinned: a first start (or after `graceful uninstall`).
    Empty,
    /// Maps of our layout.
    Compatible,
}

struct Expected {
    name: &'static str,
    map_type: MapType,
    key_size: u32,
    value_size: u32,
    /// Added to layout 1 after its release: pins of an older agent lack
    /// it, and the loader creates it beside them. The older agent's
    /// programs never read it, and its values hold nothing that must
    /// outlive an agent but the drains' own tallies.
    added: bool,
}

fn expected() -> [Expected; 10] {
    use std::mem::size_of;
    [
        Expected {
            name: names::META,
            map_type: MapType::Array,
            key_size: 4,
            value_size: size_of::<Meta>() as u32,
            added: false,
        },
        Expected {
            name: names::COUNTERS,
            map_type: MapType::Hash,
            key_size: 8,
            value_size: size_of::<CgroupCounters>() as u32,
            added: false,
        },
        Expected {
            name: names::SOCKS,
            map_type: MapType::SkStorage,
            key_size: 4,
            value_size: size_of::<SockOwner>() as u32,
            added: false,
        },
        Expected {
            name: names::ADOPT,
            map_type: MapType::Hash,
            key_size: 8,
            value_size: size_of::<AdoptEntry>() as u32,
            added: false,
        },
        Expected {
            name: names::STATS,
            map_type: MapType::PerCpuArray,
            key_size: 4,
            value_size: 8,
            added: false,
        },
        Expected {
            name: names::WATCH,
            map_type: MapType::Hash,
            key_size: 8,
            value_size: 4,
            added: false,
        },
        Expected {
            name: names::EVENTS,
            map_type: MapType::RingBuf,
            key_size: 0,
            value_size: 0,
            added: false,
        },
        Expected {
            name: names::FILTERS,
            map_type: MapType::Hash,
            key_size: 8,
            value_size: size_of::<Filter>() as u32,
            added: true,
        },
        Expected {
            name: names::CONTROL,
            map_type: MapType::Array,
            key_size: 4,
            value_size: 4,
            added: true,
        },
        Expected {
            name: names::NOTES,
            map_type: MapType::SkStorage,
            key_size: 4,
            value_size: size_of::<SockOwner>() as u32,
            added: true,
        },
    ]
}

/// The meta value for maps of this layout.
pub fn current_meta(attached_ns: u64) -> Meta {
    Meta {
        magic: LAYOUT_MAGIC,
        layout_version: LAYOUT_VERSION,
        counters_size: std::mem::size_of::<CgroupCounters>() as u32,
        owner_size: std::mem::size_of::<SockOwner>() as u32,
        attached_ns,
    }
}

/// Reads the meta record of a pin directory.
pub fn read_meta(pins: &PinDir) -> Result<Option<Meta>, MapError> {
    let path = pins.map(names::META);
    if !path.exists() {
        return Ok(None);
    }
    let data = open(&path)?;
    let info = data.info().map_err(|source| MapError::Open {
        path: path.clone(),
        source,
    })?;
    if info.value_size() < 8 {
        return Err(MapError::Mismatch {
            path,
            what: format!("meta value of {} bytes", info.value_size()),
        });
    }
    if info.value_size() != std::mem::size_of::<Meta>() as u32 {
        // An older or newer meta: its first two words still say which layout.
        return Err(MapError::Version {
            dir: pins.maps(),
            found: u32::MAX,
        });
    }
    let array: Array<MapData, Meta> = Array::try_from(Map::Array(data)).map_err(|source| MapError::Open {
        path: path.clone(),
        source,
    })?;
    let meta = array
        .get(&0, 0)
        .map_err(|source| MapError::Open { path, source })?;
    Ok(Some(meta))
}

/// How long a reader waits for a starting agent to write the meta record.
const UNWRITTEN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The meta record once written. An agent pins its maps as it loads them
/// and writes the record right after; a reader that comes in between finds
/// it all zero, and waits for it rather than call it a foreign layout.
fn wait_written(pins: &PinDir) -> Result<Meta, MapError> {
    let t0 = std::time::Instant::now();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(50));
        match read_meta(pins)? {
            Some(m) if m != Meta::default() => return Ok(m),
            None => {
                return Err(MapError::Mismatch {
                    path: pins.map(names::META),
                    what: "removed while being read".into(),
                })
            }
            Some(_) if t0.elapsed() >= UNWRITTEN_WAIT => {
                return Err(MapError::Unwritten {
                    dir: pins.maps(),
                    waited_ms: t0.elapsed().as_millis() as u64,
                })
            }
            Some(_) => {}
        }
    }
}

/// Checks every pinned map against this build's layout.
pub fn check(pins: &PinDir) -> Result<PinState, MapError> {
    let any = PinDir::map_names().iter().any(|n| pins.map(n).exists());
    if !any {
        return Ok(PinState::Empty);
    }
    let meta = match read_meta(pins)? {
        Some(m) if m == Meta::default() => Some(wait_written(pins)?),
        other => other,
    };
    match meta {
        None => {
            return Err(MapError::Mismatch {
                path: pins.map(names::META),
                what: "maps are pinned but their layout record is missing".into(),
            })
        }
        Some(meta) if meta.magic != LAYOUT_MAGIC => {
            return Err(MapError::Mismatch {
                path: pins.map(names::META),
                what: format!("magic {:#x}", meta.magic),
            })
        }
        Some(meta) if meta.layout_version != LAYOUT_VERSION => {
            return Err(MapError::Version {
                dir: pins.maps(),
                found: meta.layout_version,
            })
        }
        Some(_) => {}
    }
    for e in expected() {
        let path = pins.map(e.name);
        if !path.exists() && e.added {
            continue;
        }
        if !path.exists() {
            // A map added in this version would be a layout change; one
            // missing means someone removed it by hand.
            return Err(MapError::Mismatch {
                path,
                what: "missing".into(),
            });
        }
        let data = open(&path)?;
        let info = data.info().map_err(|source| MapError::Open {
            path: path.clone(),
            source,
        })?;
        let map_type = info.map_type().map_err(|source| MapError::Open {
            path: path.clone(),
            source,
        })?;
        if map_type != e.map_type || info.key_size() != e.key_size || info.value_size() != e.value_size {
            return Err(MapError::Mismatch {
                path,
                what: format!(
                    "{:?} key {} value {}, expected {:?} key {} value {}",
                    map_type,
                    info.key_size(),
                    info.value_size(),
                    e.map_type,
                    e.key_size,
                    e.value_size
                ),
            });
        }
    }
    Ok(PinState::Compatible)
}
