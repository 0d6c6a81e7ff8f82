//! Adopting the sockets that existed before the programs were attached.
//!
//! Order matters, and the tracepoint is attached before this runs:
//! 1. in a network namespace, dump TCP sockets with sock_diag (listeners
//!    first, then the rest, streamed) and decide each one's owner and role;
//! 2. hand cookie → owner to the kernel (`GRACEFUL_ADOPT`) as they come;
//! 3. run the `iter/tcp` program in that namespace: it gives each listed
//!    socket without storage its owner, counting it if live; then empty the
//!    map and go on to the next namespace.
//!
//! A connection accepted between step 1 and the moment its listener is
//! adopted inherits no storage and would be missed, so the whole pass runs
//! twice: the second dump sees it, and by then every listener has storage,
//! so nothing new can slip through. Sockets that already carry storage are
//! only checked: where both copies of the state program missed a change,
//! the socket's count is set right by the state it is in. So running this
//! on an agent restart is harmless, and repairs such a miss.

use std::{fs::File, io::Read as _};

use aya::{
    maps::{HashMap, MapData},
    Ebpf,
};
use graceful_common::{role, AdoptEntry};
use tracing::{debug, info, warn};

use super::{
    netns::{self, NetNs},
    sockdiag::{self, tcp_state, Classified, Classifier, Role},
};
use crate::kernel::bpf::{links, loader::LoadError, maps, MapError};

/// What one adoption did.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub namespaces: usize,
    pub namespaces_failed: usize,
    /// Sockets offered to the iterator, over both passes.
    pub offered: usize,
    /// Tracked sockets whose count disagreed with their state, set right.
    #[serde(default)]
    pub repaired: u64,
    /// Sockets the state programs count (they carry storage), as the last
    /// pass found them; under the sock_ops design, those programs go once
    /// there are none.
    #[serde(default)]
    pub storage: u64,
    /// Sockets an earlier install's sock_ops program flagged and counted in
    /// maps that are gone (a reinstall, lost pins), counted again here
    /// (see `control::RECOUNT`).
    #[serde(default)]
    pub recounted: u64,
    pub elapsed_ms: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Open(#[from] MapError),
    #[error("cannot fill the adoption map: {0}")]
    Map(#[source] aya::maps::MapError),
    #[error("the pass's thread failed: {0}")]
    Task(String),
}

fn entry(c: &Classified) -> AdoptEntry {
    AdoptEntry {
        cgroup_id: c.cgroup_id,
        role: match c.role {
            Role::Listener => role::LISTENER,
            Role::Inbound => role::INBOUND,
            Role::Outbound => role::OUTBOUND,
        },
        _pad: [0; 7],
    }
}

enum Offer {
    Dump(sockdiag::SockDiagError),
    Map(aya::maps::MapError),
}

/// Puts every adoptable socket of the calling thread's network namespace
/// in the adoption map, and returns their cookies. Streams: the listeners
/// are dumped first (few), then every other socket is classified against
/// them and offered as it arrives, so memory does not grow with the number
/// of connections (a 100k-connection namespace once held a 20 MB dump).
fn offer(map: &mut HashMap<&mut MapData, u64, AdoptEntry>) -> Result<Vec<u64>, Offer> {
    let mut listeners = Vec::new();
    sockdiag::for_each_tcp(sockdiag::state_bit(tcp_state::LISTEN), |s| listeners.push(s))
        .map_err(Offer::Dump)?;
    let classifier = Classifier::new(listeners);
    let mut cookies = Vec::new();
    let mut failed = None;
    sockdiag::for_each_tcp(sockdiag::ADOPTABLE_STATES, |s| {
        let Some(c) = classifier.classify(&s) else {
            return;
        };
        if failed.is_none() {
            // A duplicate (a non-atomic dump) overwrites the same entry.
            match map.insert(c.cookie, entry(&c), 0) {
                Ok(()) => cookies.push(c.cookie),
                Err(e) => failed = Some(e),
            }
        }
    })
    .map_err(Offer::Dump)?;
    match failed {
        Some(e) => Err(Offer::Map(e)),
        None => Ok(cookies),
    }
}

/// What the iterator saw of the sockets the state programs count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Walked {
    /// Sockets whose count it set right.
    pub repaired: u64,
    /// Sockets with storage, the repaired ones included.
    pub storage: u64,
    /// Flagged sockets that these maps had not counted, counted now.
    pub recounted: u64,
}

impl std::ops::AddAssign for Walked {
    fn add_assign(&mut self, o: Walked) {
        self.repaired += o.repaired;
        self.storage += o.storage;
        self.recounted += o.recounted;
    }
}

