//! The agent's services: started in named phases, each given what the
//! ones before it made ([`serve`]); then the rounds until a signal, and
//! the stop.

use std::{
    path::Path,
    sync::{atomic::AtomicUsize, Arc},
    time::Duration,
};

use tokio::signal::unix::Signal;
use tracing::{error, info, warn};

use super::{claim::Claim, gate_dir, local_api, memory_check, resume, stop, tasks::Tasks, Settings};
use crate::{
    continuity::handover::{self, held::Registry, retire, take::Inherited},
    continuity::keeper::link::Link,
    drain::{
        drainer::Drainer,
        hook::Hooks,
        pod_kube::PodKube,
        terminations::{Outcome, Terminations},
    },
    kernel::adopt::{pass::Report as AdoptReport, repair::Repairer},
    kernel::bpf::{maps, paths::PinDir, pinned::Pinned, state_programs::StatePrograms, Kernel},
    kernel::cgroupfs::Hierarchy,
    metrics::Recorder,
    node::addrs::NodeAddrs,
    node::kube::{events::EventPoster, Kube},
    node::resolver::watch::{WatchConfig, Watcher},
    serve::gate::{listener::Socket, server},
    serve::httpgate::{gates::Gates, server::Ctx},
    serve::local_api::node::Node,
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
    /// The start's phases so far (see `start`): the services' join them.
    pub phases: super::phases::Phases,
}

/// How long an Event about what this agent could not take waits for the
/// API to be reached.
const UNREAD_WITHIN: Duration = Duration::from_secs(120);

/// Starts every service in named phases, each given what the ones before
/// it made, then serves until SIGTERM or SIGINT, then stops:
///
/// 1. `sources`: the kernel handle, the pod index, the metrics, the
///    Kubernetes API and the terminating pods' reports;
/// 2. `drains`: the drainer, the node's addresses, the shares and the
///    registry of what a handover carries: the one hook lifecycle;
/// 3. `transports`: the gate socket and the pods' own gates, and the hooks
///    the previous agent held, served again;
/// 4. `local API`: its listeners; the agent is ready;
/// 5. `handover`: the giver, listening for a successor.
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
        mut phases,
    } = held;
    let mut tasks = Tasks::default();
    let src = Sources::start(
        &pins,
        ebpf,
        &hier,
        &settings,
        &adoption,
        counting,
        &kernel_release,
        state_programs,
        unread,
    )
    .await?;
    phases.done("sources");
    let drains = Drains::start(&src, &hier, &settings, keeper);
    phases.done("drains");
    let gates = transports(&mut tasks, &src, &drains, &hier, &settings, inherited)?;
    phases.done("transports");
    let node = Node {
        pins: pins.clone(),
        index: src.watcher.resolver().shared(),
        kernel: src.kernel.clone(),
        drains: drains.hooks.drainer.drains.clone(),
        metrics: src.recorder.clone(),
        kube: src.kube,
        terminations: src.terminations,
        adoption,
        metrics_max_pods: settings.metrics_max_pods,
        pinned: pinned.clone(),
        gate: gates.gate,
        http_gates: gates.http_gates,
    };
    let api = local_api::over(node, &src.recorder, &src.watcher, settings.metrics_pods);
    let budgets = local_api::ApiBudgets::new(drains.node_addrs.clone(), &src.watcher, drains.nofile);
    local_api::start(&mut tasks, &settings, api_socket, api, budgets).await?;
    phases.done("local API");
    info!("ready");
    if let Some(dir) = settings.gate_dir.as_ref().filter(|_| settings.handover) {
        let plan = retire::Plan {
            api_socket: api_socket.to_path_buf(),
            probe_addr: settings.probe_addr().to_string(),
            pins: pins.clone(),
        };
        if let Err(e) = handover::give::spawn(drains.registry.clone(), pins.clone(), dir, plan) {
            error!("{e:#}: a successor cannot take over from this agent (its hooks would be held for --stop-hold, then fail open)");
        }
    }
    phases.done("handover");
    phases.report();
    // The claim lives to the end of this function, after the stop, and is
    // the last thing dropped: a successor gets the node only once this
    // agent has stopped.
    let rounds = Rounds {
        pins: &pins,
        claim: &mut claim,
        pinned: &pinned,
        hier: &hier,
        recorder: &src.recorder,
    };
    rounds
        .run(
            &mut tasks,
            &settings,
            &src.repairer,
            repair_now,
            &mut term,
            &mut int,
        )
        .await?;
    stop::stop(
        tasks,
        &drains.hooks,
        src.events.as_ref(),
        &settings,
        api_socket,
        &mut term,
        &mut int,
    )
    .await;
    Ok(())
}

