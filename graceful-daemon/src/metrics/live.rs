//! What is, read at scrape time so a scrape never sees a stale copy:
//! connections per pod, kernel counters, map sizes, adoption, the agent's
//! memory. The figures come as plain values from a [`LiveSource`].

use std::sync::Weak;

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{counter::ConstCounter, gauge::ConstGauge, MetricType},
};

use graceful_common::{MAX_CGROUPS, MAX_WATCH};

use super::label::label;

/// One pod's series (or the `_other` sum).
pub struct PodFigures {
    pub namespace: String,
    pub pod: String,
    pub inbound: u64,
    pub outbound: u64,
}

/// The kernel programs' own counters.
#[derive(Default)]
pub struct KernelFigures {
    pub events: u64,
    pub untracked: u64,
    pub adopted: u64,
    pub storage_failed: u64,
    pub counters_full: u64,
    pub underflow: u64,
    pub events_lost: u64,
    pub caught: u64,
}

/// What the start-up adoption did.
#[derive(Clone, Debug, Default)]
pub struct AdoptionFigures {
    pub namespaces: usize,
    pub namespaces_failed: usize,
    pub offered: usize,
    pub elapsed_ms: u64,
}

/// The agent's memory cgroup, read at scrape time (a few small files).
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryFigures {
    pub usage: u64,
    pub limit: Option<u64>,
    pub tcp_sockets: Option<u64>,
}

/// Every figure a scrape reads, at once.
pub struct MetricsSnapshot {
    pub pods: Vec<PodFigures>,
    pub pod_count: usize,
    pub unlabelled: usize,
    pub drains_active: usize,
    /// httpGet gate listeners open in pods' network namespaces.
    pub http_gates: usize,
    /// Pods opted in to the httpGet gate whose mesh's classic sidecar
    /// relays the hook and would cut it.
    pub http_gates_meshed: usize,
    pub terminating: usize,
    pub kernel: KernelFigures,
    pub counters_entries: u64,
    pub watch_entries: u64,
    pub adoption: AdoptionFigures,
    pub api_connected: bool,
    /// Events the agent did not post: repeats counted on one already
    /// posted, and those past their pod's budget.
    pub events_aggregated: u64,
    pub events_dropped: u64,
    /// None when the agent's memory cgroup cannot be read.
    pub memory: Option<MemoryFigures>,
}

/// Where the figures come from: the agent's view of its node, which
/// gathers them from the pinned maps, the index, the gate and the API
/// watch, and hands them over as plain values.
pub trait LiveSource: Send + Sync {
    /// Every figure, read now.
    fn metrics_snapshot(&self) -> MetricsSnapshot;
}

/// Figures read at scrape time.
#[derive(Debug)]
pub(super) struct Live {
    pub(super) node: Weak<dyn LiveSource>,
    /// Whether the per-pod series are encoded.
    pub(super) pods: bool,
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
    #[expect(
        clippy::too_many_lines,
        reason = "one metric family after another, in the order `/metrics` lists them"
    )]
    fn encode(&self, mut e: DescriptorEncoder) -> std::fmt::Result {
        let Some(node) = self.node.upgrade() else {
            return Ok(());
        };
        let snap = node.metrics_snapshot();
        type PodLabel = [(&'static str, String); 2];
        let pod_rows = |f: fn(&PodFigures) -> u64| -> Vec<(PodLabel, u64)> {
            snap.pods
                .iter()
                .filter(|_| self.pods)
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
        let gauges: [(&str, &str, u64); 10] = [
            ("pods", "Pods with cgroups on this node", snap.pod_count as u64),
            (
                "pods_unlabelled",
                "Pods summed into the pod=\"_other\" series (over --metrics-max-pods)",
                snap.unlabelled as u64,
            ),
            ("drains_active", "Drains in progress", snap.drains_active as u64),
            (
                "http_gates",
                "Pods' own gates open in their network namespaces: httpGet listeners and socket gates",
                snap.http_gates as u64,
            ),
            (
                "http_gates_meshed",
                "Pods whose mesh sidecar relays their httpGet gate's hook and would cut it (see graceful pods)",
                snap.http_gates_meshed as u64,
            ),
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
                "kube_api_connected",
                "1 while the pod watch is connected to the Kubernetes API (0 when lost or standalone)",
                snap.api_connected as u64,
            ),
        ];
        for (name, help, v) in gauges {
            gauge(&mut e, name, help, v as i64)?;
        }
        // Base units, as Prometheus names them: seconds.
        let g = ConstGauge::new(snap.adoption.elapsed_ms as f64 / 1000.0);
        g.encode(e.encode_descriptor(
            "adoption_duration_seconds",
            "How long start-up adoption took",
            None,
            g.metric_type(),
        )?)?;
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
            "events_not_posted",
            "Events on pods the agent did not post as one each: repeats counted on one already posted (aggregated), and those over their pod's budget (dropped)",
            MetricType::Counter,
            &[
                (label("why", "aggregated"), snap.events_aggregated),
                (label("why", "dropped"), snap.events_dropped),
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
        if let Some(b) = snap.memory {
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
                    "TCP sockets allocated on the node, every network namespace: under the tracepoint design each costs the agent's memory cgroup about 320 bytes",
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
