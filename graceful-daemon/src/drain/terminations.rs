//! The report every terminating pod gets, gated or not: how long after its
//! deletion its inbound connections reached zero.
//!
//! When the watch shows a pod with a deletionTimestamp, its cgroups go into
//! the kernel's watch set and the count at that moment is kept. From then
//! on each inbound change of those cgroups is an event from the kernel (no
//! polling). The pod is reported, once, at the first of:
//! - its inbound count reaches zero while its containers still run:
//!   **drained** (`InboundDrained`, Normal);
//! - its inbound count drops because the container holding the connections
//!   exited (its processes are gone or exiting, so the kernel is closing
//!   them): **exited** (`ExitedBeforeDrain`, Warning), with how many were
//!   still open;
//! - its containers' cgroups are removed with connections still counted,
//!   also **exited**;
//! - the pod object is deleted with connections still open (a forced
//!   deletion): **deleted** (`DeletedBeforeDrain`, Warning).
//!
//! Each report is a structured log line and an Event on the pod.
//!
//! "Since deletion" is measured from the moment the agent saw the
//! deletionTimestamp, which is within milliseconds of the request. When
//! the API says deletion was requested well before that (the agent was
//! restarted, or the API was away), the API's time is used instead and the
//! report says `observed_late`.

use std::{
    collections::{BTreeSet, HashMap, HashSet, VecDeque},
    path::PathBuf,
    sync::{Arc, Mutex, RwLock},
};

use graceful_common::clock::monotonic_ns;
use graceful_common::watch as watch_flags;
use k8s_openapi::jiff::Timestamp;
use tokio::{
    sync::broadcast::{self, error::RecvError},
    task::JoinHandle,
};
use tracing::{debug, info, warn};

use crate::{
    kernel::bpf::Kernel,
    metrics::Recorder,
    node::kube::{report_scope::ReportScope, EventPoster, PodEvent, PodInfo, PodStore},
    node::resolver::index::{Change, PodIndex},
    sync,
};

/// How many reports [`Terminations::recent`] keeps.
const RECENT: usize = 256;
/// A deletion seen this much after the API's request time was seen late.
const LATE_NS: u64 = 2_000_000_000;

mod procs;

/// The reports and the watched pods, as every client reads them.
pub use graceful_api::termination::{Outcome, TerminationReport, Watched};
pub use procs::has_live_process;

#[derive(Default)]
struct Shared {
    watching: HashMap<String, Watched>,
    recent: VecDeque<TerminationReport>,
}

/// The running reporter. Dropping it stops it.
pub struct Terminations {
    shared: Arc<Mutex<Shared>>,
    reports: broadcast::Sender<TerminationReport>,
    task: JoinHandle<()>,
}

impl Terminations {
    /// Starts reporting on the pods of `store` that get a deletionTimestamp
    /// and that `scope` covers, counting each report in `recorder`.
    /// `changes` are the resolver's (a container removed, a pod gone);
    /// `mount` is the cgroup2 mount (to tell whether a container still runs).
    /// Must be called inside a tokio runtime.
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        kernel: Kernel,
        index: Arc<RwLock<PodIndex>>,
        changes: broadcast::Receiver<Change>,
        store: Arc<PodStore>,
        events: Option<EventPoster>,
        recorder: Arc<Recorder>,
        scope: ReportScope,
        mount: PathBuf,
    ) -> Terminations {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let reports = broadcast::channel(64).0;
        // Subscribed here, before anything can happen.
        let kev = kernel.events.subscribe();
        let pods = store.subscribe();
        let actor = Actor {
            kernel,
            index,
            store,
            events,
            recorder,
            scope,
            mount,
            shared: shared.clone(),
            reports: reports.clone(),
            tracked: HashMap::new(),
            by_cgroup: HashMap::new(),
            done: HashSet::new(),
        };
        let task = tokio::spawn(actor.run(pods, kev, changes));
        Terminations {
            shared,
            reports,
            task,
        }
    }

    /// Reports from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<TerminationReport> {
        self.reports.subscribe()
    }

    /// The last reports, oldest first.
    pub fn recent(&self) -> Vec<TerminationReport> {
        self.lock().recent.iter().cloned().collect()
    }

    /// The pod `uid`, if it is terminating and not reported yet.
    pub fn watching(&self, uid: &str) -> Option<Watched> {
        self.lock().watching.get(uid).cloned()
    }

    pub fn all_watching(&self) -> Vec<Watched> {
        self.lock().watching.values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        sync::lock(&self.shared)
    }
}