/// What every later service reads from: the kernel handle, the pod index,
/// the metrics, the Kubernetes API and the terminating pods' reports.
struct Sources {
    kernel: Kernel,
    watcher: Watcher,
    recorder: Arc<Recorder>,
    repairer: Repairer,
    kube: Option<Kube>,
    terminations: Option<Terminations>,
    events: Option<EventPoster>,
}

impl Sources {
    #[allow(clippy::too_many_arguments)]
    async fn start(
        pins: &PinDir,
        ebpf: aya::Ebpf,
        hier: &Hierarchy,
        settings: &Settings,
        adoption: &AdoptReport,
        counting: &'static str,
        kernel_release: &str,
        state_programs: StatePrograms,
        unread: Vec<String>,
    ) -> anyhow::Result<Sources> {
        let kernel = Kernel::open(pins)?.with_object(ebpf);
        let watcher = Watcher::spawn(hier, WatchConfig::default())?;
        let recorder = Arc::new(Recorder::new(
            &Outcome::ALL.map(Outcome::as_str),
            settings.metrics_max_workloads,
        ));
        recorder.repair(None, adoption.repaired);
        recorder.build_info(counting, kernel_release);
        let repairer = Repairer::new(kernel.clone(), recorder.clone(), Arc::new(state_programs));
        // Names, deletions and Events from the API; never blocks or fails the start.
        let kube = Kube::start(&settings.kube, watcher.resolver().shared()).await;
        // Every terminating pod's report, gated or not: from the watch's
        // deletions and the kernel's counts.
        let terminations = kube.as_ref().map(|k| {
            Terminations::spawn(
                kernel.clone(),
                watcher.resolver().shared(),
                watcher.resolver().subscribe(),
                k.store.clone(),
                Some(k.events.clone()),
                recorder.clone(),
                settings.kube.report_scope(),
                hier.mount().to_path_buf(),
            )
        });
        let events = kube.as_ref().map(|k| k.events.clone());
        if let (Some(events), Some(me)) = (&events, settings.kube.own_pod()) {
            for why in unread {
                events.post_once_connected(me.clone(), "HandoverFailed", why, true, UNREAD_WITHIN);
            }
        }
        Ok(Sources {
            kernel,
            watcher,
            recorder,
            repairer,
            kube,
            terminations,
            events,
        })
    }
}

/// The one hook lifecycle and what it stands on.
struct Drains {
    hooks: Arc<Hooks>,
    /// What a handover carries, registered as the servers go (and kept by
    /// the keeper, if there is one).
    registry: Arc<Registry>,
    /// The node's own addresses: the httpGet gate's only peers, and what
    /// `ignore-peers: node` leaves out.
    node_addrs: Option<Arc<NodeAddrs>>,
    /// The process's limit on open files, which the gates' and the API's
    /// bounds come from.
    nofile: u64,
    limits: Limits,
}

