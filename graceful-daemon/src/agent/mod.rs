//! The node agent: what `graceful daemon` runs. It attaches the programs,
//! adopts the sockets that predate it, then starts and owns the tasks
//! that serve the node (the resolver, the Kubernetes watch, the drains,
//! the gate, the local API, the repair and collection rounds) until
//! SIGTERM, when it stops them all within a bound.
//!
//! - [`serve`]: the wiring, and the run until a signal;
//! - [`tasks`]: the named tasks it owns;
//! - [`claim`]: the locks that make it the node's only agent;
//! - [`gate_dir`]: the host directory pods' hooks use;
//! - [`budget`]: its memory budget, which grows with the node's sockets.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use tracing::{error, info, warn};

use crate::{
    continuity::handover::{self, take},
    kernel::adopt::{self, pass::adopt_all},
    kernel::bpf::{
        loader::{self, AttachOptions, Counting},
        paths::PinDir,
        pinned::Pinned,
        state_programs::StatePrograms,
    },
    kernel::cgroupfs::Hierarchy,
    kernel::version,
    node::kube::KubeArgs,
};
use takeover::claim_or_take;

mod takeover;

pub mod claim;
pub mod gate_dir;
pub mod memory_check;
pub mod services;
pub mod tasks;

/// How long the agent waits, once told to stop, for its tasks and then for
/// work on blocking threads (a repair pass, a collection round) to end.
pub const STOP_LIMIT: Duration = Duration::from_secs(5);

/// What the agent runs with (from `graceful daemon`'s flags).
#[derive(Clone, Debug)]
pub struct Settings {
    pub replace_incompatible_pins: bool,
    pub counting: Counting,
    pub gc_interval: Duration,
    /// `0s`: no periodic repair pass.
    pub repair_interval: Duration,
    /// `0s`: pins removed under the agent are not put back.
    pub repin_interval: Duration,
    /// How long a SIGTERM'd agent serves on while httpGet drains run.
    pub stop_hold: Duration,
    /// Take over from a running agent, and hand over to a successor.
    pub handover: bool,
    pub gate_dir: Option<PathBuf>,
    /// Where the node's addresses are read, for the httpGet gate's peers.
    pub node_netns: PathBuf,
    pub shutdown_budget: Duration,
    pub wait_bin: Option<PathBuf>,
    /// `off`: no TCP listener.
    pub api_addr: String,
    /// `off`: none. Serves /metrics, /healthz and /readyz only.
    pub metrics_addr: String,
    /// The per-pod series on the metrics address too.
    pub metrics_pods: bool,
    pub metrics_max_pods: usize,
    pub kube: KubeArgs,
}

impl Settings {
    /// The address the kubelet's probes ask: the metrics address where
    /// there is one, else the API's.
    pub fn probe_addr(&self) -> &str {
        if self.metrics_addr != "off" {
            &self.metrics_addr
        } else {
            &self.api_addr
        }
    }
}

