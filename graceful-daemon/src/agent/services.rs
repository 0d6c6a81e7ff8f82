//! The agent's wiring: the kernel handle, the resolver, the Kubernetes
//! watch, the drains and their transports, the local API; then the run
//! until a signal, and the stop.

use std::{
    path::Path,
    sync::{atomic::AtomicUsize, Arc},
    time::Duration,
};

use tokio::sync::broadcast::{self, error::RecvError};
use tracing::{error, info, warn};

use super::{claim::Claim, gate_dir, memory_check, tasks::Tasks, Settings, STOP_LIMIT};
use crate::{
    continuity::handover::{self, held::Registry, retire, take::Inherited, wire::Record},
    drain::{
        drainer::Drainer,
        hook::{record, Hooks},
        pod_kube::PodKube,
        terminations::{Outcome, TerminationReport, Terminations},
    },
    kernel::adopt::{pass::Report as AdoptReport, repair::Repairer},
    kernel::bpf::{maps, paths::PinDir, pinned::Pinned, state_programs::StatePrograms, Kernel},
    kernel::cgroupfs::Hierarchy,
    metrics::Recorder,
    node::addrs::NodeAddrs,
    node::resolver::watch::{WatchConfig, Watcher},
    serve::gate::{exec_resume, listener::Socket, server},
    serve::httpgate::{gates::Gates, http_resume, server::Ctx},
    serve::local_api::{
        self,
        node::Node,
        routes::{Api, Scope},
        server::{Budget, ProbeBudget},
    },
    share::{Limits, Shares},
};

/// What the agent holds for as long as it runs: its pin directory, the
/// claim that makes it the node's only agent, and a descriptor of every pin.
pub struct Held {
    pub pins: PinDir,
    pub claim: Claim,
    pub pinned: Arc<Pinned>,
    /// Under the sock_ops design, the state programs, until no socket
    /// carries their storage.
    pub state_programs: StatePrograms,
    /// Run a repair pass over the node as soon as serving (the adoption
    /// pass was deferred: see `agent::run`).
    pub repair_now: bool,
    /// The keeper this agent runs under, if any (see `keeper`).
    pub keeper: Option<Arc<crate::continuity::keeper::link::Link>>,
    /// What this agent could not take from the one before it (a handover,
    /// its keeper), as logged: said again on its own pod once the API is
    /// reached.
    pub unread: Vec<String>,
    /// How this agent counts (`sock-ops`, `tracepoint`) and the kernel's
    /// release: `graceful_build_info`.
    pub counting: &'static str,
    pub kernel_release: String,
}

/// How long an Event about what this agent could not take waits for the
/// API to be reached.
const UNREAD_WITHIN: Duration = Duration::from_secs(120);