impl Drop for Terminations {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Tracked {
    info: Arc<PodInfo>,
    deletion_ns: u64,
    requested_at: Option<Timestamp>,
    observed_late: bool,
    inbound_at_deletion: u64,
    /// Every cgroup of the pod seen since its deletion, each in the watch
    /// set once; per cgroup, its inbound count at the last look.
    cgroups: HashMap<u64, u64>,
    /// Per cgroup, the container it belongs to (name, else short id);
    /// `None` for the pod's own cgroup.
    owners: HashMap<u64, Option<String>>,
}

impl Tracked {
    fn total(&self) -> u64 {
        self.cgroups.values().sum()
    }
}

struct Actor {
    kernel: Kernel,
    index: Arc<RwLock<PodIndex>>,
    store: Arc<PodStore>,
    events: Option<EventPoster>,
    recorder: Arc<Recorder>,
    /// The pods reported besides those that opted in.
    scope: ReportScope,
    mount: PathBuf,
    shared: Arc<Mutex<Shared>>,
    reports: broadcast::Sender<TerminationReport>,
    tracked: HashMap<String, Tracked>,
    by_cgroup: HashMap<u64, String>,
    /// Reported (or not reportable) pods, until the API deletes them.
    done: HashSet<String>,
}

impl Actor {
    async fn run(
        mut self,
        pods: broadcast::Receiver<PodEvent>,
        kev: broadcast::Receiver<graceful_common::Event>,
        changes: broadcast::Receiver<Change>,
    ) {
        let (mut pods, mut kev, mut changes) = (Some(pods), Some(kev), Some(changes));
        self.rescan();
        loop {
            tokio::select! {
                ev = recv(&mut pods) => match ev {
                    Ok(PodEvent::Applied(info)) => self.applied(info),
                    Ok(PodEvent::Deleted(info)) => self.deleted(&info),
                    Err(RecvError::Lagged(_)) => self.rescan(),
                    Err(RecvError::Closed) => pods = None,
                },
                ev = recv(&mut kev) => match ev {
                    Ok(ev) => {
                        if let Some(uid) = self.by_cgroup.get(&ev.cgroup_id).cloned() {
                            self.check(&uid);
                        }
                    }
                    Err(RecvError::Lagged(_)) => self.check_all(),
                    Err(RecvError::Closed) => {
                        warn!("the kernel event ring reader stopped: terminating pods are reported when their containers go");
                        kev = None;
                    }
                },
                ch = recv(&mut changes) => match ch {
                    Ok(Change::ContainerAdded { uid, .. } | Change::ContainerRemoved { uid, .. } | Change::PodRemoved { uid } | Change::PodAdded { uid }) => {
                        if self.tracked.contains_key(&uid) {
                            self.refresh(&uid);
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        let uids: Vec<String> = self.tracked.keys().cloned().collect();
                        for uid in uids {
                            self.refresh(&uid);
                        }
                    }
                    Err(RecvError::Closed) => changes = None,
                },
            }
        }
    }

    /// Starts tracking every terminating pod of the store not seen yet.
    fn rescan(&mut self) {
        for info in self.store.all() {
            self.applied(info);
        }
    }

    fn applied(&mut self, info: Arc<PodInfo>) {
        if let Some(t) = self.tracked.get_mut(&info.uid) {
            t.info = info;
            return;
        }
        if info.terminating() && !self.done.contains(&info.uid) {
            if self.scope.covers(&info) {
                self.start(info);
            } else {
                debug!(pod = %info.key(), "terminating pod carries nothing of graceful's and is outside the report scope: no report");
                self.recorder.unreported();
                self.done.insert(info.uid.clone());
            }
        }
    }

    fn deleted(&mut self, info: &PodInfo) {
        if self.tracked.contains_key(&info.uid) {
            let open = self.observe(&info.uid);
            self.report(&info.uid, Outcome::Deleted, open, None);
        }
        self.done.remove(&info.uid);
    }

    fn start(&mut self, info: Arc<PodInfo>) {
        let uid = info.uid.clone();
        let cgroups = self.pod_cgroups(&uid);
        if info.finished() || cgroups.is_empty() {
            debug!(pod = %info.key(), "terminating pod runs nothing on this node: no report");
            self.done.insert(uid);
            return;
        }
        let now_ns = monotonic_ns();
        let now = Timestamp::now();
        let requested_at = info.deletion_requested_at();
        // How long before now the API says deletion was requested.
        let ago_ns = requested_at
            .map(|r| now.duration_since(r).as_nanos().clamp(0, u64::MAX as i128) as u64)
            .unwrap_or(0);
        let observed_late = ago_ns > LATE_NS;
        let deletion_ns = if observed_late {
            now_ns.saturating_sub(ago_ns)
        } else {
            now_ns
        };
        let mut t = Tracked {
            info: info.clone(),
            deletion_ns,
            requested_at,
            observed_late,
            inbound_at_deletion: 0,
            cgroups: HashMap::new(),
            owners: HashMap::new(),
        };
        self.watch_cgroups(&uid, &mut t, &cgroups);
        t.inbound_at_deletion = t.total();
        info!(
            pod = %info.key(),
            uid = %uid,
            inbound = t.inbound_at_deletion,
            grace_period_seconds = info.deletion_grace_period_seconds,
            observed_late,
            "pod terminating: watching its inbound connections"
        );
        self.publish_watching(&uid, &t);
        self.tracked.insert(uid.clone(), t);
        self.check(&uid);
    }

    /// The pod's cgroups in the tree now.
    fn pod_cgroups(&self, uid: &str) -> BTreeSet<u64> {
        let index = sync::read(&self.index);
        index.pod(uid).map(|p| p.cgroups.clone()).unwrap_or_default()
    }

    /// Puts the new ones of `cgroups` in the watch set and reads their counts.
    fn watch_cgroups(&mut self, uid: &str, t: &mut Tracked, cgroups: &BTreeSet<u64>) {
        let index = sync::read(&self.index);
        let pod = index.pod(uid);
        let mut w = sync::lock(&self.kernel.watch);
        for &cg in cgroups {
            if t.cgroups.contains_key(&cg) {
                continue;
            }
            let owner = pod
                .and_then(|p| p.containers.iter().find(|c| c.cgroups.contains(&cg)))
                .map(|c| c.name.clone().unwrap_or_else(|| short(&c.id)));
            t.owners.insert(cg, owner);
            if let Err(e) = w.add(cg, watch_flags::CONNECTIONS) {
                warn!(cgroup = cg, error = %e, "cannot watch a terminating pod's cgroup: its report may come late");
            }
            self.by_cgroup.insert(cg, uid.to_string());
            t.cgroups.insert(cg, self.kernel.counters.get(cg).inbound_live);
        }
    }

    /// Re-reads the pod's counts; returns the total.
    fn observe(&mut self, uid: &str) -> u64 {
        let Some(t) = self.tracked.get_mut(uid) else {
            return 0;
        };
        for (cg, n) in t.cgroups.iter_mut() {
            *n = self.kernel.counters.get(*cg).inbound_live;
        }
        t.total()
    }

    fn check_all(&mut self) {
        let uids: Vec<String> = self.tracked.keys().cloned().collect();
        for uid in uids {
            self.check(&uid);
        }
    }

    /// After an inbound change of the pod: report it if done.
    fn check(&mut self, uid: &str) {
        let Some(t) = self.tracked.get(uid) else {
            return;
        };
        let before: HashMap<u64, u64> = t.cgroups.clone();
        let open_before = t.total();
        let total = self.observe(uid);
        // Connections closed because their container is exiting or gone?
        let dropped: Vec<u64> = {
            let t = &self.tracked[uid];
            t.cgroups
                .iter()
                .filter(|(cg, n)| before.get(cg).is_some_and(|b| **n < *b))
                .map(|(cg, _)| *cg)
                .collect()
        };
        for cg in dropped {
            if let Some(container) = self.exited_container(uid, cg) {
                self.report(uid, Outcome::Exited, open_before, Some(container));
                return;
            }
        }
        if total == 0 {
            self.report(uid, Outcome::Drained, 0, None);
            return;
        }
        if let Some(t) = self.tracked.get(uid) {
            self.publish_watching(uid, t);
        }
    }

    /// The pod's cgroups changed in the tree: watch new ones; if its
    /// containers are all gone with connections counted, report it.
    fn refresh(&mut self, uid: &str) {
        let cgroups = self.pod_cgroups(uid);
        if let Some(mut t) = self.tracked.remove(uid) {
            self.watch_cgroups(uid, &mut t, &cgroups);
            self.tracked.insert(uid.to_string(), t);
        }
        let running = {
            let index = sync::read(&self.index);
            index.pod(uid).is_some_and(|p| !p.containers.is_empty())
        };
        let open = self.observe(uid);
        if !running && open > 0 {
            self.report(uid, Outcome::Exited, open, Some("(all)".into()));
        } else {
            self.check(uid);
        }
    }

    /// The name (or id) of the container owning cgroup `cg` if it has no
    /// live process: gone from the tree, or all its processes exiting.
    /// For the pod's own cgroup, `(all)` if no container has one.
    fn exited_container(&self, uid: &str, cg: u64) -> Option<String> {
        let index = sync::read(&self.index);
        let pod = index.pod(uid);
        let live = |path: &str| has_live_process(&self.mount.join(path.trim_start_matches('/')));
        if let Some(c) = pod.and_then(|p| p.containers.iter().find(|c| c.cgroups.contains(&cg))) {
            return (!live(&c.path)).then(|| c.name.clone().unwrap_or_else(|| short(&c.id)));
        }
        match self.tracked.get(uid)?.owners.get(&cg)? {
            // A container's cgroup no longer in the tree: it exited.
            Some(name) => Some(name.clone()),
            None => {
                let all_gone = pod.is_none_or(|p| p.containers.iter().all(|c| !live(&c.path)));
                all_gone.then(|| "(all)".into())
            }
        }
    }

    fn publish_watching(&self, uid: &str, t: &Tracked) {
        let w = Watched {
            uid: uid.to_string(),
            inbound_at_deletion: t.inbound_at_deletion,
            inbound_now: t.total(),
            deletion_ns: t.deletion_ns,
            deletion_requested_at: t.requested_at.map(|r| r.to_string()),
        };
        sync::lock(&self.shared).watching.insert(uid.to_string(), w);
    }

    fn report(&mut self, uid: &str, outcome: Outcome, open: u64, container: Option<String>) {
        let Some(t) = self.tracked.remove(uid) else {
            return;
        };
        let report_ns = monotonic_ns();
        {
            let mut w = sync::lock(&self.kernel.watch);
            for cg in t.cgroups.keys() {
                w.remove(*cg);
                self.by_cgroup.remove(cg);
            }
        }
        let last_close = t
            .cgroups
            .keys()
            .map(|cg| self.kernel.counters.get(*cg).last_inbound_close_ns)
            .max()
            .unwrap_or(0);
        let mut cgroups: Vec<u64> = t.cgroups.keys().copied().collect();
        cgroups.sort_unstable();
        let r = TerminationReport {
            uid: uid.to_string(),
            namespace: t.info.namespace.clone(),
            name: t.info.name.clone(),
            outcome,
            seconds_since_deletion: report_ns.saturating_sub(t.deletion_ns) as f64 / 1e9,
            inbound_at_deletion: t.inbound_at_deletion,
            inbound_open: open,
            container,
            deletion_requested_at: t.requested_at.map(|r| r.to_string()),
            grace_period_seconds: t.info.deletion_grace_period_seconds,
            observed_late: t.observed_late,
            report_ns,
            last_inbound_close_ns: last_close,
            cgroups,
            workload: Some(t.info.workload.clone()),
            opted_in: Some(t.info.opted_in),
        };
        self.done.insert(uid.to_string());
        self.recorder
            .termination(outcome.as_str(), &r.namespace, &t.info.workload);
        info!(
            report = "terminating",
            pod = %t.info.key(),
            uid,
            outcome = r.outcome.as_str(),
            seconds_since_deletion = r.seconds_since_deletion,
            inbound_at_deletion = r.inbound_at_deletion,
            inbound_open = r.inbound_open,
            container = r.container.as_deref(),
            observed_late = r.observed_late,
            report_ns = r.report_ns,
            last_inbound_close_ns = r.last_inbound_close_ns,
            "terminating pod: {}",
            r.message()
        );
        {
            let mut s = sync::lock(&self.shared);
            s.watching.remove(uid);
            if s.recent.len() == RECENT {
                s.recent.pop_front();
            }
            s.recent.push_back(r.clone());
        }
        if let Some(poster) = self.events.clone() {
            let (reason, message, warning) =
                (outcome.event_reason(), r.message(), outcome != Outcome::Drained);
            poster.post_later_with(t.info.pod_ref(), reason, message, warning, r.event_notes());
        }
        let _ = self.reports.send(r);
    }
}

/// Waits on an optional receiver; a missing one never yields.
pub(crate) async fn recv<T: Clone>(rx: &mut Option<broadcast::Receiver<T>>) -> Result<T, RecvError> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

fn short(id: &str) -> String {
    id.chars().take(12).collect()
}
