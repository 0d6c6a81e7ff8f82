//! The node agent: what `graceful daemon` runs. It attaches the programs,
//! adopts the sockets that predate it, then starts and owns the tasks
//! that serve the node (the resolver, the Kubernetes watch, the drains,
//! the gate, the local API, the repair and collection rounds) until
//! SIGTERM, when it stops them all within a bound.
//!
//! - [`start`]: the start before the runtime, in named phases: check,
//!   inherit, claim, attach, adopt;
//! - [`services`]: the services, started in named phases (sources,
//!   drains, transports, the local API, the handover's giver), then the
//!   rounds until a signal;
//! - [`resume`]: what the previous agent held, served again;
//! - [`local_api`]: the local API's listeners and budgets;
//! - [`stop`]: the stop, within a bound;
//! - [`phases`]: each phase's time, logged;
//! - [`tasks`]: the named tasks it owns;
//! - [`claim`]: the locks that make it the node's only agent;
//! - [`gate_dir`]: the host directory pods' hooks use;
//! - [`memory_check`]: its memory budget, which grows with the node's
//!   sockets.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use tracing::{info, warn};

use crate::{
    continuity::handover,
    kernel::bpf::{
        loader::{AttachOptions, Counting},
        paths::PinDir,
    },
    node::kube::KubeArgs,
};
use phases::Phases;

pub mod phases;
pub mod start;
mod takeover;

pub mod claim;
pub mod gate_dir;
pub mod local_api;
pub mod memory_check;
pub mod resume;
pub mod services;
pub mod stop;
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
    pub metrics_max_workloads: usize,
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

/// Runs the agent until SIGTERM or SIGINT: its start in named phases
/// ([`start`], then [`services`]), then the run, then the stop.
pub fn run(pins: &PinDir, api_socket: &Path, settings: Settings) -> anyhow::Result<i32> {
    let mut phases = Phases::new();
    let Some(checked) = start::check(pins, api_socket, &settings)? else {
        return handover::retire::run(api_socket, settings.probe_addr(), false);
    };
    phases.done("check");
    let mut kept = start::inherit()?;
    phases.done("inherit");
    let opts = AttachOptions {
        replace_incompatible: settings.replace_incompatible_pins,
        counting: settings.counting,
        cgroup_root: checked.hier.mount().to_path_buf(),
    };
    let claimed = start::claim(pins, api_socket, &settings, &opts, &mut kept)?;
    phases.done("claim");
    let (mut attached, pinned) = start::attach(pins, &opts, claimed.prepared, &checked)?;
    phases.done("attach");
    let adopted = start::adopt(pins, &mut attached, &pinned, kept.inherited.is_some())?;
    phases.done("adopt");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let served = rt.block_on(services::serve(
        services::Held {
            pins: pins.clone(),
            claim: claimed.claim,
            pinned,
            state_programs: adopted.state_programs,
            repair_now: adopted.repair_now,
            keeper: kept.keeper,
            unread: kept.unread,
            counting: attached.design.as_str(),
            kernel_release: checked.release,
            phases,
        },
        checked.hier,
        attached.ebpf,
        adopted.report,
        api_socket,
        settings,
        kept.inherited,
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