#[expect(
    clippy::too_many_lines,
    reason = "the wiring of every service the agent runs, started in order, each given what the ones before it made: named phases that register their start and stop are the way to split it"
)]
pub async fn serve(
    held: Held,
    hier: Hierarchy,
    ebpf: aya::Ebpf,
    adoption: AdoptReport,
    api_socket: &Path,
    settings: Settings,
    inherited: Option<Inherited>,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    // Before anything else, and long before "ready": a SIGTERM that came
    // in between would meet the default action, or nothing at all where
    // the parent left it ignored (seen under a VM's init).
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let Held {
        pins,
        mut claim,
        pinned,
        state_programs,
        repair_now,
        keeper,
        unread,
        counting,
        kernel_release,
    } = held;
    let mut tasks = Tasks::default();
    let kernel = Kernel::open(&pins)?.with_object(ebpf);
    let watcher = Watcher::spawn(&hier, WatchConfig::default())?;
    let recorder = Arc::new(Recorder::new(&Outcome::ALL.map(Outcome::as_str)));
    recorder.repair(None, adoption.repaired);
    recorder.build_info(counting, &kernel_release);
    let repairer = Repairer::new(kernel.clone(), recorder.clone(), Arc::new(state_programs));
    // Names, deletions and Events from the API; never blocks or fails the start.
    let kube = crate::node::kube::Kube::start(&settings.kube, watcher.resolver().shared()).await;
    // Every terminating pod's report, gated or not: from the watch's
    // deletions and the kernel's counts.
    let terminations = kube.as_ref().map(|k| {
        Terminations::spawn(
            kernel.clone(),
            watcher.resolver().shared(),
            watcher.resolver().subscribe(),
            k.store.clone(),
            Some(k.events.clone()),
            hier.mount().to_path_buf(),
        )
    });
    if let Some(t) = &terminations {
        tasks.spawn(
            "termination metrics",
            count_terminations(t.subscribe(), recorder.clone()),
        );
    }
    let events = kube.as_ref().map(|k| k.events.clone());
    if let (Some(events), Some(me)) = (&events, settings.kube.own_pod()) {
        for why in unread {
            events.post_once_connected(me.clone(), "HandoverFailed", why, true, UNREAD_WITHIN);
        }
    }
    let pod_kube = kube.as_ref().map(|k| PodKube {
        store: k.store.clone(),
        events: k.events.clone(),
    });
    let mut drainer = Drainer::new(
        kernel.clone(),
        watcher.resolver().shared(),
        hier.clone(),
        recorder.clone(),
        pod_kube,
        settings.shutdown_budget,
    );
    drainer.repairer = Some(repairer.clone());
    // The node's own addresses: the httpGet gate's only peers, and what
    // `ignore-peers: node` leaves out. Without them the agent goes on, and
    // says what it can't do.
    let node_addrs = match NodeAddrs::open(&settings.node_netns) {
        Ok(n) => Some(Arc::new(n)),
        Err(e) => {
            error!("{e}: the httpGet gate is off (pods' httpGet hooks fail open), and ignore-peers: node leaves nothing out");
            None
        }
    };
    drainer.node = node_addrs.clone();
    let drainer = Arc::new(drainer);
    let nofile = crate::kernel::nofile::raise();
    // One share of descriptors for both gates: a pod's hooks are counted
    // together whichever way they come.
    let limits = Limits::for_nofile(nofile);
    let shares = Shares::new(limits);
    // What a handover carries, registered as the servers go (and kept by
    // the keeper, if there is one).
    let registry = Registry::kept_by(keeper.map(|k| k as Arc<dyn handover::held::Mirror>));
    let hooks = Hooks::new(drainer.clone(), shares.clone(), registry.clone());
    let mut inherited = inherited;
    let mut gate = None;
    if let Some(dir) = &settings.gate_dir {
        let handed = inherited.as_mut().and_then(|i| i.gate.take());
        let listener = gate_dir::open(dir, settings.wait_bin.clone(), handed)?;
        let path = dir.join(gate_dir::SOCKET);
        if let Err(e) =
            registry.gate_listener(&path.display().to_string(), std::os::fd::AsFd::as_fd(&listener))
        {
            warn!(error = %e, "a handover would not carry the gate's listener");
        }
        info!(gate = %path.display(), "drain gate listening");
        info!(
            connections = limits.total,
            per_pod = limits.per_caller,
            "gate limits"
        );
        let socket = Arc::new(Socket::new(dir.join(gate_dir::SOCKET)));
        gate = Some(socket.clone());
        tasks.spawn("gate", server::serve(listener, socket, hooks.clone()));
    }
    let http_gate = kube.as_ref().and_then(|k| {
        start_http_gate(
            &mut tasks,
            k,
            node_addrs.clone()?,
            &watcher,
            &hier,
            &hooks,
            inherited
                .as_mut()
                .map(|i| std::mem::take(&mut i.pod_gates))
                .unwrap_or_default(),
        )
    });
    if let Some(i) = inherited {
        resume(i, &hooks, http_gate.is_some());
    }
    // Everything taken is registered again by now (listeners above, hooks
    // in `resume`): the keeper lets go of the rest.
    registry.settled();
    let http_gates = http_gate.as_ref().map(|g| g.listening.clone());
    let node = Arc::new(Node {
        pins: pins.clone(),
        index: watcher.resolver().shared(),
        kernel,
        drains: drainer.drains.clone(),
        metrics: recorder.clone(),
        kube,
        terminations,
        adoption,
        metrics_max_pods: settings.metrics_max_pods,
        pinned: pinned.clone(),
        gate,
        http_gates,
    });
    let api = Arc::new(Api {
        registry: recorder.registry(Arc::<Node>::downgrade(&node), true),
        public_registry: recorder.registry(Arc::<Node>::downgrade(&node), settings.metrics_pods),
        node,
        resolver: watcher.resolver().clone(),
    });
    let budgets = ApiBudgets {
        local: Budget::One(Shares::new(Limits::api_for_nofile(nofile))),
        metrics: metrics_budget(node_addrs.clone(), &watcher, nofile),
    };
    start_api(&mut tasks, &settings, api_socket, api, budgets).await?;
    info!("ready");
    if let Some(dir) = settings.gate_dir.as_ref().filter(|_| settings.handover) {
        let plan = retire::Plan {
            api_socket: api_socket.to_path_buf(),
            probe_addr: settings.probe_addr().to_string(),
            pins: pins.clone(),
        };
        if let Err(e) = handover::give::spawn(registry.clone(), pins.clone(), dir, plan) {
            error!("{e:#}: a successor cannot take over from this agent (its hooks would be held for --stop-hold, then fail open)");
        }
    }
    let mut short = None;
    memory_check::check(&mut short);
    let mut gc = tokio::time::interval(settings.gc_interval);
    gc.tick().await;
    // `0s`: never (tokio's interval can't be zero).
    let repin = !settings.repin_interval.is_zero();
    let mut look = tokio::time::interval(settings.repin_interval.max(Duration::from_millis(1)));
    // A task of its own: a pass over a large node takes a while, and
    // nothing here should wait for it. `0s` turns it off (tokio's interval
    // can't be zero).
    if repair_now {
        let r = repairer.clone();
        tokio::spawn(async move { r.all().await });
    }
    if !settings.repair_interval.is_zero() {
        let mut every = tokio::time::interval(settings.repair_interval);
        every.tick().await;
        tasks.spawn("repair", async move {
            loop {
                every.tick().await;
                repairer.all().await;
            }
        });
    }
    loop {
        tokio::select! {
            _ = term.recv() => { info!("SIGTERM"); break }
            _ = int.recv() => { info!("SIGINT"); break }
            (name, how) = tasks.ended() => Tasks::report(name, how),
            _ = look.tick(), if repin => keep_pinned(&pinned, &mut claim, &pins, &recorder),
            _ = gc.tick() => {
                memory_check::check(&mut short);
                let (pins, hier) = (pins.clone(), hier.clone());
                match tokio::task::spawn_blocking(move || maps::collect_garbage(&pins, &hier)).await? {
                    Ok(0) => {}
                    Ok(n) => info!(removed = n, "dropped counters of removed cgroups"),
                    Err(e) => warn!(error = %e, "counter garbage collection failed"),
                }
            }
        }
    }
    retire::STOPPING.store(true, std::sync::atomic::Ordering::Release);
    hold_http_drains(&hooks, settings.stop_hold, &mut term, &mut int).await;
    // The Events of the drains released last (a stopping agent's last
    // act for their pods).
    if let Some(events) = &events {
        let left = events.flush(Duration::from_secs(2)).await;
        if left > 0 {
            warn!(
                events = left,
                "stopping with Events still being posted; they are lost"
            );
        }
    }
    let left = tasks.shutdown(STOP_LIMIT).await;
    if !left.is_empty() {
        warn!(tasks = ?left, limit_s = STOP_LIMIT.as_secs(), "agent tasks still ran past the stop limit");
    }
    // The API's socket goes with it; the gate's stays for pods that
    // mount its directory (the next agent binds it again).
    let _ = std::fs::remove_file(api_socket);
    Ok(())
}

