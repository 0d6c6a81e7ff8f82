//! `graceful cgroups`: counts per cgroup, read straight from the pinned maps,
//! so it works while the agent is down.

use serde::Serialize;

use super::table::Output;
use crate::{
    bpf::{maps::Counters, paths::PinDir},
    cgroupfs::Hierarchy,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format. `json` is a stable contract for scripts.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Only this cgroup and the ones below it (path relative to the cgroup2 mount, e.g. /kubepods.slice).
    #[arg(long)]
    pub path: Option<String>,
    /// Include cgroups with no live connection and no listener.
    #[arg(short, long)]
    pub all: bool,
}

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

fn under(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    prefix.is_empty() || path == prefix || path.starts_with(&format!("{prefix}/"))
}

pub fn run(pins: &PinDir, args: Args) -> anyhow::Result<i32> {
    super::require_root("graceful cgroups")?;
    let hier = Hierarchy::discover()?;
    if let Some(p) = &args.path {
        hier.id_of(p)?;
    }
    let mut rows = rows(pins, &hier)?;
    rows.retain(|r| {
        let path_ok = match (&args.path, &r.path) {
            (Some(p), Some(rp)) => under(rp, p),
            (Some(_), None) => false,
            (None, _) => true,
        };
        path_ok && (args.all || r.inbound_live > 0 || r.outbound_live > 0 || r.listeners > 0)
    });
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        Output::Table => print!("{}", render(&rows)),
    }
    Ok(0)
}

/// The table: IGNORED is the part of INBOUND a drain's exclusions leave
/// out, a dash for none.
fn render(rows: &[Row]) -> String {
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
