//! The one opener of pinned maps: every map user space reads or writes,
//! whether the layout check, the ring or the typed maps, is opened here.

use std::path::Path;

use aya::maps::MapData;

use super::error::MapError;

/// Opens the map pinned at `path`: every pinned map is opened here.
pub fn open_path(path: &Path) -> Result<MapData, MapError> {
    MapData::from_pin(path).map_err(|source| MapError::Open {
        path: path.into(),
        source,
    })
}
