//! The `graceful` command line: the agent (`graceful daemon`) and the
//! operator's commands. One module per subcommand.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::{kernel::bpf::paths::PinDir, logging::LogFormat};

pub mod at_risk;
pub mod cgroups;
pub mod client;
pub mod daemon;
pub mod doctor;
pub mod drains;
pub mod pods;
pub mod reference;
pub mod table;
pub mod uninstall;

/// graceful: times each pod's SIGTERM from its real TCP traffic.
#[derive(Debug, Parser)]
#[command(name = "graceful", version = crate::VERSION, propagate_version = true)]
pub struct Cli {
    /// Pin directory on the bpffs holding graceful's maps and links.
    #[arg(long, global = true, env = "GRACEFUL_PIN_DIR", default_value = crate::kernel::bpf::paths::DEFAULT_PIN_DIR)]
    pub pin_dir: PathBuf,
    /// The running daemon's local API socket (`graceful daemon --api-socket`),
    /// which `pods`, `pod` and `drains` ask.
    #[arg(long, global = true, env = "GRACEFUL_API_SOCKET", default_value = crate::serve::local_api::DEFAULT_SOCKET)]
    pub api_socket: PathBuf,
    /// Where the kubelet makes pods' cgroups (paths from the top of the
    /// cgroup2 hierarchy; `*` stands for any one name): a cgroup is a pod's
    /// only if its pod component sits under one, or under its QoS level.
    /// Elsewhere a pod-shaped name is no pod (a host user's delegated
    /// subtree could be named like any pod). The defaults are the
    /// kubelet's, with either cgroup driver and kind's --cgroup-root;
    /// rootless k3s, say, names its own
    /// (`/user.slice/user-1001.slice/user@1001.service/k3s-rootless.service/kubepods`).
    #[arg(long = "pod-cgroup-root", global = true, env = "GRACEFUL_POD_CGROUP_ROOT", value_delimiter = ',',
          default_values_t = crate::kernel::cgroupfs::roots::DEFAULT.map(String::from))]
    pub pod_cgroup_roots: Vec<String>,
    /// Log format (logs go to stderr; RUST_LOG filters them).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the node agent: load and attach the programs, adopt existing sockets, serve.
    Daemon(Box<daemon::Args>),
    /// Show live TCP connection counts per cgroup, from the pinned maps.
    Cgroups(cgroups::Args),
    /// Check that this node can run graceful; each problem is one line saying what to do.
    Doctor(doctor::Args),
    /// Live connections per pod on this node: NAMESPACE, POD, CONTAINERS, INBOUND, OUTBOUND, LISTEN, STATE.
    Pods(pods::PodsArgs),
    /// One pod, container by container.
    Pod(pods::PodArgs),
    /// Drains in progress and released, and terminating pods (asks the daemon).
    Drains(drains::Args),
    /// Workloads whose pods exited before their inbound connections
    /// drained, worst first (asks the daemon).
    AtRisk(at_risk::Args),
    /// Detach graceful's programs and remove every pin it made.
    Uninstall(uninstall::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(reference::CompletionsArgs),
    /// Print the command reference as Markdown (what docs/cli.md holds).
    #[command(name = "__reference", hide = true)]
    Reference,
    /// What an agent becomes once it has handed the node over (see
    /// `handover::retire`): it holds nothing and waits for its pod's end.
    #[command(name = "__retired", hide = true)]
    Retired {
        /// Where the kubelet's probes ask.
        #[arg(long, default_value = "off")]
        probe_addr: String,
        /// The agent had been told to stop: exit at once.
        #[arg(long)]
        stopping: bool,
    },
}

impl Cli {
    pub fn pins(&self) -> PinDir {
        PinDir::new(&self.pin_dir)
    }
}

/// Refuses early, with one line, when a command needs root.
pub fn require_root(what: &str) -> anyhow::Result<()> {
    if crate::kernel::version::is_root() {
        return Ok(());
    }
    anyhow::bail!("{what} needs root (it uses BPF objects pinned under /sys/fs/bpf): run it with sudo, or as the DaemonSet does")
}

/// Runs the parsed command; the exit code is the process's.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    crate::logging::init(cli.log_format);
    let roots =
        crate::kernel::cgroupfs::roots::PodRoots::parse(&cli.pod_cgroup_roots).map_err(anyhow::Error::msg)?;
    crate::kernel::cgroupfs::roots::configure(roots);
    let pins = cli.pins();
    match cli.command {
        Command::Daemon(args) => daemon::run(&pins, &cli.api_socket, cli.log_format, *args),
        Command::Cgroups(args) => cgroups::run(&pins, args),
        Command::Doctor(args) => doctor::run(&pins, &cli.api_socket, args),
        Command::Uninstall(args) => uninstall::run(&pins, args),
        Command::Pods(args) => pods::run_pods(&pins, &cli.api_socket, args),
        Command::Pod(args) => pods::run_pod(&pins, &cli.api_socket, args),
        Command::Drains(args) => drains::run(&cli.api_socket, args),
        Command::AtRisk(args) => at_risk::run(&cli.api_socket, args),
        Command::Completions(args) => reference::completions(args),
        Command::Reference => {
            print!("{}", reference::markdown());
            Ok(0)
        }
        Command::Retired { probe_addr, stopping } => {
            crate::continuity::handover::retire::run(&cli.api_socket, &probe_addr, stopping)
        }
    }
}
