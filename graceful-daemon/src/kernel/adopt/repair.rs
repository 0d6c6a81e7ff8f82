//! The repair pass: the adoption iterator run again, with nothing offered
//! to adopt, so that it only checks the sockets that carry storage. Where
//! both copies of the state program missed a change (see the kernel
//! side's `state.rs`), a socket's counted flag disagrees with its state;
//! the iterator, holding the socket's lock, sets both right.
//!
//! The agent runs it over every network namespace every
//! `--repair-interval`, and over a draining pod's namespace before the
//! drain's first look at its counts. A pod's namespace is walked once at a
//! time: a drain that starts while a walk of its namespace runs waits for
//! that one, and a walk whose drains all went away (a pod that starts and
//! abandons drains in a loop) stops at the kernel's next batch.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use tracing::{debug, info, warn};

use super::{
    netns::{self, NetNs},
    pass::{open_in, walk_until, AdoptError},
};
use crate::{
    kernel::bpf::{state_programs::StatePrograms, Kernel},
    metrics::Recorder,
    sync,
};

/// What one repair pass did.
#[derive(Clone, Debug, Default)]
pub struct Repair {
    pub namespaces: usize,
    pub namespaces_failed: usize,
    /// Tracked sockets whose count disagreed with their state, set right.
    pub repaired: u64,
    /// Sockets the state programs count (see [`super::pass::Walked`]).
    pub storage: u64,
    /// Flagged sockets counted for maps that lacked them (see
    /// `control::RECOUNT`): those of a namespace the first pass missed.
    pub recounted: u64,
    pub elapsed: Duration,
}

/// Runs repair passes, off the async workers, and accounts for each one
/// in the metrics and the log.
#[derive(Clone)]
pub struct Repairer {
    /// The agent's handle, whose loaded object opens the iterators.
    kernel: Kernel,
    metrics: Arc<Recorder>,
    /// Detached once a pass over the node finds no socket they count.
    state_programs: Arc<StatePrograms>,
    /// The pods' namespaces being walked now, by inode.
    walks: Arc<Mutex<HashMap<u64, PodWalk>>>,
}

/// A walk of one pod's namespace: its end, who waits for it, and its stop.
struct PodWalk {
    done: tokio::sync::watch::Receiver<bool>,
    waiters: usize,
    cancel: Arc<AtomicBool>,
}

/// One drain waiting for a walk; the last to go stops it.
struct Waiting {
    walks: Arc<Mutex<HashMap<u64, PodWalk>>>,
    inode: u64,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut w = sync::lock(&self.walks);
        if let Some(walk) = w.get_mut(&self.inode) {
            walk.waiters -= 1;
            if walk.waiters == 0 {
                walk.cancel.store(true, Ordering::Release);
            }
        }
    }
}

impl Repairer {
    pub fn new(kernel: Kernel, metrics: Arc<Recorder>, state_programs: Arc<StatePrograms>) -> Self {
        Self {
            kernel,
            metrics,
            state_programs,
            walks: Arc::default(),
        }
    }

    /// Every network namespace on the node: the periodic pass.
    pub async fn all(&self) {
        let kernel = self.kernel.clone();
        let pass = blocking(move || repair(&kernel, &netns::scan_netns().namespaces)).await;
        let pass = self.account(pass, "node");
        if let Some(r) = pass.as_ref().filter(|r| r.recounted > 0) {
            info!(
                sockets = r.recounted,
                "counted connections that an earlier install counted in maps now gone, in namespaces the adoption could not walk"
            );
        }
        if let Some(r) = &pass {
            self.state_programs
                .after_pass(r.storage, r.namespaces_failed == 0);
        }
        match pass {
            Some(r) if r.repaired > 0 => info!(
                repaired = r.repaired,
                namespaces = r.namespaces,
                elapsed_ms = r.elapsed.as_secs_f64() * 1000.0,
                "repaired the counts of sockets whose state change the kernel skipped for the programs"
            ),
            Some(r) => debug!(
                namespaces = r.namespaces,
                elapsed_ms = r.elapsed.as_secs_f64() * 1000.0,
                "repair pass: every count agreed"
            ),
            None => {}
        }
    }