/// The httpGet gate once started: its open listeners' count.
struct HttpGate {
    listening: Arc<AtomicUsize>,
}

/// Starts the httpGet gate's listeners (pods opt in through the API's
/// annotations, so only with the API). Without the node's namespace the
/// gate cannot tell the kubelet from anyone: one line, and the agent goes
/// on with the exec gate alone. Once on: the count of its open listeners,
/// and what its drains share.
#[allow(clippy::too_many_arguments)]
fn start_http_gate(
    tasks: &mut Tasks,
    kube: &crate::node::kube::Kube,
    node: Arc<NodeAddrs>,
    watcher: &Watcher,
    hier: &Hierarchy,
    hooks: &Arc<Hooks>,
    inherited: Vec<handover::take::PodListener>,
) -> Option<HttpGate> {
    info!(node_addresses = ?node.current(), "pods' own gates on: pods opt in with graceful.dev/gate: http (httpGet) or socket");
    let ctx = Arc::new(Ctx {
        hooks: hooks.clone(),
        node,
        pods: kube.store.clone(),
        events: kube.events.clone(),
    });
    let gates = Gates::new(
        kube.store.clone(),
        watcher.resolver().shared(),
        hier.clone(),
        kube.events.clone(),
        ctx.clone(),
    );
    let listening = gates.listening();
    gates.inherit(inherited);
    tasks.spawn(
        "http gate",
        gates.run(kube.store.subscribe(), watcher.resolver().subscribe()),
    );
    Some(HttpGate { listening })
}

