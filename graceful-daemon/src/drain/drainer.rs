//! One drain from request to report: its settings resolved (annotations,
//! the request, the grace period), its cgroups looked up, the ingress
//! program attached for the quiet policy, the pod's sockets repaired, the
//! engine run, and the report published. Transports (the gate socket)
//! identify the subject and carry the lines; everything else is here.

use std::{
    sync::{Arc, RwLock},
    time::Duration,
};

use graceful_api::{
    drain::{ActiveDrain, DrainReport},
    Accepted, DrainRequest, Resumed, Scope,
};
use graceful_common::{clock::monotonic_ns, CgroupCounters};
use tracing::{info, info_span, warn, Instrument as _, Span};

use super::{
    engine::{self, Point},
    exclusions::{self, Exclusions},
    exits::all_exited,
    pod_kube::PodKube,
    policy::{Params, Policy},
    publish::{Released, Sinks},
    scope::{after_dirs, cgroups_of, pod_of, Refusal, Subject, Target},
    settings::{self, PodFacts},
    table::Drains,
};
use crate::{
    kernel::adopt::repair::Repairer,
    kernel::bpf::{Kernel, MapError},
    kernel::cgroupfs::Hierarchy,
    metrics::Recorder,
    node::addrs::NodeAddrs,
    node::resolver::index::PodIndex,
};

/// Everything a drain needs, shared by all of them.
pub struct Drainer {
    pub kernel: Kernel,
    pub index: Arc<RwLock<PodIndex>>,
    pub hier: Hierarchy,
    pub metrics: Arc<Recorder>,
    /// Pods' annotations and grace periods, and Events; `None` standalone.
    pub pod_kube: Option<PodKube>,
    /// What the app needs after SIGTERM: the default deadline is the
    /// grace period less this.
    pub budget: Duration,
    /// Sets right, before a drain's first look, the counts of the pod's
    /// sockets whose state change the kernel skipped for both copies of
    /// the state program. `None`: no repair (tests of the drains alone).
    pub repairer: Option<Repairer>,
    pub drains: Arc<Drains>,
    /// The node's own addresses, for `ignore-peers: node`; `None`: unknown,
    /// and the rule leaves nothing out.
    pub node: Option<Arc<NodeAddrs>>,
}

/// A drain ready to run: its settings and cgroups.
pub struct Prepared {
    who: Subject,
    /// The settings in effect, as the hook's first line shows them.
    pub accepted: Accepted,
    container_name: Option<String>,
    target: Target,
    params: Params,
    /// What the hook saw of this drain before an agent restart.
    resumed: Option<Resumed>,
    /// What the drain leaves out, if anything.
    exclusions: Option<Exclusions>,
    /// The drain's span: every line it logs carries its pod, container
    /// and policy.
    span: Span,
}

impl Prepared {
    /// A drain an earlier agent ran (handed over or kept): the report
    /// starts from what it saw (`before`), when it saw anything.
    pub fn carrying_on(mut self, before: Option<Resumed>) -> Prepared {
        if before.is_some() {
            self.resumed = before;
        }
        self
    }
}

impl Drainer {
    pub fn new(
        kernel: Kernel,
        index: Arc<RwLock<PodIndex>>,
        hier: Hierarchy,
        metrics: Arc<Recorder>,
        pod_kube: Option<PodKube>,
        budget: Duration,
    ) -> Drainer {
        Drainer {
            drains: Arc::new(Drains::new(metrics.clone())),
            kernel,
            index,
            hier,
            metrics,
            pod_kube,
            budget,
            repairer: None,
            node: None,
        }
    }

