//! `/metrics`, in the OpenMetrics text format Prometheus scrapes.
//!
//! Two kinds of figures:
//! - [`Recorder`]: what happens (drains by outcome, their durations by
//!   reason, termination reports, the agent's own errors), counted by the
//!   tasks it happens in;
//! - [`Live`]: what is (connections per pod, kernel counters, map sizes,
//!   adoption), read at scrape time from the pinned maps and the index, so
//!   a scrape never sees a stale copy.
//!
//! Per-pod series are labelled `namespace` and `pod` (the uid until the
//! API has named the pod). Their number is bounded: past `max_pods` the
//! remaining pods are summed into one `pod="_other"` series.

use std::sync::{Arc, Weak};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{
        counter::{ConstCounter, Counter},
        family::Family,
        gauge::ConstGauge,
        histogram::Histogram,
        MetricType,
    },
    registry::Registry,
};

use graceful_common::{MAX_CGROUPS, MAX_WATCH};

use super::node::Node;
use crate::{
    drain::{engine::Report, policy::Reason},
    kube::Outcome,
};

type Label = [(&'static str, String); 1];

fn label(key: &'static str, value: &str) -> Label {
    [(key, value.to_string())]
}

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
    errors: Family<Label, Counter>,
    repair_seconds: Histogram,
    repaired: Counter,
}

/// The reasons the agent releases a drain for.
const REASONS: [Reason; 4] = [
    Reason::Drained,
    Reason::Quiet,
    Reason::Deadline,
    Reason::ContainersExited,
];

impl Default for Recorder {
    /// Every known outcome starts at zero, so dashboards and `rate()` see
    /// the series before the first drain.
    fn default() -> Self {
        let r = Recorder {
            drains: Family::default(),
            drain_seconds: Family::new_with_constructor(drain_histogram),
            terminations: Family::default(),
            errors: Family::default(),
            repair_seconds: Histogram::new(REPAIR_BUCKETS),
            repaired: Counter::default(),
        };
        for reason in REASONS {
            let _ = r.drains.get_or_create(&label("outcome", reason.as_str()));
            let _ = r.drain_seconds.get_or_create(&label("reason", reason.as_str()));
        }
        let _ = r.drains.get_or_create(&label("outcome", "abandoned"));
        for o in [Outcome::Drained, Outcome::Exited, Outcome::Deleted] {
            let _ = r.terminations.get_or_create(&label("outcome", o.as_str()));
        }
        r
    }
}

impl Recorder {
    /// A drain through the gate released: counted by its reason, timed.
    pub fn drain_released(&self, r: &Report) {
        let reason = label("reason", r.reason.as_str());
        self.drains
            .get_or_create(&label("outcome", r.reason.as_str()))
            .inc();
        self.drain_seconds
            .get_or_create(&reason)
            .observe(r.waited_ms as f64 / 1000.0);
    }

    /// A drain whose hook went away before its release.
    pub fn drain_abandoned(&self) {
        self.drains.get_or_create(&label("outcome", "abandoned")).inc();
    }

    /// A terminating pod's report (gated or not), by outcome.
    pub fn termination(&self, outcome: &str) {
        self.terminations.get_or_create(&label("outcome", outcome)).inc();
    }

    /// An error the agent recovered from, by kind (`drain`, `api_scrape`,
    /// `ingress_attach`, `feed_lagged`, ...).
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

    /// The registry to encode: these families, and `live` read at scrape time.
    pub fn registry(self: &Arc<Self>, node: Weak<Node>) -> Registry {
        let mut r = Registry::with_prefix("graceful");
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
        r.register_collector(Box::new(Live { node }));
        r
    }
}

/// Figures read at scrape time.
#[derive(Debug)]
struct Live {
    node: Weak<Node>,
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> std::fmt::Result {
    let c = ConstCounter::new(v);
    c.encode(e.encode_descriptor(name, help, None, c.metric_type())?)
}

fn labelled<L: prometheus_client::encoding::EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    rows: &[(L, u64)],
) -> std::fmt::Result {
    let mut d = e.encode_descriptor(name, help, None, kind)?;
    for (l, v) in rows {
        match kind {
            MetricType::Counter => ConstCounter::new(*v).encode(d.encode_family(l)?)?,
            _ => ConstGauge::new(*v as i64).encode(d.encode_family(l)?)?,
        }
    }
    Ok(())
}

impl Collector for Live {
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let Some(node) = self.node.upgrade() else {
            return Ok(());
        };
        let snap = node.metrics_snapshot();
        type PodLabel = [(&'static str, String); 2];
        let pod_rows = |f: fn(&super::node::PodFigures) -> u64| -> Vec<(PodLabel, u64)> {
            snap.pods
                .iter()
                .map(|p| ([("namespace", p.namespace.clone()), ("pod", p.pod.clone())], f(p)))
                .collect()
        };
        labelled(
            &mut e,
            "pod_inbound_connections",
            "Live inbound TCP connections per pod (accepted by the pod, ESTABLISHED or CLOSE_WAIT)",
            MetricType::Gauge,
            &pod_rows(|p| p.inbound),
        )?;
        labelled(
            &mut e,
            "pod_outbound_connections",
            "Live outbound TCP connections per pod (connected by the pod)",
            MetricType::Gauge,
            &pod_rows(|p| p.outbound),
        )?;
        let gauges: [(&str, &str, u64); 9] = [
            ("pods", "Pods with cgroups on this node", snap.pod_count as u64),
            (
                "pods_unlabelled",
                "Pods summed into the pod=\"_other\" series (over --metrics-max-pods)",
                snap.unlabelled as u64,
            ),
            ("drains_active", "Drains in progress", snap.drains_active as u64),
            (
                "terminating_watched",
                "Terminating pods whose inbound connections are being watched to zero",
                snap.terminating as u64,
            ),
            (
                "adoption_namespaces",
                "Network namespaces adopted from at start-up",
                snap.adoption.namespaces as u64,
            ),
            (
                "adoption_namespaces_failed",
                "Network namespaces that could not be read at start-up",
                snap.adoption.namespaces_failed as u64,
            ),
            (
                "adoption_sockets_offered",
                "Sockets offered to the adoption iterator at start-up",
                snap.adoption.offered as u64,
            ),
            (
                "adoption_milliseconds",
                "How long start-up adoption took",
                snap.adoption.elapsed_ms,
            ),
            (
                "kube_api_connected",
                "1 while the pod watch is connected to the Kubernetes API (0 when lost or standalone)",
                snap.api_connected as u64,
            ),
        ];
        for (name, help, v) in gauges {
            gauge(&mut e, name, help, v as i64)?;
        }
        let counters: [(&str, &str, u64); 4] = [
            (
                "kernel_events",
                "TCP state changes the kernel programs handled",
                snap.kernel.events,
            ),
            (
                "kernel_untracked",
                "State changes of sockets never seen start (older than the programs and not adopted)",
                snap.kernel.untracked,
            ),
            (
                "adopted_sockets",
                "Sockets adopted from before the programs were attached",
                snap.kernel.adopted,
            ),
            (
                "kernel_caught_state_changes",
                "State changes the kernel skipped for the state program (it was running on that CPU) that its backstops handled: its second copy, the socket's destruction, or a repair pass of the agent",
                snap.kernel.caught,
            ),
        ];
        for (name, help, v) in counters {
            counter(&mut e, name, help, v)?;
        }
        labelled(
            &mut e,
            "kernel_errors",
            "Errors in the kernel programs, by kind",
            MetricType::Counter,
            &[
                (label("kind", "storage_failed"), snap.kernel.storage_failed),
                (label("kind", "counters_full"), snap.kernel.counters_full),
                (label("kind", "underflow"), snap.kernel.underflow),
                (label("kind", "events_lost"), snap.kernel.events_lost),
            ],
        )?;
        labelled(
            &mut e,
            "map_entries",
            "Entries in the pinned maps",
            MetricType::Gauge,
            &[
                (label("map", "counters"), snap.counters_entries),
                (label("map", "watch"), snap.watch_entries),
            ],
        )?;
        // Read at scrape time: a few small files.
        if let Some(b) = crate::memcg::Budget::own() {
            gauge(
                &mut e,
                "memory_cgroup_bytes",
                "Memory charged to the agent's memory cgroup: its own, its maps', and the storage of every TCP socket on the node",
                b.usage as i64,
            )?;
            if let Some(limit) = b.limit {
                gauge(
                    &mut e,
                    "memory_cgroup_limit_bytes",
                    "The agent's memory limit (the tightest of its cgroup's and their parents'); at it, the agent is OOM-killed",
                    limit as i64,
                )?;
            }
            if let Some(n) = b.tcp_sockets {
                gauge(
                    &mut e,
                    "node_tcp_sockets",
                    "TCP sockets allocated on the node, every network namespace: each costs the agent's memory cgroup about 320 bytes",
                    n as i64,
                )?;
            }
        }
        labelled(
            &mut e,
            "map_capacity",
            "Capacity of the pinned maps",
            MetricType::Gauge,
            &[
                (label("map", "counters"), u64::from(MAX_CGROUPS)),
                (label("map", "watch"), u64::from(MAX_WATCH)),
            ],
        )
    }
}