/// Serves every hook the previous agent held, each from its own start.
fn resume(inherited: Inherited, hooks: &Arc<Hooks>, http_gate: bool) {
    let paused_ms = (graceful_common::clock::monotonic_ns().saturating_sub(inherited.paused_ns)) as f64 / 1e6;
    info!(
        exec_hooks = inherited.exec_hooks.len(),
        http_hooks = inherited.http_hooks.len(),
        since_pause_ms = paused_ms,
        "handover: serving the hooks the previous agent held"
    );
    // Each registered before this returns (a keeper keeps it from then
    // on), served by a task of its own.
    for u in inherited.unreadable {
        answer_unreadable(hooks, u);
    }
    let read = |r: Record| record::hook_of(r).expect("a held hook's record");
    for (h, fd) in inherited.exec_hooks {
        let pod = h.pod.clone();
        if let Some(h) = hooks.resume_on(&pod, read(Record::ExecHook(h)), fd, exec_resume::open) {
            tokio::spawn(exec_resume::exec(h));
        }
    }
    for (h, fd) in inherited.http_hooks {
        if !http_gate {
            warn!(pod = %h.pod, "handover: an httpGet hook came, and this agent has no httpGet gate (no Kubernetes API): it fails open");
            continue;
        }
        let pod = h.pod.clone();
        if let Some(h) = hooks.resume_on(&pod, read(Record::HttpHook(h)), fd, http_resume::open) {
            tokio::spawn(http_resume::http(h));
        }
    }
}

/// A held hook whose record could not be read: answered at once, so that
/// it fails open (its SIGTERM comes now, without the rest of its drain)
/// rather than hang or be cut; said in the log and on the pod.
fn answer_unreadable(hooks: &Hooks, u: handover::take::Unreadable) {
    let why = format!(
        "the previous agent's record of this hook cannot be read ({})",
        u.why
    );
    warn!(pod = ?u.pod, "handover: {why}; answered now, so the hook fails open");
    hooks.drainer.metrics.error("handover_unreadable");
    if let (Some(api), Some(uid)) = (&hooks.drainer.pod_kube, &u.pod) {
        if let Some(p) = api.store.get(uid) {
            api.events.post_later(
                p.pod_ref(),
                "HandoverUnreadable",
                format!("{why}: its preStop hook was answered at once"),
                true,
            );
        }
    }
    let exec =
        rustix::net::sockopt::socket_domain(&u.conn).is_ok_and(|d| d == rustix::net::AddressFamily::UNIX);
    tokio::spawn(async move {
        if exec {
            exec_resume::fail_open(u.conn, &why).await
        } else {
            http_resume::fail_open(u.conn, &why).await
        }
    });
}

/// A stopping agent serves on (every task still runs) while httpGet
/// drains are in progress, for at most `limit`: their hooks' connections
/// would be cut, and the kubelet does not retry a hook. A second signal
/// stops it at once.
async fn hold_http_drains(
    hooks: &Hooks,
    limit: Duration,
    term: &mut tokio::signal::unix::Signal,
    int: &mut tokio::signal::unix::Signal,
) {
    let running = || hooks.held_for_good();
    if running() == 0 || limit.is_zero() {
        return;
    }
    info!(
        drains = running(),
        limit_s = limit.as_secs_f64(),
        "finishing the httpGet drains in progress before stopping: their hooks cannot reconnect"
    );
    let deadline = tokio::time::Instant::now() + limit;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    while running() > 0 {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::time::sleep_until(deadline) => {
                warn!(drains = running(), limit_s = limit.as_secs_f64(), "httpGet drains still ran at --stop-hold: their hooks fail open now");
                return;
            }
            _ = term.recv(), if running() > 0 => { warn!(drains = running(), "second SIGTERM: stopping now"); return }
            _ = int.recv(), if running() > 0 => { warn!(drains = running(), "SIGINT: stopping now"); return }
        }
    }
    info!("the httpGet drains in progress are finished");
}

