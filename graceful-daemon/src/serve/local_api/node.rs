//! Everything the running agent knows about its node, in one place the
//! local API reads from: counts (the pinned maps), pods (the resolver's
//! index, named by the API watch), drains (the drain table) and terminations.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, RwLock,
    },
};

pub use graceful_api::views::drains::Drains;
use graceful_api::views::status::{KubeApi, Programs, Status};
use graceful_common::{stat, CgroupCounters};

use crate::{
    drain::{table::Drains as DrainTable, terminations::Terminations},
    kernel::adopt::pass::Report as AdoptReport,
    kernel::bpf::{paths::PinDir, pinned::Pinned, Kernel},
    metrics::{
        AdoptionFigures, KernelFigures, LiveSource, MemoryFigures, MetricsSnapshot, PodFigures, Recorder,
    },
    node::kube::{ApiState, Kube},
    node::resolver::{
        counts::{sort_pods, views, PodState, PodView},
        index::PodIndex,
    },
    serve::gate::listener::Socket,
    sync,
};

pub struct Node {
    pub pins: PinDir,
    pub index: Arc<RwLock<PodIndex>>,
    pub kernel: Kernel,
    pub drains: Arc<DrainTable>,
    pub metrics: Arc<Recorder>,
    pub kube: Option<Kube>,
    /// The terminating pods' reports; `None` standalone.
    pub terminations: Option<Terminations>,
    pub adoption: AdoptReport,
    /// Per-pod metric series at most; the rest are summed into `_other`.
    pub metrics_max_pods: usize,
    /// A descriptor of every pin, for `/healthz`.
    pub pinned: Arc<Pinned>,
    /// The gate's socket; `None` without a gate.
    pub gate: Option<Arc<Socket>>,
    /// How many httpGet gate listeners are open; `None` with the gate off.
    pub http_gates: Option<Arc<AtomicUsize>>,
}

impl Node {
    /// `graceful cgroups -o json`'s rows, read now from the pinned maps.
    pub fn cgroups(&self) -> anyhow::Result<Vec<crate::kernel::counted::Row>> {
        let hier = crate::kernel::cgroupfs::Hierarchy::discover()?;
        crate::kernel::counted::rows(&self.pins, &hier)
    }

    /// `graceful doctor`'s findings from inside the agent.
    pub fn doctor(&self) -> Vec<crate::node::doctor::Finding> {
        let pods = self.pods();
        crate::node::doctor::findings(&self.pins, Some(&pods), false)
    }

    /// Every cgroup's counters, from the map the agent holds open (no
    /// re-open and layout check per request, stream tick or scrape).
    fn counters(&self) -> BTreeMap<u64, CgroupCounters> {
        self.kernel.counters.all()
    }

    /// Every pod with its counts and state, in namespace, name, uid order.
    pub fn pods(&self) -> Vec<PodView> {
        let counters = self.counters();
        self.pods_from(&counters)
    }

    fn pods_from(&self, counters: &BTreeMap<u64, CgroupCounters>) -> Vec<PodView> {
        let mut pods = {
            let index = sync::read(&self.index);
            views(&index, counters)
        };
        let now = k8s_openapi::jiff::Timestamp::now();
        for p in &mut pods {
            p.state = self.state_of(&p.uid);
            let info = self.kube.as_ref().and_then(|k| k.store.get(&p.uid));
            p.since_deletion_s = info
                .as_deref()
                .and_then(|i| i.deletion_requested_at())
                .map(|at| now.duration_since(at).as_secs_f64().max(0.0));
            p.gate_warning = info
                .as_deref()
                .and_then(crate::serve::httpgate::optin::mesh_warning);
        }
        sort_pods(&mut pods);
        pods
    }

    fn state_of(&self, uid: &str) -> PodState {
        if self.drains.draining(uid) {
            return PodState::Draining;
        }
        let deleted = self
            .kube
            .as_ref()
            .and_then(|k| k.store.get(uid))
            .is_some_and(|p| p.deletion_timestamp.is_some());
        if deleted {
            PodState::Terminating
        } else {
            PodState::Running
        }
    }

    pub fn drains(&self) -> Drains {
        let terminations = self.terminations.as_ref();
        Drains {
            active: self.drains.active(),
            released: self.drains.history(),
            terminating: terminations.map(|t| t.all_watching()).unwrap_or_default(),
            terminated: terminations.map(|t| t.recent()).unwrap_or_default(),
        }
    }

    pub fn kube_api(&self) -> KubeApi {
        match self.kube.as_ref().map(|k| k.store.state()) {
            None => KubeApi::Standalone,
            Some(ApiState::Connecting) => KubeApi::Connecting,
            Some(ApiState::Connected) => KubeApi::Connected,
            Some(ApiState::Lost) => KubeApi::Lost,
        }
    }

