//! This process's mounts, read from `/proc/self/mountinfo` with the one
//! parser of it (graceful-common's, through graceful-test-support).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
pub use graceful_test_support::mountinfo::Mount;
use graceful_test_support::{cgroup, mountinfo};

pub fn all() -> anyhow::Result<Vec<Mount>> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").context("cannot read /proc/self/mountinfo")?;
    Ok(mountinfo::mounts(&text).collect())
}

/// The topmost mount at `point`, if any.
pub fn at(point: &Path) -> Option<Mount> {
    all().ok()?.into_iter().rev().find(|m| m.mount_point == point)
}

/// Where cgroup2 is mounted: `/sys/fs/cgroup`, or `/sys/fs/cgroup/unified`
/// on hybrid hosts.
pub fn cgroup2() -> anyhow::Result<PathBuf> {
    Ok(cgroup::mount()?)
}