    /// The cgroups of `who`'s pod and their counts summed.
    pub fn pod_counts(&self, who: &Subject) -> Result<(Vec<u64>, CgroupCounters), Refusal> {
        let pod = pod_of(&self.index, &self.hier, &who.pod)?;
        let (cgroups, _) = cgroups_of(&self.hier, &pod, who, Scope::Pod)?;
        let mut sum = CgroupCounters::default();
        for c in &cgroups {
            let k = self.kernel.counters.get(*c);
            sum.inbound_live += k.inbound_live;
            sum.outbound_live += k.outbound_live;
            sum.listeners += k.listeners;
        }
        Ok((cgroups, sum))
    }

    /// Resolves `r`'s settings and cgroups for `who`, whose request
    /// reached the gate at `arrived_ns` (CLOCK_MONOTONIC). Warnings about
    /// the settings are logged and posted as an Event on the pod; they
    /// never refuse a drain.
    pub fn prepare(&self, who: Subject, r: &DrainRequest, arrived_ns: u64) -> Result<Prepared, Refusal> {
        let facts = match &self.pod_kube {
            Some(api) => api.facts(&who.pod, who.container.as_deref()),
            None => PodFacts::default(),
        };
        let mut acc = settings::resolve(r, &facts, self.budget);
        let (start_ns, clamped) = bounded_start(
            r.started_unix_ms,
            Clocks::now(),
            arrived_ns,
            r.resumed.is_some(),
            acc.max_ms,
            facts.deletion_requested_unix_ms,
        );
        acc.warnings.extend(clamped);
        let node = acc
            .ignore_peers
            .contains(&graceful_api::Peer::Node)
            .then(|| self.node.as_ref().map(|n| n.fresh()))
            .flatten();
        let exclusions = exclusions::compile(
            &acc.ignore_ports,
            &acc.ignore_peers,
            node.as_deref(),
            &mut acc.warnings,
        );
        let span =
            info_span!("drain", pod = %who.pod, container = ?who.container, policy = acc.policy.as_str());
        for w in &acc.warnings {
            span.in_scope(|| warn!("drain settings: {w}"));
        }
        if let Some(api) = &self.pod_kube {
            api.misconfigured(&who.pod, facts.container.as_deref(), &acc.warnings);
        }
        // Looked up once: for a pod the watcher has not filed yet, this
        // walks the cgroup tree.
        let pod = pod_of(&self.index, &self.hier, &who.pod)?;
        let (cgroups, dir) = cgroups_of(&self.hier, &pod, &who, acc.scope)?;
        let exit_dirs = after_dirs(&self.hier, &pod, &who, &acc.after_containers)?;
        let uncounted = self.uncounted(&pod);
        if uncounted {
            let why = "the agent's counters map was full after this pod's cgroups were made \
                       (graceful_kernel_errors_total{kind=\"counters_full\"}): some of its connections may not be counted, \
                       so the drain is held to its deadline";
            span.in_scope(|| warn!("{why}"));
            self.metrics.error("drain_uncounted");
            acc.warnings.push(why.into());
            if let Some(api) = &self.pod_kube {
                api.uncounted(&who.pod, facts.container.as_deref(), why);
            }
        }
        let params = Params {
            policy: acc.policy,
            start_ns,
            min: Duration::from_millis(acc.min_ms),
            max: Duration::from_millis(acc.max_ms),
            settle: Duration::from_millis(acc.settle_ms),
            quiet: Duration::from_millis(acc.quiet_ms),
            uncounted,
        };
        span.in_scope(|| info!(scope = ?acc.scope, max_ms = acc.max_ms, max_from = ?acc.sources.get("max_ms"), "drain started"));
        Ok(Prepared {
            who,
            accepted: acc,
            container_name: facts.container,
            target: Target {
                cgroups,
                dir,
                exit_dirs,
            },
            params,
            resumed: r.resumed.clone(),
            exclusions,
            span,
        })
    }