impl Drains {
    fn start(src: &Sources, hier: &Hierarchy, settings: &Settings, keeper: Option<Arc<Link>>) -> Drains {
        let pod_kube = src.kube.as_ref().map(|k| PodKube {
            store: k.store.clone(),
            events: k.events.clone(),
        });
        let mut drainer = Drainer::new(
            src.kernel.clone(),
            src.watcher.resolver().shared(),
            hier.clone(),
            src.recorder.clone(),
            pod_kube,
            settings.shutdown_budget,
        );
        drainer.repairer = Some(src.repairer.clone());
        // Without the node's addresses the agent goes on, and says what it
        // can't do.
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
        let registry = Registry::kept_by(keeper.map(|k| k as Arc<dyn handover::held::Mirror>));
        let hooks = Hooks::new(drainer, shares, registry.clone());
        Drains {
            hooks,
            registry,
            node_addrs,
            nofile,
            limits,
        }
    }
}

/// The transports, started: what the local API reports of them.
struct Transports {
    gate: Option<Arc<Socket>>,
    http_gates: Option<Arc<AtomicUsize>>,
}

/// The gate socket and the pods' own gates, listening (on the listeners a
/// handover or a keeper brought, when they did), and the hooks the
/// previous agent held, served again.
fn transports(
    tasks: &mut Tasks,
    src: &Sources,
    drains: &Drains,
    hier: &Hierarchy,
    settings: &Settings,
    mut inherited: Option<Inherited>,
) -> anyhow::Result<Transports> {
    let mut gate = None;
    if let Some(dir) = &settings.gate_dir {
        let handed = inherited.as_mut().and_then(|i| i.gate.take());
        let listener = gate_dir::open(dir, settings.wait_bin.clone(), handed)?;
        let path = dir.join(gate_dir::SOCKET);
        if let Err(e) = drains
            .registry
            .gate_listener(&path.display().to_string(), std::os::fd::AsFd::as_fd(&listener))
        {
            warn!(error = %e, "a handover would not carry the gate's listener");
        }
        info!(gate = %path.display(), "drain gate listening");
        info!(
            connections = drains.limits.total,
            per_pod = drains.limits.per_caller,
            "gate limits"
        );
        let socket = Arc::new(Socket::new(dir.join(gate_dir::SOCKET)));
        gate = Some(socket.clone());
        tasks.spawn("gate", server::serve(listener, socket, drains.hooks.clone()));
    }
    let http_gate = src.kube.as_ref().and_then(|k| {
        start_http_gate(
            tasks,
            k,
            drains.node_addrs.clone()?,
            &src.watcher,
            hier,
            &drains.hooks,
            inherited
                .as_mut()
                .map(|i| std::mem::take(&mut i.pod_gates))
                .unwrap_or_default(),
        )
    });
    if let Some(i) = inherited {
        resume::resume(i, &drains.hooks, http_gate.is_some());
    }
    // Everything taken is registered again by now (listeners above, hooks
    // in `resume`): the keeper lets go of the rest.
    drains.registry.settled();
    Ok(Transports {
        gate,
        http_gates: http_gate.map(|g| g.listening),
    })
}

/// The agent's rounds while it serves: the collection of removed cgroups'
/// counters, the pins put back, the repair passes.
struct Rounds<'a> {
    pins: &'a PinDir,
    claim: &'a mut Claim,
    pinned: &'a Pinned,
    hier: &'a Hierarchy,
    recorder: &'a Recorder,
}

impl Rounds<'_> {
    /// Until SIGTERM or SIGINT.
    async fn run(
        self,
        tasks: &mut Tasks,
        settings: &Settings,
        repairer: &Repairer,
        repair_now: bool,
        term: &mut Signal,
        int: &mut Signal,
    ) -> anyhow::Result<()> {
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
            let repairer = repairer.clone();
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
                _ = look.tick(), if repin => keep_pinned(self.pinned, self.claim, self.pins, self.recorder),
                _ = gc.tick() => {
                    memory_check::check(&mut short);
                    let (pins, hier) = (self.pins.clone(), self.hier.clone());
                    match tokio::task::spawn_blocking(move || maps::collect_garbage(&pins, &hier)).await? {
                        Ok(0) => {}
                        Ok(n) => info!(removed = n, "dropped counters of removed cgroups"),
                        Err(e) => warn!(error = %e, "counter garbage collection failed"),
                    }
                }
            }
        }
        Ok(())
    }
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
