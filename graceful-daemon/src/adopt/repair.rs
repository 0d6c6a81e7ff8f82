//! The repair pass: the adoption iterator run again, with nothing offered
//! to adopt, so that it only checks the sockets that carry storage. Where
//! both copies of the state program missed a change (see the kernel
//! side's `state.rs`), a socket's counted flag disagrees with its state;
//! the iterator, holding the socket's lock, sets both right.
//!
//! The agent runs it over every network namespace every
//! `--repair-interval`, and over a draining pod's namespace before the
//! drain's first look at its counts.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use aya::Ebpf;
use tracing::debug;

use super::{
    netns::{self, NetNs},
    pass::{run_iter, AdoptError},
};
use crate::bpf::loader;

/// What one repair pass did.
#[derive(Clone, Debug, Default)]
pub struct Repair {
    pub namespaces: usize,
    pub namespaces_failed: usize,
    /// Tracked sockets whose count disagreed with their state, set right.
    pub repaired: u64,
    pub elapsed: Duration,
}

/// The agent's loaded object, shared with the drain gate's ingress program.
#[derive(Clone)]
pub struct Repairer {
    ebpf: Arc<Mutex<Ebpf>>,
}

impl Repairer {
    pub fn new(ebpf: Arc<Mutex<Ebpf>>) -> Self {
        Self { ebpf }
    }

    /// Every network namespace on the node.
    pub async fn all(&self) -> Result<Repair, AdoptError> {
        let ebpf = self.ebpf.clone();
        blocking(move || repair(&ebpf, &netns::scan_netns().namespaces)).await
    }

    /// One network namespace: a draining pod's.
    pub async fn netns(&self, ns: NetNs) -> Result<Repair, AdoptError> {
        let ebpf = self.ebpf.clone();
        blocking(move || repair(&ebpf, std::slice::from_ref(&ns))).await
    }
}

async fn blocking(
    f: impl FnOnce() -> Result<Repair, AdoptError> + Send + 'static,
) -> Result<Repair, AdoptError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(AdoptError::Task(e.to_string())))
}

fn repair(ebpf: &Mutex<Ebpf>, namespaces: &[NetNs]) -> Result<Repair, AdoptError> {
    let started = Instant::now();
    let mut ebpf = ebpf.lock().unwrap_or_else(|p| p.into_inner());
    let mut report = Repair {
        namespaces: namespaces.len(),
        ..Repair::default()
    };
    for ns in namespaces {
        let prog = loader::adoption_iter(&mut ebpf)?;
        match run_iter(ns, prog) {
            Ok(n) => report.repaired += n,
            Err(e) => {
                debug!(ns = ns.inode, error = %e, "repair iterator failed");
                report.namespaces_failed += 1;
            }
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}
