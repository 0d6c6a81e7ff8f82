//! The one error of the pinned maps: opening, checking and using them.
//! Each says what failed and what to do.

use std::path::PathBuf;

use graceful_common::LAYOUT_VERSION;

#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("no graceful maps are pinned in {0}: start the agent with `graceful daemon` (or check GRACEFUL_PIN_DIR)")]
    NotInstalled(String),
    #[error("pinned maps in {dir} were written by a graceful with map layout v{found}, this one reads v{LAYOUT_VERSION}: run `graceful uninstall` (live counts are re-adopted at the next start, totals restart at zero), or start the daemon with --replace-incompatible-pins")]
    Version { dir: PathBuf, found: u32 },
    #[error("pinned map {path} is not what this graceful expects ({what}): run `graceful uninstall`, or start the daemon with --replace-incompatible-pins")]
    Mismatch { path: PathBuf, what: String },
    #[error("the maps in {dir} are pinned but their layout record is still empty after {waited_ms} ms: an agent is starting there, or one died while starting; if no agent is starting, run `graceful uninstall`")]
    Unwritten { dir: PathBuf, waited_ms: u64 },
    #[error(
        "cannot read pinned map {path}: {source}; check that {path} is on a bpffs and that you are root"
    )]
    Open {
        path: PathBuf,
        #[source]
        source: aya::maps::MapError,
    },
    /// A map opened, then a read or a write of it failed.
    #[error("cannot {op} the {map} map: {source}")]
    Use {
        op: &'static str,
        map: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
    #[error("cannot poll the event ring: {0}")]
    Poll(#[source] std::io::Error),
}

impl MapError {
    /// `op` (`read`, `update`) of the `map` map failed.
    pub fn using(op: &'static str, map: &'static str) -> impl FnOnce(aya::maps::MapError) -> MapError {
        move |source| MapError::Use { op, map, source }
    }
}
