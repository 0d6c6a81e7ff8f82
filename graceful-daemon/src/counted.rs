//! What the pinned maps count, per cgroup, with each cgroup's path: the
//! rows of `graceful cgroups` (read straight from the pins, so it works
//! while the agent is down) and of the agent's `/v1/cgroups`.

use serde::Serialize;

use crate::{
    bpf::{maps::Counters, paths::PinDir},
    cgroupfs::Hierarchy,
};

/// One row of `graceful cgroups -o json`. Field names are a contract.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq, Eq, Clone)]
pub struct Row {
    pub cgroup_id: u64,
    /// Relative to the cgroup2 mount, starting with `/`; null once the cgroup is gone.
    pub path: Option<String>,
    pub inbound_live: u64,
    /// Of `inbound_live`, those a drain's exclusions leave out (matched as
    /// they opened while the cgroup drained; counted until they close).
    #[serde(default)]
    pub inbound_ignored_live: u64,
    pub outbound_live: u64,
    pub listeners: u64,
    pub inbound_total: u64,
    pub outbound_total: u64,
    pub inbound_closed_total: u64,
    pub last_inbound_open_ns: u64,
    pub last_inbound_close_ns: u64,
}

impl Row {
    /// Whether `graceful cgroups` (and `kubectl graceful cgroups`) shows
    /// the row: at or below `path` if given, and with traffic or a
    /// listener unless `all`.
    pub fn shown(&self, path: Option<&str>, all: bool) -> bool {
        let placed = match (path, &self.path) {
            (Some(p), Some(rp)) => under(rp, p),
            (Some(_), None) => false,
            (None, _) => true,
        };
        placed && (all || self.inbound_live > 0 || self.outbound_live > 0 || self.listeners > 0)
    }
}

/// Whether `path` is `prefix` or below it.
fn under(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    prefix.is_empty() || path == prefix || path.starts_with(&format!("{prefix}/"))
}

pub fn rows(pins: &PinDir, hier: &Hierarchy) -> anyhow::Result<Vec<Row>> {
    let counts = Counters::open_checked(pins)?.all();
    let paths = hier.walk();
    Ok(counts
        .into_iter()
        .map(|(id, c)| Row {
            cgroup_id: id,
            path: paths.get(&id).cloned(),
            inbound_live: c.inbound_live,
            inbound_ignored_live: c.inbound_ignored_live,
            outbound_live: c.outbound_live,
            listeners: c.listeners,
            inbound_total: c.inbound_total,
            outbound_total: c.outbound_total,
            inbound_closed_total: c.inbound_closed_total,
            last_inbound_open_ns: c.last_inbound_open_ns,
            last_inbound_close_ns: c.last_inbound_close_ns,
        })
        .collect())
}
