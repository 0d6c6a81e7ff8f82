//! `/proc/*/mountinfo` (proc(5)): the one parser of it, for the cgroup2
//! mount, the memory hierarchy and the bpffs.

use std::path::PathBuf;

/// One line of a mountinfo text (proc(5)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The mount's id, unique on the system: a mount namespace made as a
    /// copy of another gets new mounts, with new ids.
    pub id: u64,
    /// `major:minor` of the filesystem, the `st_dev` of the files on it:
    /// two mounts of one superblock (a bind mount, or the same bpffs seen
    /// from two mount namespaces) have the same.
    pub dev: String,
    /// The directory of the filesystem mounted here (`/` unless a sub-tree).
    pub root: String,
    pub mount_point: PathBuf,
    /// Propagation: `shared:N`, `master:N`, `propagate_from:N`,
    /// `unbindable`; none for a private mount.
    pub optional: Vec<String>,
    pub fstype: String,
    /// The filesystem's own options (`rw,memory` for a v1 memory hierarchy).
    pub super_options: String,
}

impl Mount {
    /// Whether mounts and unmounts under it propagate to its peers
    /// (`shared:N`), as on a systemd host.
    pub fn is_shared(&self) -> bool {
        self.optional.iter().any(|o| o.starts_with("shared:"))
    }
}

/// Every mount of a mountinfo text, in its order: a later mount on the same
/// point covers the earlier ones.
pub fn mounts(text: &str) -> impl Iterator<Item = Mount> + '_ {
    text.lines().filter_map(|line| {
        // id parent maj:min root mountpoint opts [optional...] - fstype source superopts
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split_whitespace().collect();
        if fields.len() < 5 {
            return None;
        }
        let mut right = right.split_whitespace();
        Some(Mount {
            id: fields[0].parse().ok()?,
            dev: fields[2].to_string(),
            root: unescape(fields[3]),
            mount_point: PathBuf::from(unescape(fields[4])),
            optional: fields
                .get(6..)
                .unwrap_or_default()
                .iter()
                .map(|f| f.to_string())
                .collect(),
            fstype: right.next()?.to_string(),
            super_options: right.nth(1).unwrap_or_default().to_string(),
        })
    })
}

/// The first cgroup2 mount in a mountinfo text. Its root must be `/`: a
/// mount of a sub-tree (inside a container) would give ids relative to the
/// wrong place.
pub fn cgroup2(text: &str) -> Option<PathBuf> {
    let mut fallback = None;
    for m in mounts(text).filter(|m| m.fstype == "cgroup2") {
        if m.root == "/" {
            return Some(m.mount_point);
        }
        fallback.get_or_insert(m.mount_point);
    }
    fallback
}

/// The hierarchy where memory is accounted, from a mountinfo text: the v1
/// memory hierarchy if there is one (a hybrid host), else the cgroup2
/// mount ([`cgroup2`]'s). Returns its mount point and whether it is v2.
pub fn memory_hierarchy(text: &str) -> Option<(PathBuf, bool)> {
    let v1 = mounts(text).find(|m| {
        // The hierarchy's root, not a sub-tree mounted elsewhere.
        m.fstype == "cgroup" && m.root == "/" && m.super_options.split(',').any(|x| x == "memory")
    });
    match v1 {
        Some(m) => Some((m.mount_point, false)),
        None => cgroup2(text).map(|m| (m, true)),
    }
}

/// mountinfo escapes spaces, tabs, newlines and backslashes as octal.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
