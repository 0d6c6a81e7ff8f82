//! Adopting the sockets that existed before the programs were attached.
//!
//! Order matters, and the tracepoint is attached before this runs:
//! 1. in every network namespace, dump TCP sockets with sock_diag and decide
//!    each one's owner and role;
//! 2. hand cookie → owner to the kernel (`GRACEFUL_ADOPT`);
//! 3. run the `iter/tcp` program in every namespace: it gives each listed
//!    socket without storage its owner, counting it if live.
//!
//! A connection accepted between step 1 and the moment its listener is
//! adopted inherits no storage and would be missed, so the whole pass runs
//! twice: the second dump sees it, and by then every listener has storage,
//! so nothing new can slip through. Sockets that already carry storage are
//! left alone, so running this on an agent restart is harmless.

use std::io::Read as _;

use aya::{
    maps::{HashMap, MapData},
    programs::Iter,
    Ebpf,
};
use graceful_common::{names, role, AdoptEntry};
use tracing::{debug, info, warn};

use super::{
    netns::{self, NetNs},
    sockdiag::{self, Classified, Role},
};
use crate::bpf::loader::{self, LoadError};

/// What one adoption did.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub namespaces: usize,
    pub namespaces_failed: usize,
    /// Sockets offered to the iterator, over both passes.
    pub offered: usize,
    pub elapsed_ms: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("cannot fill the adoption map: {0}")]
    Map(#[source] aya::maps::MapError),
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

/// Runs the iterator in the calling thread's network namespace.
fn iterate(prog: &mut Iter) -> std::io::Result<()> {
    let id = prog.attach().map_err(std::io::Error::other)?;
    let link = prog.take_link(id).map_err(std::io::Error::other)?;
    let mut file = link.into_file().map_err(std::io::Error::other)?;
    // The program prints nothing; reading to the end walks every socket.
    let mut sink = Vec::new();
    file.read_to_end(&mut sink)?;
    Ok(())
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
        // 1. Dump and classify, namespace by namespace.
        let mut found: Vec<Classified> = Vec::new();
        for ns in &scan.namespaces {
            match netns::run_in(ns, sockdiag::dump_tcp) {
                Ok(Ok(socks)) => found.extend(sockdiag::classify(&socks)),
                Ok(Err(e)) => {
                    debug!(ns = ns.inode, error = %e, "sock_diag dump failed");
                    failed.insert(ns.inode);
                }
                Err(e) => {
                    debug!(ns = ns.inode, error = %e, "cannot enter network namespace");
                    failed.insert(ns.inode);
                }
            }
        }
        report.offered += found.len();

        // 2. Offer them to the kernel.
        {
            let map = ebpf.map_mut(names::ADOPT).ok_or_else(|| {
                AdoptError::Load(LoadError::Pin {
                    what: "find the adoption map".into(),
                    message: "missing".into(),
                })
            })?;
            let mut map: HashMap<&mut MapData, u64, AdoptEntry> =
                HashMap::try_from(map).map_err(AdoptError::Map)?;
            for c in &found {
                map.insert(c.cookie, entry(c), 0).map_err(AdoptError::Map)?;
            }
        }

        // 3. Let the iterator adopt them, in each namespace.
        let prog = loader::adoption_iter(ebpf)?;
        for ns in &scan.namespaces {
            if failed.contains(&ns.inode) {
                continue;
            }
            let res = run_iter(ns, prog);
            if let Err(e) = res {
                debug!(ns = ns.inode, error = %e, "adoption iterator failed");
                failed.insert(ns.inode);
            }
        }

        // The map is only a hand-over: empty it.
        let map = ebpf.map_mut(names::ADOPT).expect("checked above");
        let mut map: HashMap<&mut MapData, u64, AdoptEntry> =
            HashMap::try_from(map).map_err(AdoptError::Map)?;
        for c in &found {
            let _ = map.remove(&c.cookie);
        }
        debug!(pass, offered = found.len(), "adoption pass done");
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
        elapsed_ms = report.elapsed_ms,
        "adopted pre-existing sockets"
    );
    Ok(report)
}

fn run_iter(ns: &NetNs, prog: &mut Iter) -> std::io::Result<()> {
    netns::run_in(ns, || iterate(prog))?
}
