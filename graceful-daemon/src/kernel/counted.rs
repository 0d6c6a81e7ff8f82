//! What the pinned maps count, per cgroup, with each cgroup's path: the
//! rows of `graceful cgroups` (read straight from the pins, so it works
//! while the agent is down) and of the agent's `/v1/cgroups`.

pub use graceful_api::views::cgroups::Row;

use crate::{
    kernel::bpf::{maps::Counters, paths::PinDir},
    kernel::cgroupfs::Hierarchy,
};

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
