//! Real cgroup v2 directories for the tests, removed (with everything in
//! them) on drop. graceful-test-support makes and removes them; here a
//! cgroup that cannot be made fails the test, with its reason.

use std::{ops::Deref, path::Path, process::Command};

use graceful_test_support::cgroup as support;

/// The cgroup2 mount.
pub fn mount() -> std::path::PathBuf {
    support::mount().unwrap_or_else(|e| panic!("{e}: these tests need cgroup v2"))
}

/// A cgroup this guard made (see [`support::Cgroup`]).
pub struct Cgroup(support::Cgroup);

impl Cgroup {
    /// A new cgroup at `rel` (relative to the mount), creating parents as needed.
    pub fn create(rel: &str) -> Cgroup {
        Cgroup(support::Cgroup::create(rel).unwrap_or_else(|e| panic!("{e}")))
    }

    /// A new top-level test cgroup with a unique name.
    pub fn unique(kind: &str) -> Cgroup {
        Self::create(&crate::unique(kind))
    }
}

impl Deref for Cgroup {
    type Target = support::Cgroup;

    fn deref(&self) -> &support::Cgroup {
        &self.0
    }
}

/// Makes `cmd`'s process join the cgroup `dir` between fork and exec
/// ([`support::start_in`]).
pub fn start_in(cmd: &mut Command, dir: &Path) {
    support::start_in(cmd, dir).unwrap_or_else(|e| panic!("{e}"));
}
