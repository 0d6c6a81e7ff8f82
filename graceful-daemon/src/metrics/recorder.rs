//! What happens, counted by the tasks it happens in: drains by outcome,
//! their durations by reason, termination reports, repair passes and the
//! agent's own errors. Its callers pass plain values (a reason, a
//! duration, a kind), so every room that counts can use it.

use std::sync::{Arc, Weak};

use graceful_api::Reason;
use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

use super::{
    label::{label, Label},
    live::{Live, LiveSource},
    workloads::Workloads,
};

/// Seconds a drain can take, from an idle pod (ms) to a long deadline.
const DRAIN_BUCKETS: [f64; 14] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0,
];

fn drain_histogram() -> Histogram {
    Histogram::new(DRAIN_BUCKETS)
}

/// Seconds a repair pass can take: a walk of the node's TCP sockets.
const REPAIR_BUCKETS: [f64; 9] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

/// Counts what the agent's tasks do. Cheap to clone into each of them.
#[derive(Debug)]
pub struct Recorder {
    drains: Family<Label, Counter>,
    drain_seconds: Family<Label, Histogram, fn() -> Histogram>,
    terminations: Family<Label, Counter>,
    workloads: Workloads,
    unreported: Counter,
    errors: Family<Label, Counter>,
    repair_seconds: Histogram,
    repaired: Counter,
    build: Family<BuildLabels, Gauge>,
}

