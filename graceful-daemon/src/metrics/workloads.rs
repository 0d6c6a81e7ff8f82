//! Terminating pods' reports by namespace and workload
//! (`graceful_workload_terminations_total{namespace, workload, outcome}`),
//! so an app team sees its own drains. The number of series is bounded:
//! past `max` workloads (per agent, since its start) the rest count under
//! `namespace="_other", workload="_other"`. A series appears at a
//! workload's first report on the node, not before: most of a node's
//! workloads are never terminated between two restarts of the agent.
//!
//! They name workloads, so, like the per-pod series, they are left out of
//! the metrics address on the pod network unless `--metrics-pods on`.

use std::{collections::HashSet, sync::Mutex};

use prometheus_client::metrics::{counter::Counter, family::Family};

use crate::sync;

/// `namespace`, `workload`, `outcome`.
pub(super) type Labels = [(&'static str, String); 3];

/// What a workload past the bound counts under.
pub const OTHER: &str = "_other";

#[derive(Debug)]
pub(super) struct Workloads {
    pub(super) family: Family<Labels, Counter>,
    seen: Mutex<HashSet<(String, String)>>,
    max: usize,
}

impl Workloads {
    pub(super) fn new(max: usize) -> Self {
        Workloads {
            family: Family::default(),
            seen: Mutex::new(HashSet::new()),
            max,
        }
    }

    /// One report of `namespace`'s `workload`, with its outcome.
    pub(super) fn count(&self, namespace: &str, workload: &str, outcome: &str) {
        let key = (namespace.to_string(), workload.to_string());
        let named = {
            let mut seen = sync::lock(&self.seen);
            seen.contains(&key) || (seen.len() < self.max && seen.insert(key.clone()))
        };
        let (ns, wl) = if named { key } else { (OTHER.into(), OTHER.into()) };
        self.family
            .get_or_create(&[
                ("namespace", ns),
                ("workload", wl),
                ("outcome", outcome.to_string()),
            ])
            .inc();
    }
}
