//! `/v1/cgroups` (and `graceful cgroups`, read from the pins): what the
//! pinned maps count per cgroup, with each cgroup's path, and its table.

use serde::{Deserialize, Serialize};

/// One row of `graceful cgroups -o json`. Field names are a contract.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq, Clone)]
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

/// The table: IGNORED is the part of INBOUND a drain's exclusions leave
/// out, a dash for none.
pub fn render(rows: &[Row]) -> String {
    let mut out = format!(
        "{:>10} {:>7} {:>7} {:>8} {:>6} {:>9} {:>9} {:>9}  PATH\n",
        "CGROUP", "INBOUND", "IGNORED", "OUTBOUND", "LISTEN", "IN_TOTAL", "OUT_TOTAL", "IN_CLOSED"
    );
    for r in rows {
        let ignored = match r.inbound_ignored_live {
            0 => "-".to_string(),
            v => (v as i64).to_string(),
        };
        out.push_str(&format!(
            "{:>10} {:>7} {:>7} {:>8} {:>6} {:>9} {:>9} {:>9}  {}\n",
            r.cgroup_id,
            r.inbound_live as i64,
            ignored,
            r.outbound_live as i64,
            r.listeners as i64,
            r.inbound_total,
            r.outbound_total,
            r.inbound_closed_total,
            r.path.as_deref().unwrap_or("(removed)")
        ));
    }
    out
}

#[cfg(test)]
mod tests;
