//! `graceful daemon`: the node agent's flags. The agent itself is
//! [`crate::agent`].

use std::{path::PathBuf, time::Duration};

use crate::{agent, kernel::bpf::paths::PinDir};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Replace pinned maps of an incompatible layout (an older or newer
    /// graceful) instead of refusing to start. Live counts are re-adopted from
    /// the kernel; totals restart at zero.
    #[arg(long, env = "GRACEFUL_REPLACE_INCOMPATIBLE_PINS")]
    pub replace_incompatible_pins: bool,
    /// How new connections are counted. Pins that count with the
    /// tracepoint design move to sock_ops at the agent's next start, losing
    /// no count; the way back is refused in one line (after `graceful
    /// uninstall`, any design starts afresh).
    #[arg(long, env = "GRACEFUL_COUNTING", value_enum, default_value_t)]
    pub counting: crate::kernel::bpf::loader::Counting,
    /// How often to drop counters of cgroups that no longer exist and hold nothing.
    #[arg(long, default_value = "60s", value_parser = crate::duration::parse)]
    pub gc_interval: Duration,
    /// How often to check every tracked socket's count against its state,
    /// repairing any whose state change the kernel skipped for both copies
    /// of the state program (rare; the start-up pass does it too). `0s`: never.
    #[arg(long, default_value = "60s", value_parser = crate::duration::parse)]
    pub repair_interval: Duration,
    /// How often to look for pins removed from under the agent and pin
    /// them again (it holds every map and link, so nothing is lost). `0s`:
    /// never; `/healthz` then fails until the agent restarts.
    #[arg(long, default_value = "2s", value_parser = crate::duration::parse)]
    pub repin_interval: Duration,
    /// Host directory for the drain gate: the agent puts `graceful-wait` and
    /// `gate.sock` there; pods mount it (by convention at /graceful) and
    /// run `/graceful/graceful-wait` as their preStop hook.
    #[arg(long, env = "GRACEFUL_GATE_DIR")]
    pub gate_dir: Option<PathBuf>,
    /// The node's network namespace, whose addresses are the only peers
    /// the httpGet gate admits (the kubelet speaks from there). The host's,
    /// through pid 1, by default; the agent sees it with `hostPID`.
    #[arg(long, env = "GRACEFUL_NODE_NETNS", default_value = crate::node::addrs::DEFAULT_NETNS)]
    pub node_netns: PathBuf,
    /// On SIGTERM, how long the agent keeps serving while httpGet drains are
    /// in progress: the kubelet does not retry a hook whose connection is
    /// cut (graceful-wait reconnects to the next agent), so they are
    /// finished first. Keep it under the DaemonSet's grace period less 5 s.
    /// `0s`: stop at once.
    #[arg(long, default_value = "20s", value_parser = crate::duration::parse)]
    pub stop_hold: Duration,
    /// `on`: an agent that starts where another runs on the same pins (the
    /// DaemonSet's surge pod, a restart beside the old process) takes over
    /// its listeners and held hooks through the gate directory, and this
    /// agent hands them to its own successor; nothing is cut. `off`: it
    /// does neither; a second agent refuses to start, as before.
    #[arg(long, env = "GRACEFUL_HANDOVER", value_enum, default_value_t = Switch::On)]
    pub handover: Switch,
    /// `on`: this process becomes a keeper that runs the agent as its child
    /// and holds a duplicate of each of its listeners and held hooks, so
    /// that a crash of the agent (`kill -9`, the OOM killer, a panic) cuts
    /// no hook: the keeper starts it again and it serves them on. The
    /// DaemonSet's container runs it so. `off`: the agent runs alone.
    #[arg(long, env = "GRACEFUL_KEEPER", value_enum, default_value_t = Switch::Off)]
    pub keeper: Switch,
    /// The time an app needs after SIGTERM to finish: a drain's default
    /// deadline is the pod's grace period less this.
    #[arg(long, env = "GRACEFUL_SHUTDOWN_BUDGET", default_value = "5s", value_parser = crate::duration::parse)]
    pub shutdown_budget: Duration,
    /// The `graceful-wait` binary to place in the gate directory (default:
    /// beside this executable).
    #[arg(long)]
    pub wait_bin: Option<PathBuf>,
    /// TCP address of the local API (/v1/pods, /v1/drains, /metrics, ...):
    /// loopback by default, where `kubectl port-forward` reaches it in a
    /// pod. `off` serves none. An address that does not parse, or cannot be
    /// bound, stops the start.
    #[arg(long, env = "GRACEFUL_API_ADDR", default_value = crate::serve::local_api::DEFAULT_ADDR, value_parser = api_addr)]
    pub api_addr: String,
    /// TCP address that serves only /metrics, /healthz and /readyz: the
    /// DaemonSet puts it on every address of the pod (`:9464`: IPv6 and
    /// IPv4 on one socket, or IPv4 alone where the pod has no IPv6) for
    /// Prometheus and the probes, so that nothing naming pods or drains is
    /// readable from the pod network. `off` (the default) serves none.
    #[arg(long, env = "GRACEFUL_METRICS_ADDR", default_value = "off", value_parser = api_addr)]
    pub metrics_addr: String,
    /// `on`: the metrics address's /metrics has the per-pod series
    /// (`graceful_pod_inbound_connections`, `..._outbound_...`), which name
    /// every pod of the node with its connections to whoever can reach the
    /// address (on the pod network: any pod). `off`: they are left out
    /// there; the loopback API's /metrics always has them.
    #[arg(long, env = "GRACEFUL_METRICS_PODS", value_enum, default_value_t = Switch::Off)]
    pub metrics_pods: Switch,
    /// Pods with their own series in the per-pod metrics; the rest are
    /// summed into one `pod="_other"` series, so a node's cardinality stays bounded.
    #[arg(long, default_value_t = 256)]
    pub metrics_max_pods: usize,
    /// Workloads (namespace and controller) with their own series in
    /// `graceful_workload_terminations_total`, since the agent's start; the
    /// rest count under `workload="_other"`.
    #[arg(long, default_value_t = 256)]
    pub metrics_max_workloads: usize,
    #[command(flatten)]
    pub kube: crate::node::kube::KubeArgs,
}