/// Runs the agent until SIGTERM or SIGINT.
#[expect(
    clippy::too_many_lines,
    reason = "the agent's start, step by step before the runtime exists: named phases are the way to split it"
)]
pub fn run(pins: &PinDir, api_socket: &Path, settings: Settings) -> anyhow::Result<i32> {
    let release = version::check_floor().map_err(anyhow::Error::msg)?;
    // Before any thread: every thread made after reads cgroup paths from the
    // top of the hierarchy, where the pod roots are.
    if let Err(e) = crate::kernel::cgroupfs::enter_nodes_namespace() {
        warn!(error = %e, "cannot enter the node's cgroup namespace (pid 1's; the agent needs hostPID): callers of the gate seen as /../.. paths are not taken for pods, and their hooks fail open");
    }
    let hier = Hierarchy::discover()?;
    // Before anything is attached or bound: a second agent changes nothing.
    loader::prepare_pin_dir(pins)?;
    // This pod handed the node over, and its container was restarted.
    let pins_held = matches!(claim::pins_held(pins), Ok(Some(_)));
    if settings.handover && handover::retire::handed_over(api_socket, pins_held) {
        return handover::retire::run(api_socket, settings.probe_addr(), false);
    }
    let gate_socket = settings.gate_dir.as_ref().map(|d| d.join(gate_dir::SOCKET));
    // Under a keeper (see `keeper`): what it kept of an agent that crashed.
    let keeper = crate::continuity::keeper::link::Link::from_env()?.map(Arc::new);
    // What could not be taken from the agent before: logged here, and
    // said on this agent's own pod once the API is reached.
    let mut unread = Vec::new();
    let kept = keeper.as_ref().and_then(|k| match k.take() {
        Ok(kept) => kept,
        Err(e) => {
            let why =
                format!("keeper: cannot take what it kept: {e}; starting with nothing (its hooks are cut)");
            error!("{why}");
            unread.push(why);
            None
        }
    });
    if let Some(k) = &kept {
        info!(
            keeper = k.giver,
            listeners = k.listeners(),
            hooks = k.hooks(),
            "keeper: the previous agent died; taking the listeners and held hooks it kept"
        );
    }
    // The kept gate listener answers connections itself (they queue in
    // it): no need to ask who serves the gate's socket.
    let claim_gate = gate_socket
        .as_deref()
        .filter(|_| kept.as_ref().is_none_or(|k| k.gate.is_none()));
    let opts = AttachOptions {
        replace_incompatible: settings.replace_incompatible_pins,
        counting: settings.counting,
        cgroup_root: hier.mount().to_path_buf(),
    };
    // A successor of this very build loads (and, reusing every pinned
    // link, attaches) before it asks for the node: the gates pause less.
    let taken = claim_or_take(pins, api_socket, claim_gate, &settings, || {
        Ok(loader::attach(pins, &opts)?)
    })?;
    let claim = taken.claim;
    unread.extend(taken.failed);
    let inherited = take::merge(kept, taken.inherited);
    let mut attached = match taken.prepared {
        Some(mut a) => {
            // Attached beside the old agent, which may have detached the
            // state programs meanwhile (a pass found no socket for them):
            // what it let go is not this agent's to hold.
            let gone: Vec<PathBuf> = a
                .links
                .iter()
                .filter(|l| !l.exists() && a.state_links.contains(l))
                .cloned()
                .collect();
            a.links.retain(|l| !gone.contains(l));
            if !gone.is_empty() {
                info!(
                    links = gone.len(),
                    "the previous agent detached the state programs during the handover"
                );
            }
            a
        }
        None => loader::attach(pins, &opts)?,
    };
    info!(
        kernel = %release,
        cgroup2 = %hier.mount().display(),
        pod_cgroup_roots = %hier.pod_roots(),
        pins = %pins.root().display(),
        counting = ?attached.design,
        reused_maps = attached.reused_maps,
        reused_link = attached.reused_link,
        "programs attached"
    );
    let pinned = Arc::new(Pinned::hold(pins, &attached.links)?);
    // Taking over from a live agent whose maps and links this one reuses,
    // the programs counted throughout: nothing is left to adopt, only to
    // check, and the held hooks wait while this runs. The check runs as a
    // repair pass right after the start instead.
    let deferred = inherited.is_some() && attached.reused_maps && attached.reused_link;
    let adoption = if deferred {
        info!(
            "handover: the programs counted throughout; the adoption pass runs as a repair pass once serving"
        );
        adopt::pass::Report::default()
    } else {
        let a = adopt_all(&mut attached.ebpf)?;
        info!(offered = a.offered, namespaces = a.namespaces, "adoption done");
        a
    };
    let state_programs = StatePrograms::new(pins, attached.state_links.clone(), pinned.clone());
    if !deferred {
        state_programs.after_pass(adoption.storage, adoption.namespaces_failed == 0);
    }
    if state_programs.attached() && adoption.storage > 0 {
        info!(
            sockets = adoption.storage,
            "sockets older than the sock_ops program carry storage (adopted on a kernel before 6.12, or tracked by an agent of the tracepoint design): the state programs count them until they end, and are detached once none is left"
        );
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let served = rt.block_on(services::serve(
        services::Held {
            pins: pins.clone(),
            claim,
            pinned,
            state_programs,
            repair_now: deferred,
            keeper,
            unread,
            counting: attached.design.as_str(),
            kernel_release: release.to_string(),
        },
        hier,
        attached.ebpf,
        adoption,
        api_socket,
        settings,
        inherited,
    ));
    // Blocking work still running (a repair pass over a large node) is not
    // waited for past the bound: its results would have nowhere to go.
    let started = std::time::Instant::now();
    rt.shutdown_timeout(STOP_LIMIT);
    if started.elapsed() >= STOP_LIMIT {
        warn!(
            limit_s = STOP_LIMIT.as_secs(),
            "blocking work still ran when the agent stopped; left behind"
        );
    }
    served?;
    // The programs stay attached through their pinned links and keep
    // counting; the next agent picks the maps up where this one left them.
    info!("stopped; programs stay attached and keep counting until `graceful uninstall`");
    Ok(0)
}
