//! The gate socket's HTTP server: one task per connection, each request
//! answered as the caller it comes from. Bad requests get a 4xx and one
//! line of JSON; nothing a client sends can stop others' drains.

use std::{
    collections::{BTreeMap, VecDeque},
    path::PathBuf,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, RwLock,
    },
    time::Duration,
};

use bytes::Bytes;
use graceful_common::clock::monotonic_ns;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use tokio::{net::UnixListener, sync::broadcast};
use tracing::{info, warn};

use super::{
    api::{ActiveDrain, DrainReport, DrainRequest, ErrorBody, GateEvent, Line, Scope, SelfView, MAX_BODY},
    identity::{identify, Caller},
    pod_api::PodApi,
    settings::{self, PodFacts},
};
use crate::{
    adopt::{netns::NetNs, repair::Repairer},
    bpf::Kernel,
    cgroupfs::Hierarchy,
    drain::{
        engine,
        exits::all_exited,
        policy::{Params, Policy},
    },
    http_conn,
    metrics::Recorder,
    reply::{error, json, line_bytes, ndjson, Body},
    resolver::index::{Pod, PodIndex},
    sync,
};

/// How long a client may take to send its body (its head:
/// [`http_conn::HEAD_TIMEOUT`], answered with a 408 too).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Reports kept for `graceful drains`.
const HISTORY: usize = 1000;

/// Everything the gate needs, shared by all connections.
pub struct Gate {
    pub kernel: Kernel,
    pub index: Arc<RwLock<PodIndex>>,
    pub hier: Hierarchy,
    pub metrics: Arc<Recorder>,
    /// Pods' annotations and grace periods, and Events; `None` standalone.
    pub pod_api: Option<PodApi>,
    /// What the app needs after SIGTERM: the default deadline is the
    /// grace period less this.
    pub budget: Duration,
    /// Sets right, before a drain's first look, the counts of the pod's
    /// sockets whose state change the kernel skipped for both copies of
    /// the state program. `None`: no repair (tests of the gate alone).
    pub repairer: Option<Repairer>,
    history: Mutex<VecDeque<DrainReport>>,
    active: Mutex<BTreeMap<u64, ActiveDrain>>,
    next_id: AtomicU64,
    events: broadcast::Sender<GateEvent>,
}

impl Gate {
    pub fn new(
        kernel: Kernel,
        index: Arc<RwLock<PodIndex>>,
        hier: Hierarchy,
        metrics: Arc<Recorder>,
        pod_api: Option<PodApi>,
        budget: Duration,
    ) -> Gate {
        Gate {
            kernel,
            index,
            hier,
            metrics,
            pod_api,
            budget,
            repairer: None,
            history: Default::default(),
            active: Default::default(),
            next_id: AtomicU64::new(1),
            events: broadcast::channel(256).0,
        }
    }

    /// Drains in progress, oldest first.
    pub fn active(&self) -> Vec<ActiveDrain> {
        sync::lock(&self.active).values().cloned().collect()
    }

    /// Whether a drain of pod `uid` is in progress.
    pub fn draining(&self, uid: &str) -> bool {
        sync::lock(&self.active).values().any(|d| d.pod == uid)
    }

    /// The last released drains, oldest first.
    pub fn history(&self) -> Vec<DrainReport> {
        sync::lock(&self.history).iter().cloned().collect()
    }

    /// Drain starts, releases and abandons from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<GateEvent> {
        self.events.subscribe()
    }

    fn started(&self, mut d: ActiveDrain) -> ActiveGuard<'_> {
        d.id = self.next_id.fetch_add(1, Ordering::Relaxed);
        sync::lock(&self.active).insert(d.id, d.clone());
        let _ = self.events.send(GateEvent::DrainStarted(d.clone()));
        ActiveGuard {
            gate: self,
            drain: Some(d),
        }
    }
}

/// A drain in the active table; dropped without [`released`](Self::released)
/// (the client went away, or the engine failed) it counts as abandoned.
struct ActiveGuard<'a> {
    gate: &'a Gate,
    drain: Option<ActiveDrain>,
}

impl ActiveGuard<'_> {
    fn released(mut self, report: DrainReport) {
        if let Some(d) = self.drain.take() {
            sync::lock(&self.gate.active).remove(&d.id);
        }
        self.gate
            .metrics
            .drain_released(report.report.reason, report.report.waited_ms);
        {
            let mut h = sync::lock(&self.gate.history);
            if h.len() == HISTORY {
                h.pop_front();
            }
            h.push_back(report.clone());
        }
        let _ = self.gate.events.send(GateEvent::DrainReleased(Box::new(report)));
    }
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        if let Some(d) = self.drain.take() {
            sync::lock(&self.gate.active).remove(&d.id);
            self.gate.metrics.drain_abandoned();
            let _ = self.gate.events.send(GateEvent::DrainAbandoned(d));
        }
    }
}

