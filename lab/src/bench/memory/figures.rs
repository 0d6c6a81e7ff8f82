//! What the memory bench reads and prints: the agent's counts against the
//! workers', the socket storage and memory cgroup charges, the maps.

use std::{collections::BTreeMap, process::Command};

use anyhow::{bail, Context as _};

use super::PORT;
use graceful_test_support::memcg::MemCgroup;

use crate::bench::{agent::Agent, bpf::MapInfo};

/// What `graceful cgroups` says about the bench's cgroups, against what the workers hold.
#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) rows: usize,
    pub(super) inbound: u64,
    pub(super) outbound: u64,
    pub(super) listeners: u64,
    /// Cgroups whose own figures differ from their worker's.
    pub(super) wrong_rows: usize,
}

impl Counts {
    pub(super) fn read(agent: &Agent, per: &BTreeMap<String, u64>) -> anyhow::Result<Self> {
        let mut c = Self::default();
        for row in agent.cgroups()? {
            let Some(path) = row.path.as_deref() else { continue };
            let Some(&n) = per.get(path) else { continue };
            c.rows += 1;
            c.inbound += row.inbound_live;
            c.outbound += row.outbound_live;
            c.listeners += row.listeners;
            if row.inbound_live != n || row.outbound_live != n || row.listeners != 1 {
                c.wrong_rows += 1;
            }
        }
        Ok(c)
    }

    pub(super) fn ok(&self, connections: usize, cgroups: usize) -> bool {
        self.rows == cgroups
            && self.inbound == connections as u64
            && self.outbound == connections as u64
            && self.listeners == cgroups as u64
            && self.wrong_rows == 0
    }

    pub(super) fn line(&self, connections: usize, cgroups: usize) -> String {
        format!(
            "{} cgroups: inbound_live {} outbound_live {} listeners {} (expected {connections} / {connections} / {cgroups}, {} cgroup(s) off) → {}",
            self.rows,
            self.inbound,
            self.outbound,
            self.listeners,
            self.wrong_rows,
            if self.ok(connections, cgroups) { "OK" } else { "MISMATCH" }
        )
    }
}

/// Socket-local storage charged to one kind of socket.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Charged {
    pub(super) sockets: u64,
    pub(super) bytes: u64,
}

impl Charged {
    pub(super) fn add(&mut self, bytes: u64) {
        self.sockets += 1;
        self.bytes += bytes;
    }

    pub(super) fn per_socket(&self) -> f64 {
        self.bytes as f64 / self.sockets.max(1) as f64
    }
}

/// Socket-local storage is charged to each socket (`sk_omem_alloc`, the `o`
/// of `ss -m`), not to the map's memlock. Sums it over the workers' sockets:
/// [outbound, inbound, listeners].
pub(super) fn sk_storage_charged() -> anyhow::Result<[Charged; 3]> {
    let out = Command::new("ss")
        .args(["-tanmHO", "( src 127.200.0.0/16 or dst 127.200.0.0/16 )"])
        .output()
        .context("run ss")?;
    if !out.status.success() {
        bail!("ss failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let mut by_kind = [Charged::default(); 3];
    let port = format!(":{PORT}");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((head, mem)) = line.split_once("skmem:(") else {
            continue;
        };
        let o = mem
            .split(',')
            .find_map(|f| f.strip_prefix('o'))
            .and_then(|o| o.trim_end_matches(')').parse::<u64>().ok())
            .unwrap_or(0);
        // State Recv-Q Send-Q Local Peer
        let f: Vec<&str> = head.split_whitespace().collect();
        let kind = match (f.first(), f.get(3)) {
            (Some(&"LISTEN"), _) => 2,
            (_, Some(local)) if local.ends_with(&port) => 1,
            _ => 0,
        };
        by_kind[kind].add(o);
    }
    Ok(by_kind)
}

/// What the agent's memory cgroup was charged at one moment.
#[derive(Clone, Copy)]
pub(super) struct Charge {
    pub(super) all: u64,
    pub(super) kernel: u64,
}

impl Charge {
    pub(super) fn read(memcg: &MemCgroup) -> anyhow::Result<Self> {
        Ok(Self {
            all: memcg.usage()?,
            kernel: memcg.kernel()?,
        })
    }

    pub(super) fn line(&self) -> String {
        format!(
            "agent's memory cgroup charged {:.1} MiB, of which kernel memory {:.1} MiB",
            bytes_mib(self.all),
            bytes_mib(self.kernel)
        )
    }
}

pub(super) fn bytes_mib(b: u64) -> f64 {
    b as f64 / 1048576.0
}

pub(super) fn print_maps(maps: &[MapInfo]) {
    println!(
        "  {:<20} {:<13} {:>9} {:>11} {:>7} {:>14}",
        "map", "type", "key+value", "max_entries", "flags", "memlock bytes"
    );
    for m in maps {
        println!(
            "  {:<20} {:<13} {:>9} {:>11} {:>#7x} {:>14}",
            if m.name.is_empty() { "?" } else { m.name.as_str() },
            m.type_name(),
            format!("{}+{}", m.key_size, m.value_size),
            m.max_entries,
            m.flags,
            m.memlock
        );
    }
    let total: u64 = maps.iter().map(|m| m.memlock).sum();
    println!(
        "  {:<65} {:>14} ({:.2} MiB)",
        "total",
        total,
        total as f64 / 1048576.0
    );
}
