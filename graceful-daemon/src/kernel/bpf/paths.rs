//! Every path graceful owns under the bpffs, in one place.

use std::path::{Path, PathBuf};

use graceful_common::names;

/// Where the bpffs is mounted on every distribution we know.
pub const BPFFS: &str = "/sys/fs/bpf";
/// Default pin directory. Tests use their own, so they never touch a
/// node's real agent.
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/graceful";

/// The layout of one pin directory:
/// `maps/<MAP>` for every map, `links/<program>-<fingerprint>` for links.
#[derive(Clone, Debug)]
pub struct PinDir {
    root: PathBuf,
}

impl PinDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The directory from `GRACEFUL_PIN_DIR`, or the default.
    pub fn from_env() -> Self {
        Self::new(
            std::env::var_os("GRACEFUL_PIN_DIR")
                .map_or_else(|| PathBuf::from(DEFAULT_PIN_DIR), PathBuf::from),
        )
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn maps(&self) -> PathBuf {
        self.root.join("maps")
    }

    pub fn map(&self, name: &str) -> PathBuf {
        self.maps().join(name)
    }

    pub fn links(&self) -> PathBuf {
        self.root.join("links")
    }

    /// The link pin of `program` as built into this binary.
    pub fn link(&self, program: &str, fingerprint: &str) -> PathBuf {
        self.links().join(format!("{program}-{fingerprint}"))
    }

    /// Every map we pin, in the order they are checked.
    pub fn map_names() -> [&'static str; 10] {
        [
            names::META,
            names::COUNTERS,
            names::SOCKS,
            names::ADOPT,
            names::STATS,
            names::WATCH,
            names::EVENTS,
            names::FILTERS,
            names::NOTES,
            names::CONTROL,
        ]
    }

    /// Whether anything is pinned here.
    pub fn exists(&self) -> bool {
        self.root.exists()
    }
}