/// Serves the gate on `listener` until the task is dropped.
pub async fn serve(listener: UnixListener, gate: Arc<Gate>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "gate accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let pid = stream.peer_cred().ok().and_then(|c| c.pid());
        let gate = gate.clone();
        tokio::spawn(http_conn::serve(stream, "gate", move |req| {
            handle(gate.clone(), pid, req)
        }));
    }
}

async fn handle(gate: Arc<Gate>, pid: Option<i32>, req: Request<hyper::body::Incoming>) -> Response<Body> {
    let caller = match identify(pid) {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "gate: refused a caller");
            return error(StatusCode::FORBIDDEN, e.to_string());
        }
    };
    match (req.method(), req.uri().path()) {
        (&Method::POST, "/v1/drain") => drain(gate, caller, req).await,
        (&Method::GET, "/v1/self") => self_view(&gate, &caller),
        (_, "/v1/drain" | "/v1/self") => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "use POST /v1/drain or GET /v1/self",
        ),
        (_, path) => error(
            StatusCode::NOT_FOUND,
            format!("no such endpoint {path}: the gate has POST /v1/drain and GET /v1/self"),
        ),
    }
}

/// The caller's pod, from the watcher's index, or from a fresh walk for a
/// container started a moment ago that the watcher has not filed yet.
fn pod_of(gate: &Gate, caller: &Caller) -> Result<Pod, String> {
    if let Some(p) = sync::read(&gate.index).pod(&caller.pod) {
        return Ok(p.clone());
    }
    PodIndex::build(&gate.hier)
        .pod(&caller.pod)
        .cloned()
        .ok_or_else(|| format!("pod {} has no cgroups on this node", caller.pod))
}

/// The cgroups a drain of `scope` by `caller` counts, and the directory of
/// the scope's top cgroup (where the ingress program goes).
fn scope_of(
    gate: &Gate,
    pod: &Pod,
    caller: &Caller,
    scope: Scope,
) -> Result<(Vec<u64>, Option<PathBuf>), String> {
    match scope {
        Scope::Pod => Ok((
            pod.cgroups.iter().copied().collect(),
            pod.path.as_deref().map(|p| gate.hier.dir(p)),
        )),
        Scope::Container => {
            let id = caller.container.as_deref().ok_or(
                "--scope container: the caller runs in the pod's own cgroup, not a container's".to_string(),
            )?;
            let c = pod
                .container(id)
                .ok_or_else(|| format!("container {id} is not in pod {}", caller.pod))?;
            Ok((c.cgroups.iter().copied().collect(), Some(gate.hier.dir(&c.path))))
        }
    }
}

fn self_view(gate: &Gate, caller: &Caller) -> Response<Body> {
    let scope = pod_of(gate, caller).and_then(|pod| scope_of(gate, &pod, caller, Scope::Pod));
    let cgroups = match scope {
        Ok((c, _)) => c,
        Err(e) => return error(StatusCode::NOT_FOUND, e),
    };
    let mut v = SelfView {
        pod: caller.pod.clone(),
        container: caller.container.clone(),
        pod_cgroups: cgroups.clone(),
        inbound_live: 0,
        outbound_live: 0,
        listeners: 0,
    };
    for c in cgroups {
        let k = gate.kernel.counters.get(c);
        v.inbound_live += k.inbound_live;
        v.outbound_live += k.outbound_live;
        v.listeners += k.listeners;
    }
    json(StatusCode::OK, &v)
}

async fn read_body(req: Request<hyper::body::Incoming>) -> Result<Bytes, Response<Body>> {
    let limited = Limited::new(req.into_body(), MAX_BODY);
    match tokio::time::timeout(READ_TIMEOUT, limited.collect()).await {
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            "request body not received in time",
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body over {MAX_BODY} bytes"),
        )),
        Ok(Err(e)) => Err(error(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body: {e}"),
        )),
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

/// Converts the client's start (wall clock) to the kernel's clock.
fn start_ns(started_unix_ms: u64) -> u64 {
    let now_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let now = monotonic_ns();
    // A start in the future (clock skew) counts as now.
    let ago_ms = now_unix_ms.saturating_sub(started_unix_ms);
    now.saturating_sub(ago_ms.saturating_mul(1_000_000))
}