/// Walks every socket of an opened iterator. The program writes one byte
/// per socket it saw with storage: `s`, `r` for one it repaired, `h` for
/// one it repaired and handed over to the sock_ops program (no storage
/// left); and `c` for a flagged socket it counted for these maps
/// (`control::RECOUNT`).
pub(super) fn walk(file: File) -> std::io::Result<Walked> {
    walk_until(file, &std::sync::atomic::AtomicBool::new(false))
}

/// [`walk`], stopped between two of the kernel's batches once `cancel`
/// is set (what was walked is counted).
pub(super) fn walk_until(mut file: File, cancel: &std::sync::atomic::AtomicBool) -> std::io::Result<Walked> {
    let mut w = Walked::default();
    let mut buf = [0u8; 4096];
    while !cancel.load(std::sync::atomic::Ordering::Acquire) {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        for b in &buf[..n] {
            match b {
                b'r' => {
                    w.repaired += 1;
                    w.storage += 1;
                }
                b'h' => w.repaired += 1,
                b's' => w.storage += 1,
                b'c' => w.recounted += 1,
                _ => {}
            }
        }
    }
    Ok(w)
}

/// Adopts every pre-existing TCP socket in every network namespace.
pub fn adopt_all(ebpf: &mut Ebpf) -> Result<Report, AdoptError> {
    let started = std::time::Instant::now();
    let scan = netns::scan_netns();
    let mut report = Report {
        namespaces: scan.namespaces.len(),
        ..Report::default()
    };
    let mut failed = std::collections::HashSet::new();

    for pass in 0..2 {
        let mut offered = 0;
        let mut walked = Walked::default();
        for ns in &scan.namespaces {
            // 1. Offer this namespace's sockets to the kernel, classified
            //    as the dump streams in.
            let cookies = {
                let mut map = maps::adopt_map(ebpf)?;
                match netns::run_in(ns, || offer(&mut map)) {
                    Ok(Ok(c)) => c,
                    Ok(Err(Offer::Map(e))) => return Err(AdoptError::Map(e)),
                    Ok(Err(Offer::Dump(e))) => {
                        debug!(ns = ns.inode, error = %e, "sock_diag dump failed");
                        failed.insert(ns.inode);
                        continue;
                    }
                    Err(e) => {
                        debug!(ns = ns.inode, error = %e, "cannot enter network namespace");
                        failed.insert(ns.inode);
                        continue;
                    }
                }
            };
            offered += cookies.len();

            // 2. Let the iterator adopt them (and check the others).
            match iterate_in(ebpf, ns)? {
                Ok(w) => walked += w,
                Err(e) => {
                    debug!(ns = ns.inode, error = %e, "adoption iterator failed");
                    failed.insert(ns.inode);
                }
            }

            // 3. The map is only a hand-over: empty it.
            let mut map = maps::adopt_map(ebpf)?;
            for c in &cookies {
                let _ = map.remove(c);
            }
        }
        report.offered += offered;
        report.repaired += walked.repaired;
        report.storage = walked.storage;
        report.recounted += walked.recounted;
        debug!(pass, offered, storage = walked.storage, "adoption pass done");
    }
    report.namespaces_failed = failed.len();
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    if report.namespaces_failed > 0 {
        warn!(
            failed = report.namespaces_failed,
            "some network namespaces could not be adopted (they vanished, or the agent lacks CAP_SYS_ADMIN)"
        );
    }
    info!(
        namespaces = report.namespaces,
        offered = report.offered,
        repaired = report.repaired,
        storage = report.storage,
        recounted = report.recounted,
        elapsed_ms = report.elapsed_ms,
        "adopted pre-existing sockets"
    );
    if report.recounted > 0 {
        info!(
            sockets = report.recounted,
            "counted the connections and listeners that an earlier install counted in pinned maps that are gone (`graceful uninstall`, lost or replaced pins)"
        );
    }
    Ok(report)
}

/// Runs the iterator in `ns` (loading it the first time). The outer error
/// is the program's and ends the pass; the inner one is the namespace's
/// (it vanished, or could not be entered), and the pass goes on.
fn iterate_in(ebpf: &mut Ebpf, ns: &NetNs) -> Result<std::io::Result<Walked>, AdoptError> {
    Ok(open_in(ns, || links::open_iter(ebpf))?.and_then(walk))
}

/// Opens, with `open` run inside `ns`, an instance of the iterator over
/// `ns`, to [`walk`] later: the walk needs nothing of the object. Errors
/// as in [`iterate_in`].
pub(super) fn open_in(
    ns: &NetNs,
    open: impl FnOnce() -> Result<std::io::Result<File>, LoadError> + Send,
) -> Result<std::io::Result<File>, AdoptError> {
    match netns::run_in(ns, open) {
        Ok(opened) => Ok(opened?),
        // The namespace could not be entered: the pass goes on.
        Err(e) => Ok(Err(e)),
    }
}