/// `graceful_build_info`'s labels.
type BuildLabels = [(&'static str, String); 4];

/// Every kind [`Recorder::error`] is called with, each series present at
/// zero from the start: a counter that appears at 1 is missed by
/// `increase()`, and the alerts (deploy/helm) would not see the first
/// error. A unit test checks the list against the calls in the sources.
pub const ERROR_KINDS: [&str; 18] = [
    "api_busy",
    "drain",
    "drain_uncounted",
    "exclusions",
    "feed_lagged",
    "gate_identify",
    "gate_squatted",
    "handover_unreadable",
    "http_gate_bind",
    "http_gate_busy",
    "http_gate_not_hook",
    "http_gate_peer",
    "http_gate_refused",
    "ingress_attach",
    "metrics_encode",
    "pins_removed",
    "read_stats",
    "repair",
];

/// The reasons the agent releases a drain for.
const REASONS: [Reason; 4] = [
    Reason::Drained,
    Reason::Quiet,
    Reason::Deadline,
    Reason::ContainersExited,
];

impl Recorder {
    /// Every known outcome starts at zero, so dashboards and `rate()` see
    /// the series before the first drain: the drains' release reasons, and
    /// `termination_outcomes`, the outcomes a terminating pod's report can
    /// have (the Kubernetes side's, passed in by the agent).
    /// `max_workloads` bounds the per-workload series ([`super::workloads`]).
    pub fn new(termination_outcomes: &[&str], max_workloads: usize) -> Self {
        let r = Recorder {
            drains: Family::default(),
            drain_seconds: Family::new_with_constructor(drain_histogram),
            terminations: Family::default(),
            workloads: Workloads::new(max_workloads),
            unreported: Counter::default(),
            errors: Family::default(),
            repair_seconds: Histogram::new(REPAIR_BUCKETS),
            repaired: Counter::default(),
            build: Family::default(),
        };
        for reason in REASONS {
            let _ = r.drains.get_or_create(&label("outcome", reason.as_str()));
            let _ = r.drain_seconds.get_or_create(&label("reason", reason.as_str()));
        }
        let _ = r.drains.get_or_create(&label("outcome", "abandoned"));
        for o in termination_outcomes {
            let _ = r.terminations.get_or_create(&label("outcome", o));
        }
        for kind in ERROR_KINDS {
            let _ = r.errors.get_or_create(&label("kind", kind));
        }
        r
    }

    /// A drain through the gate released after `waited_ms`: counted by its
    /// reason, timed.
    pub fn drain_released(&self, reason: Reason, waited_ms: u64) {
        let label_reason = label("reason", reason.as_str());
        self.drains
            .get_or_create(&label("outcome", reason.as_str()))
            .inc();
        self.drain_seconds
            .get_or_create(&label_reason)
            .observe(waited_ms as f64 / 1000.0);
    }

    /// A drain whose hook went away before its release.
    pub fn drain_abandoned(&self) {
        self.drains.get_or_create(&label("outcome", "abandoned")).inc();
    }

    /// A terminating pod's report (gated or not), by outcome, and by its
    /// namespace and workload.
    pub fn termination(&self, outcome: &str, namespace: &str, workload: &str) {
        self.terminations.get_or_create(&label("outcome", outcome)).inc();
        self.workloads.count(namespace, workload, outcome);
    }

    /// A terminating pod outside the report scope: not opted in, not
    /// widened to.
    pub fn unreported(&self) {
        self.unreported.inc();
    }

    /// An error the agent recovered from, by kind: one of [`ERROR_KINDS`].
    pub fn error(&self, kind: &'static str) {
        self.errors.get_or_create(&label("kind", kind)).inc();
    }

    /// A repair pass: the sockets whose count it set right, and how long
    /// it took (the start-up pass, which also adopts, is not timed here).
    pub fn repair(&self, seconds: Option<f64>, repaired: u64) {
        if let Some(s) = seconds {
            self.repair_seconds.observe(s);
        }
        self.repaired.inc_by(repaired);
    }

    /// `graceful_build_info`: 1, labelled with what this agent is and how
    /// it counts (set once the programs are attached).
    pub fn build_info(&self, counting: &str, kernel: &str) {
        self.build
            .get_or_create(&[
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                ("commit", env!("GRACEFUL_COMMIT").to_string()),
                ("counting", counting.to_string()),
                ("kernel", kernel.to_string()),
            ])
            .set(1);
    }

    /// The registry to encode: these families, and the figures of `node`
    /// read at scrape time.
    /// Every metric, read from `node` at scrape time; `pods`: with the
    /// per-pod series (which name every pod of the node).
    pub fn registry(self: &Arc<Self>, node: Weak<dyn LiveSource>, pods: bool) -> Registry {
        let mut r = Registry::with_prefix("graceful");
        r.register(
            "build_info",
            "1, labelled with the agent's version, commit, counting design and the node's kernel",
            self.build.clone(),
        );
        r.register(
            "drains",
            "Drains through the gate, by outcome: the release reason, or abandoned",
            self.drains.clone(),
        );
        r.register(
            "drain_duration_seconds",
            "How long drains through the gate held the container's SIGTERM, by release reason",
            self.drain_seconds.clone(),
        );
        r.register(
            "terminations",
            "Terminating pods reported, by outcome (drained, exited, deleted)",
            self.terminations.clone(),
        );
        r.register(
            "unreported_terminations",
            "Terminating pods not reported: they carry nothing of graceful's and the report scope (--report-namespaces, --report-selector) does not take them in",
            self.unreported.clone(),
        );
        if pods {
            r.register(
                "workload_terminations",
                "Terminating pods reported, by namespace, workload (the controller, kind/name) and outcome; past --metrics-max-workloads, under _other",
                self.workloads.family.clone(),
            );
        }
        r.register(
            "errors",
            "Errors the agent recovered from, by kind",
            self.errors.clone(),
        );
        r.register(
            "repair_pass_duration_seconds",
            "How long each repair pass took: over the node every --repair-interval, over a pod's network namespace before its drain's first look",
            self.repair_seconds.clone(),
        );
        r.register(
            "repaired_sockets",
            "Sockets whose count disagreed with their state (a change the kernel skipped for both copies of the state program), set right by a repair pass (at start, periodic, or before a drain)",
            self.repaired.clone(),
        );
        r.register_collector(Box::new(Live { node, pods }));
        r
    }
}

#[cfg(test)]
mod tests;