async fn drain(gate: Arc<Gate>, caller: Caller, req: Request<hyper::body::Incoming>) -> Response<Body> {
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let r = match DrainRequest::parse(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let facts = match &gate.pod_api {
        Some(api) => api.facts(&caller.pod, caller.container.as_deref()),
        None => PodFacts::default(),
    };
    let acc = settings::resolve(&r, &facts, gate.budget);
    for w in &acc.warnings {
        warn!(pod = %caller.pod, container = ?caller.container, "drain settings: {w}");
    }
    if let Some(api) = &gate.pod_api {
        api.misconfigured(&caller.pod, facts.container.as_deref(), &acc.warnings);
    }
    // Looked up once: for a pod the watcher has not filed yet, this walks
    // the cgroup tree.
    let pod = match pod_of(&gate, &caller) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::NOT_FOUND, e),
    };
    let (cgroups, scope_dir) = match scope_of(&gate, &pod, &caller, acc.scope) {
        Ok(c) => c,
        Err(e) => return error(StatusCode::NOT_FOUND, e),
    };
    let exit_dirs = match after_dirs(&gate, &pod, &caller, &acc.after_containers) {
        Ok(d) => d,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let params = Params {
        policy: acc.policy,
        start_ns: start_ns(r.started_unix_ms),
        min: Duration::from_millis(acc.min_ms),
        max: Duration::from_millis(acc.max_ms),
        settle: Duration::from_millis(acc.settle_ms),
        quiet: Duration::from_millis(acc.quiet_ms),
    };
    info!(pod = %caller.pod, container = ?caller.container, policy = acc.policy.as_str(), scope = ?acc.scope, max_ms = acc.max_ms, max_from = ?acc.sources.get("max_ms"), "drain started");
    // The hook runs in the pod's network namespace, and waits for the
    // answer: its namespace is the pod's, open now.
    let pod_netns = NetNs::open(format!("/proc/{}/ns/net", caller.pid)).ok();

    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let _ = tx.try_send(line_bytes(&Line::Accepted(Box::new(acc.clone()))));
    tokio::spawn(async move {
        // The quiet policy needs inbound payload: watch it only now, and
        // before the drain is listed, so a listed quiet drain sees payload.
        let _payload = match (acc.policy, &scope_dir) {
            (Policy::Quiet, Some(dir)) => match gate.kernel.watch_payload(dir) {
                None => None,
                Some(Ok(p)) => Some(p),
                Some(Err(e)) => {
                    gate.metrics.error("ingress_attach");
                    warn!(error = format!("{e:#}"), dir = %dir.display(), "cannot watch inbound payload: quiet sees new connections only");
                    None
                }
            },
            _ => None,
        };
        let active = gate.started(ActiveDrain {
            id: 0,
            pod: caller.pod.clone(),
            container: caller.container.clone(),
            scope: acc.scope,
            policy: acc.policy,
            max_ms: acc.max_ms,
            start_ns: params.start_ns,
            cgroups: cgroups.clone(),
        });
        // A connection whose first state change both copies of the state
        // program missed is counted before the first look. This holds the
        // start up for a walk of the pod's sockets (the node's, for a pod
        // on the host network: about 250 ms at 200,000 sockets).
        if let (Some(repairer), Some(ns)) = (&gate.repairer, pod_netns) {
            repairer.pod(ns, &caller.pod).await;
        }
        let progress_tx = tx.clone();
        let kernel = gate.kernel.clone();
        let exited = (!exit_dirs.is_empty()).then_some(async move {
            if let Err(e) = all_exited(Some(&kernel), exit_dirs).await {
                warn!(error = %e, "cannot watch the containers to outlive; waiting for the deadline");
                std::future::pending::<()>().await;
            }
        });
        let run = engine::run(&gate.kernel, &cgroups, params, exited, move |p| {
            let line = Line::Progress {
                ms: p.ms,
                inbound: p.inbound,
            };
            let _ = progress_tx.try_send(line_bytes(&line));
        });
        let result = tokio::select! {
            r = run => r,
            _ = tx.closed() => {
                info!(pod = %caller.pod, "drain abandoned: the client went away");
                return;
            }
        };
        match result {
            Ok(report) => {
                let full = DrainReport {
                    pod: caller.pod.clone(),
                    container: caller.container.clone(),
                    scope: acc.scope,
                    report,
                };
                if let Some(api) = &gate.pod_api {
                    api.released(&full, facts.container.as_deref());
                }
                info!(
                    pod = %full.pod,
                    container = ?full.container,
                    reason = full.report.reason.as_str(),
                    waited_ms = full.report.waited_ms,
                    inbound_at_start = full.report.inbound_at_start,
                    peak_inbound = full.report.peak_inbound,
                    new_connections = full.report.new_connections,
                    "drain released"
                );
                let _ = tx.send(line_bytes(&Line::Report(Box::new(full.clone())))).await;
                active.released(full);
            }
            Err(e) => {
                gate.metrics.error("drain");
                warn!(error = %e, "drain failed");
                let _ = tx.send(line_bytes(&ErrorBody { error: e.to_string() })).await;
            }
        }
    });
    ndjson(rx)
}

/// The cgroup directories of the containers named in `--after-containers`:
/// by name (once the Kubernetes API has told them) or by id (a prefix of
/// at least 12 characters, as `crictl ps` shows them).
fn after_dirs(gate: &Gate, pod: &Pod, caller: &Caller, wanted: &[String]) -> Result<Vec<PathBuf>, String> {
    let mut dirs = Vec::new();
    for w in wanted {
        let found = pod.containers.iter().find(|c| {
            c.name.as_deref() == Some(w.as_str()) || (w.len() >= 12 && c.id.starts_with(w.as_str()))
        });
        match found {
            Some(c) => dirs.push(gate.hier.dir(&c.path)),
            None => {
                return Err(format!(
                    "--after-containers: no container {w:?} in pod {} (give a container name, or an id of 12+ characters)",
                    caller.pod
                ))
            }
        }
    }
    Ok(dirs)
}
