//! Walking the cgroup2 tree with paths kept as bytes. Cgroup names are
//! whatever their creator chose, so nothing here assumes UTF-8; paths are
//! relative to the mount and start with `/`, as in /proc/<pid>/cgroup.

use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

/// The directory of the cgroup `rel` under `mount`. `Path::join` with an
/// absolute `rel` would drop the mount, hence the strip.
pub fn abs(mount: &Path, rel: &Path) -> PathBuf {
    mount.join(rel.strip_prefix("/").unwrap_or(rel))
}

/// Visits `start` (relative to `mount`) and every cgroup below it, each
/// parent before its children, with its absolute and relative path and its
/// id (the directory's inode). `visit` returns whether to descend; the
/// watcher adds its inotify watch there, *before* the directory is listed,
/// so a child created while the walk runs is either listed or reported.
/// Cgroups that vanish mid-walk are skipped.
pub fn walk(mount: &Path, start: &Path, mut visit: impl FnMut(&Path, &Path, u64) -> bool) {
    let mut stack = vec![start.to_path_buf()];
    while let Some(rel) = stack.pop() {
        let dir = abs(mount, &rel);
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() || !visit(&dir, &rel, meta.ino()) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(rel.join(e.file_name()));
            }
        }
    }
}

#[cfg(test)]
mod tests;