    /// Ready once the programs are attached (they are before the API
    /// starts) and the resolver has scanned the tree (the watcher does so
    /// before it returns) and the pinned maps read, for as long as the
    /// agent is healthy ([`Node::health`]). The Kubernetes API is
    /// not a condition: counts and drains work without it.
    pub fn status(&self) -> Status {
        let readable = self.kernel.stats().is_ok();
        Status {
            ready: self.health().is_ok(),
            programs: if readable {
                Programs::Attached
            } else {
                Programs::Unreadable
            },
            pods: sync::read(&self.index).pod_count(),
            kube_api: self.kube_api(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

impl Node {
    /// `/healthz`: what keeps the agent from doing its job, if anything.
    /// Pins removed under it are pinned again within seconds (see
    /// `agent::serve`), so a missing pin fails the check only until then,
    /// or for good if it cannot be put back; the kubelet then restarts
    /// the agent, which pins everything anew.
    pub fn health(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        let missing = self.pinned.missing();
        if !missing.is_empty() {
            let shown: Vec<String> = missing.iter().take(3).map(|p| p.display().to_string()).collect();
            problems.push(format!(
                "{} pins are gone ({}{})",
                missing.len(),
                shown.join(", "),
                if missing.len() > 3 { ", ..." } else { "" }
            ));
        }
        if let Err(e) = self.kernel.stats() {
            problems.push(format!("the stats map cannot be read: {e}"));
        }
        if let Some(g) = self.gate.as_ref().filter(|g| !g.listening()) {
            problems.push(format!("the gate is not listening on {}", g.path.display()));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

impl LiveSource for Node {
    fn metrics_snapshot(&self) -> MetricsSnapshot {
        let counters = self.counters();
        let pods = self.pods_from(&counters);
        let pod_count = pods.len();
        let mut figures: Vec<PodFigures> = pods
            .iter()
            .take(self.metrics_max_pods)
            .map(|p| PodFigures {
                namespace: p.namespace.clone().unwrap_or_default(),
                pod: p.name.clone().unwrap_or_else(|| p.uid.clone()),
                inbound: p.live.inbound_live,
                outbound: p.live.outbound_live,
            })
            .collect();
        let rest = &pods[pods.len().min(self.metrics_max_pods)..];
        if !rest.is_empty() {
            figures.push(PodFigures {
                namespace: String::new(),
                pod: "_other".into(),
                inbound: rest.iter().map(|p| p.live.inbound_live).sum(),
                outbound: rest.iter().map(|p| p.live.outbound_live).sum(),
            });
        }
        let kernel = match self.kernel.stats() {
            Ok(s) => KernelFigures {
                events: s[stat::EVENTS as usize],
                untracked: s[stat::UNTRACKED as usize],
                adopted: s[stat::ADOPTED as usize],
                storage_failed: s[stat::STORAGE_FAILED as usize],
                counters_full: s[stat::COUNTERS_FULL as usize],
                underflow: s[stat::UNDERFLOW as usize],
                events_lost: s[stat::EVENTS_LOST as usize],
                caught: s[stat::CAUGHT as usize],
            },
            Err(e) => {
                self.metrics.error("read_stats");
                tracing::warn!(error = %e, "cannot read the stats map");
                KernelFigures::default()
            }
        };
        let watch_entries = sync::lock(&self.kernel.watch).len() as u64;
        let terminations = self.terminations.as_ref();
        MetricsSnapshot {
            unlabelled: rest.len(),
            pods: figures,
            pod_count,
            drains_active: self.drains.active().len(),
            http_gates: self.http_gates.as_ref().map_or(0, |n| n.load(Ordering::Relaxed)),
            http_gates_meshed: self.kube.as_ref().map_or(0, |k| {
                k.store
                    .all()
                    .iter()
                    .filter(|p| crate::serve::httpgate::optin::mesh_warning(p).is_some())
                    .count()
            }),
            terminating: terminations.map(|t| t.all_watching().len()).unwrap_or(0),
            kernel,
            counters_entries: counters.len() as u64,
            watch_entries,
            adoption: AdoptionFigures {
                namespaces: self.adoption.namespaces,
                namespaces_failed: self.adoption.namespaces_failed,
                offered: self.adoption.offered,
                elapsed_ms: self.adoption.elapsed_ms,
            },
            api_connected: self.kube_api() == KubeApi::Connected,
            events_aggregated: self
                .kube
                .as_ref()
                .map_or(0, |k| k.events.tally().aggregated.load(Ordering::Relaxed)),
            events_dropped: self
                .kube
                .as_ref()
                .map_or(0, |k| k.events.tally().dropped.load(Ordering::Relaxed)),
            memory: crate::kernel::memcg::Budget::own().map(|b| MemoryFigures {
                usage: b.usage,
                limit: b.limit,
                tcp_sockets: b.tcp_sockets,
            }),
        }
    }
}