impl From<Args> for agent::Settings {
    fn from(a: Args) -> Self {
        agent::Settings {
            replace_incompatible_pins: a.replace_incompatible_pins,
            counting: a.counting,
            gc_interval: a.gc_interval,
            repair_interval: a.repair_interval,
            repin_interval: a.repin_interval,
            stop_hold: a.stop_hold,
            handover: a.handover == Switch::On,
            gate_dir: a.gate_dir,
            node_netns: a.node_netns,
            shutdown_budget: a.shutdown_budget,
            wait_bin: a.wait_bin,
            api_addr: a.api_addr,
            metrics_addr: a.metrics_addr,
            metrics_pods: a.metrics_pods == Switch::On,
            metrics_max_pods: a.metrics_max_pods,
            metrics_max_workloads: a.metrics_max_workloads,
            kube: a.kube,
        }
    }
}

/// `--handover`, `--keeper`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// `--api-addr`, `--metrics-addr`: `off`, an IP address and port
/// (`127.0.0.1:9464`, `[::]:9464`, `0.0.0.0:0`), or `:PORT`, every
/// address of the pod in both families ([`crate::listen::any_address`]). A
/// host name is refused: the agent binds before any resolver is worth
/// trusting, and the probes name an address.
pub fn api_addr(s: &str) -> Result<String, String> {
    let any_port = s.strip_prefix(':').is_some_and(|p| p.parse::<u16>().is_ok());
    if s == "off" || any_port || s.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(s.into());
    }
    Err(format!(
        "{:?} is not an address and port like 127.0.0.1:9464, [::]:9464 or :9464 (or `off`)",
        graceful_api::clip(s, graceful_api::MAX_ECHO)
    ))
}

pub fn run(
    pins: &PinDir,
    api_socket: &std::path::Path,
    format: crate::logging::LogFormat,
    args: Args,
) -> anyhow::Result<i32> {
    use crate::continuity::keeper;
    super::require_root("graceful daemon")?;
    // The agent that a keeper runs has its socket in the environment.
    if args.keeper == Switch::On && std::env::var_os(keeper::ENV).is_none() {
        let scratch = api_socket.parent().unwrap_or(std::path::Path::new("/run"));
        let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
        let Some(program) = keeper::alone::beside_this() else {
            tracing::warn!(
                "keeper: {} is not beside this executable; keeping in this process, which maps the agent's code",
                keeper::alone::PROGRAM
            );
            return keeper::run::run(argv, scratch, std::path::Path::new("/proc/self/exe"));
        };
        let e = keeper::alone::exec(&program, &argv, scratch, format);
        tracing::warn!(error = %e, "keeper: keeping in this process instead");
        return keeper::run::run(argv, scratch, std::path::Path::new("/proc/self/exe"));
    }
    if std::env::var_os(keeper::ENV).is_some() {
        // A keeper's agent is exec'd through a descriptor (`/proc/self/fd/3`),
        // which names the process `3`: `ps` and `pgrep` know it as graceful.
        let _ = rustix::thread::set_name(c"graceful");
    }
    agent::run(pins, api_socket, args.into())
}

#[cfg(test)]
mod tests;