    /// One network namespace: a draining pod's, before the drain's first
    /// look. A failure costs only the repair; the drain goes on. A walk of
    /// it already running is waited for, not started again; dropped, this
    /// stops the walk if no other drain waits for it.
    pub async fn pod(&self, ns: NetNs, pod: &str) {
        let inode = ns.inode;
        let (mut done, started) = {
            let mut w = sync::lock(&self.walks);
            match w.get_mut(&inode) {
                Some(walk) => {
                    walk.waiters += 1;
                    (walk.done.clone(), None)
                }
                None => {
                    let (tx, rx) = tokio::sync::watch::channel(false);
                    let cancel = Arc::new(AtomicBool::new(false));
                    w.insert(
                        inode,
                        PodWalk {
                            done: rx.clone(),
                            waiters: 1,
                            cancel: cancel.clone(),
                        },
                    );
                    (rx, Some((tx, cancel)))
                }
            }
        };
        let _waiting = Waiting {
            walks: self.walks.clone(),
            inode,
        };
        let Some((tx, cancel)) = started else {
            let _ = done.wait_for(|d| *d).await;
            return;
        };
        let kernel = self.kernel.clone();
        let walks = self.walks.clone();
        let pass = blocking(move || {
            let r = repair_until(&kernel, std::slice::from_ref(&ns), &cancel);
            sync::lock(&walks).remove(&inode);
            let _ = tx.send(true);
            r
        })
        .await;
        if let Some(r) = self.account(pass, pod) {
            if r.repaired > 0 {
                info!(
                    pod,
                    repaired = r.repaired,
                    "repaired the counts of the draining pod's sockets whose state change the kernel skipped for the programs"
                );
            }
        }
    }

    /// Records a pass in the metrics; a failed one is also a warning.
    /// `over` names what it walked (`node`, or the pod).
    fn account(&self, pass: Result<Repair, AdoptError>, over: &str) -> Option<Repair> {
        match pass {
            Ok(r) => {
                self.metrics.repair(Some(r.elapsed.as_secs_f64()), r.repaired);
                Some(r)
            }
            Err(e) => {
                self.metrics.error("repair");
                warn!(over, error = %e, "repair pass failed; counts stay as they are until the next");
                None
            }
        }
    }
}

async fn blocking(
    f: impl FnOnce() -> Result<Repair, AdoptError> + Send + 'static,
) -> Result<Repair, AdoptError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(AdoptError::Task(e.to_string())))
}

/// The walk, about 1.2 µs per socket (250 ms on a node with 200,000), runs
/// without the loaded object's lock: the lock is held only to open each
/// namespace's iterator, so a drain that attaches its ingress program
/// meanwhile does not wait for the walk.
fn repair(kernel: &Kernel, namespaces: &[NetNs]) -> Result<Repair, AdoptError> {
    repair_until(kernel, namespaces, &AtomicBool::new(false))
}

/// [`repair`], stopped at the kernel's next batch once `cancel` is set.
fn repair_until(kernel: &Kernel, namespaces: &[NetNs], cancel: &AtomicBool) -> Result<Repair, AdoptError> {
    let started = Instant::now();
    let mut report = Repair {
        namespaces: namespaces.len(),
        ..Repair::default()
    };
    for ns in namespaces {
        if cancel.load(Ordering::Acquire) {
            break;
        }
        match open_in(ns, || kernel.open_iter_here())?.and_then(|f| walk_until(f, cancel)) {
            Ok(w) => {
                report.repaired += w.repaired;
                report.storage += w.storage;
                report.recounted += w.recounted;
            }
            Err(e) => {
                debug!(ns = ns.inode, error = %e, "repair iterator failed");
                report.namespaces_failed += 1;
            }
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}
