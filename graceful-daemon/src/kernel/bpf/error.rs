//! The errors of the BPF side: loading and attaching the programs
//! ([`LoadError`]), and opening, checking and using the pinned maps
//! ([`MapError`]). Each says what failed and what to do.

use std::{io, path::PathBuf};

use graceful_common::LAYOUT_VERSION;

use super::paths::BPFFS;

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
    #[error("cannot remove the pin {path}: {source}")]
    Unpin {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl MapError {
    /// `op` (`read`, `update`) of the `map` map failed.
    pub fn using(op: &'static str, map: &'static str) -> impl FnOnce(aya::maps::MapError) -> MapError {
        move |source| MapError::Use { op, map, source }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("this graceful binary was built without its eBPF object (AYA_BUILD_SKIP): rebuild it with `cargo build` after `cargo xtask setup`")]
    NoObject,
    #[error("bpffs is not mounted at {BPFFS} and mounting it failed ({0}): run as root, or mount it with `mount -t bpf bpf {BPFFS}`")]
    Bpffs(#[source] std::io::Error),
    #[error("pin directory {0} is not on a bpffs: choose a directory under {BPFFS}")]
    NotBpffs(PathBuf),
    #[error("cannot create pin directory {path}: {source}; run as root")]
    PinDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Layout(#[from] MapError),
    #[error("{0}")]
    Btf(#[from] super::btf::BtfError),
    #[error(
        "cannot read the kernel's BTF ({0}): graceful needs a kernel built with CONFIG_DEBUG_INFO_BTF=y"
    )]
    KernelBtf(#[source] aya::BtfError),
    #[error("the kernel refused the eBPF object ({source}); run `graceful doctor` to see which kernel feature is missing")]
    Load {
        #[source]
        source: Box<aya::EbpfError>,
    },
    #[error("cannot {what}: {source}; run `graceful doctor`")]
    Program {
        what: String,
        #[source]
        source: Box<aya::programs::ProgramError>,
    },
    #[error("cannot {what}: {message}")]
    Pin { what: String, message: String },
    #[error("cannot open cgroup {path}: {source}")]
    Cgroup {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}