    /// Whether `pod`'s counts may be short: the counters map was seen full
    /// (a connection's cgroup got no entry) after its cgroups were made.
    fn uncounted(&self, pod: &crate::node::resolver::index::Pod) -> bool {
        let Some(full_at) = self.kernel.counters_full_at() else {
            return false;
        };
        // Its oldest cgroup: the pod's own, else its containers'.
        let dirs = pod.path.iter().chain(pod.containers.iter().map(|c| &c.path));
        let made = dirs
            .filter_map(|p| std::fs::metadata(self.hier.dir(p)).ok())
            .filter_map(|m| {
                use std::os::unix::fs::MetadataExt as _;
                u64::try_from(m.ctime()).ok()
            })
            .min();
        let full_s = full_at
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        // A cgroup whose time cannot be read may have missed counts too.
        made.is_none_or(|m| m <= full_s)
    }

    /// Runs a prepared drain to its release, calling `progress` whenever
    /// the inbound count changes. The report comes back for the hook's
    /// last line, then goes to the other sinks ([`Released::publish`]).
    /// Dropped before it returns (the client went away), the drain counts
    /// as abandoned.
    pub async fn run(
        self: Arc<Self>,
        p: Prepared,
        progress: impl FnMut(&Point) + Send,
    ) -> Result<Released, MapError> {
        let span = p.span.clone();
        let result = self.run_in_span(p, progress).instrument(span.clone()).await;
        if let Err(e) = &result {
            self.metrics.error("drain");
            span.in_scope(|| warn!(error = %e, "drain failed"));
        }
        result
    }

    async fn run_in_span(
        &self,
        p: Prepared,
        mut progress: impl FnMut(&Point) + Send,
    ) -> Result<Released, MapError> {
        let Prepared {
            who,
            accepted: acc,
            container_name,
            target,
            params,
            resumed,
            exclusions,
            span,
        } = p;
        // The quiet policy needs inbound payload: watch it only now, and
        // before the drain is listed, so a listed quiet drain sees payload.
        let _payload = match (acc.policy, &target.dir) {
            (Policy::Quiet, Some(dir)) => match self.kernel.watch_payload(dir) {
                None => None,
                Some(Ok(p)) => Some(p),
                Some(Err(e)) => {
                    self.metrics.error("ingress_attach");
                    warn!(error = format!("{e:#}"), dir = %dir.display(), "cannot watch inbound payload: quiet sees new connections only");
                    None
                }
            },
            _ => None,
        };
        let active = self.drains.start(ActiveDrain {
            id: 0,
            pod: who.pod.clone(),
            container: who.container.clone(),
            scope: acc.scope,
            policy: acc.policy,
            max_ms: acc.max_ms,
            start_ns: params.start_ns,
            cgroups: target.cgroups.clone(),
            ignoring: exclusions.as_ref().map(|e| e.rules.clone()).unwrap_or_default(),
            inbound: None,
        });
        // Set before the pass over the pod's sockets, which then leaves
        // out the live ones they match as the programs do new ones.
        let excluded = exclusions.as_ref().and_then(|e| {
            match self.kernel.exclude(&target.cgroups, &e.filter) {
                Ok(x) => {
                    if x.others {
                        warn!("another drain of this pod set other exclusions first: they apply to this drain too");
                    }
                    Some((x, e.rules.as_slice()))
                }
                Err(err) => {
                    self.metrics.error("exclusions");
                    warn!(error = %err, "cannot set the drain's exclusions: it counts every connection");
                    None
                }
            }
        });
        let rules: &[String] = excluded.as_ref().map_or(&[], |(_, r)| r);
        // A connection whose first state change both copies of the state
        // program missed is counted before the first look. This holds the
        // start up for a walk of the pod's sockets (the node's, for a pod
        // on the host network: about 250 ms at 200,000 sockets).
        if let (Some(repairer), Some(ns)) = (&self.repairer, who.netns) {
            repairer.pod(ns, &who.pod).await;
        }
        let kernel = self.kernel.clone();
        let exit_dirs = target.exit_dirs;
        let exited = (!exit_dirs.is_empty()).then_some(async move {
            if let Err(e) = all_exited(Some(&kernel), exit_dirs).await {
                warn!(error = %e, "cannot watch the containers to outlive; waiting for the deadline");
                std::future::pending::<()>().await;
            }
        });
        let report = engine::resume(
            &self.kernel,
            &target.cgroups,
            params,
            rules,
            resumed.as_ref(),
            exited,
            |p: &Point| {
                active.looked(p.inbound);
                progress(p)
            },
        )
        .await?;
        let full = DrainReport {
            pod: who.pod,
            container: who.container,
            scope: acc.scope,
            report,
        };
        let sinks = Sinks {
            pod_kube: self.pod_kube.clone(),
            metrics: self.metrics.clone(),
            container_name,
            max_ms: acc.max_ms,
            active,
            span,
        };
        Ok(Released::new(full, sinks))
    }
}