/// Pins again what was removed from under the agent (nothing was lost:
/// it holds every map and link), and says so; takes its lock again on a
/// pin directory made anew.
fn keep_pinned(pinned: &Pinned, claim: &mut Claim, pins: &PinDir, recorder: &Recorder) {
    let r = pinned.restore();
    if !r.repinned.is_empty() {
        recorder.error("pins_removed");
        warn!(repinned = r.repinned.len(), dir = %pins.root().display(), "pins were removed under the agent: pinned them again, no count lost");
    }
    for f in &r.failed {
        error!("{f}: /healthz fails until they are back");
    }
    if r.made_root {
        if let Err(e) = claim.relock_pins(pins) {
            error!("{e}");
        }
    }
}

/// Where the API's listeners count their connections.
struct ApiBudgets {
    /// The loopback address and the unix socket.
    local: Budget,
    /// The metrics address.
    metrics: Budget,
}

/// The metrics address's budget: the kubelet's probes apart, when the
/// node's sockets can be told apart (its namespace opened); else one
/// public table, by peer.
fn metrics_budget(node: Option<Arc<NodeAddrs>>, watcher: &Watcher, nofile: u64) -> Budget {
    let public = Shares::new(ProbeBudget::PUBLIC.within(Limits::api_for_nofile(nofile)));
    let Some(node) = node else {
        warn!("the node's sockets cannot be looked up: the probes share the metrics address's budget with every peer");
        return Budget::One(public);
    };
    let index = watcher.resolver().shared();
    Budget::Probes(Arc::new(ProbeBudget {
        node,
        owner: Box::new(move |id| crate::sync::read(&index).owner(id)),
        reserved: Shares::new(ProbeBudget::RESERVED),
        public,
    }))
}

/// Binds the local API's listeners. An address that cannot be bound
/// stops the start, naming it: the probes and Prometheus ask that
/// address, and an agent that ran on without it would fail them with
/// nothing in its log a platform engineer would look for (the port taken
/// by another process, an address not on this node); a crash loop with
/// this one line says it. A socket that cannot be bound is one error line
/// and the agent goes on: only the CLI asks it, and falls back to the pins.
async fn start_api(
    tasks: &mut Tasks,
    settings: &Settings,
    socket: &Path,
    api: Arc<Api>,
    budgets: ApiBudgets,
) -> anyhow::Result<()> {
    for (addr, flag, scope, budget) in [
        (&settings.api_addr, "--api-addr", Scope::Full, &budgets.local),
        (
            &settings.metrics_addr,
            "--metrics-addr",
            Scope::Metrics,
            &budgets.metrics,
        ),
    ] {
        if addr == "off" {
            continue;
        }
        let listener = tokio::net::TcpListener::bind(addr.as_str()).await.map_err(|e| {
            anyhow::anyhow!("cannot serve the local API on {addr}: {e} (set {flag}, or `off`)")
        })?;
        let bound = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        match scope {
            Scope::Full => info!(addr = %bound, "local API listening"),
            Scope::Metrics => info!(addr = %bound, "metrics and probes listening"),
        }
        tasks.spawn(
            "api tcp",
            local_api::server::serve(listener, api.clone(), scope, budget.clone()),
        );
    }
    match local_api::server::bind_unix(socket) {
        Ok(listener) => {
            info!(socket = %socket.display(), "local API listening");
            tasks.spawn(
                "api socket",
                local_api::server::serve(listener, api, Scope::Full, budgets.local),
            );
        }
        Err(e) => error!("{e:#}; going on without the API socket (the CLI reads the pins instead)"),
    }
    Ok(())
}

/// Counts each terminating pod's report in the metrics.
async fn count_terminations(mut rx: broadcast::Receiver<TerminationReport>, recorder: Arc<Recorder>) {
    loop {
        match rx.recv().await {
            Ok(r) => recorder.termination(r.outcome.as_str()),
            Err(RecvError::Lagged(n)) => {
                warn!(
                    missed = n,
                    "termination reports came faster than they were counted"
                );
                recorder.error("metrics_lagged");
            }
            Err(RecvError::Closed) => return,
        }
    }
}