/// How much earlier than its request's arrival a new drain may say it
/// started: the hook takes its start before it connects, and may wait
/// for the socket (`--connect-timeout`, 2 s by default) while an agent
/// starts.
pub const START_ALLOWANCE_MS: u64 = 2000;

/// The two clocks at one instant.
#[derive(Clone, Copy, Debug)]
pub struct Clocks {
    pub unix_ms: u64,
    pub monotonic_ns: u64,
}

impl Clocks {
    fn now() -> Clocks {
        Clocks {
            unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            monotonic_ns: monotonic_ns(),
        }
    }
}

/// The drain's start on the kernel's clock: the client's (wall clock,
/// converted), but never earlier than its request's arrival less
/// [`START_ALLOWANCE_MS`], or, for a drain resumed after an agent
/// restart, less its deadline (a drain older than that would have been
/// released) and not before the pod's deletion was requested, when the
/// API has told it (`deleted_unix_ms`): the kubelet runs no hook before,
/// and the new agent has no record of the first attempt to go by. The
/// client's clock is its own to set: a start of 0 would
/// release at once as a 58-minute "deadline" in every report and metric.
/// A start that had to be moved comes with a warning for the accepted
/// settings.
pub fn bounded_start(
    started_unix_ms: u64,
    now: Clocks,
    arrived_ns: u64,
    resumed: bool,
    max_ms: u64,
    deleted_unix_ms: Option<u64>,
) -> (u64, Option<String>) {
    // A start in the future (clock skew) counts as now.
    let on_kernel_clock = |unix_ms: u64| {
        let ago_ms = now.unix_ms.saturating_sub(unix_ms);
        now.monotonic_ns.saturating_sub(ago_ms.saturating_mul(1_000_000))
    };
    let asked = on_kernel_clock(started_unix_ms);
    let allowance_ms = if resumed { max_ms } else { START_ALLOWANCE_MS };
    let earliest = arrived_ns.saturating_sub(allowance_ms.saturating_mul(1_000_000));
    if resumed {
        if let Some(deleted) = deleted_unix_ms.map(on_kernel_clock).filter(|d| *d > earliest) {
            if asked < deleted {
                let warning = format!(
                    "started_unix_ms {started_unix_ms} is {} before the pod's deletion was requested, when no hook had begun: \
                     the resumed drain counts from the deletion instead",
                    secs(deleted.saturating_sub(asked) / 1_000_000),
                );
                return (deleted, Some(warning));
            }
        }
    }
    if asked >= earliest {
        return (asked, None);
    }
    let before_ms = arrived_ns.saturating_sub(asked) / 1_000_000;
    let what = if resumed {
        "a resumed drain's deadline"
    } else {
        "the allowance for a new drain"
    };
    let warning = format!(
        "started_unix_ms {started_unix_ms} is {} before the request reached the gate, past {what} ({}): \
         the drain counts from {} before its request instead",
        secs(before_ms),
        secs(allowance_ms),
        secs(allowance_ms),
    );
    (earliest, Some(warning))
}

fn secs(ms: u64) -> String {
    crate::duration::format(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests;
