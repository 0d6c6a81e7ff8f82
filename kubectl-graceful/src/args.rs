//! The command line, with kubectl's plugin conventions: `kubectl graceful
//! pods` runs `kubectl-graceful pods`; `--context`, `--kubeconfig` and
//! `-o` mean what they mean to kubectl.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// What each node's graceful agent sees, through the API server.
#[derive(Debug, Parser)]
#[command(name = "kubectl-graceful", bin_name = "kubectl graceful", version)]
pub struct Cli {
    /// Only this node's agent (default: every node's).
    #[arg(long, global = true)]
    pub node: Option<String>,
    /// The agents' namespace.
    #[arg(long, global = true, default_value = "graceful-system")]
    pub agent_namespace: String,
    /// The kubeconfig context to use (default: the current one).
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// The kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    #[arg(short, long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Agents asked at once (each is a port-forward through the API server
    /// and the node's kubelet), as kubectl logs' --max-log-requests bounds
    /// its streams; the rest wait their turn.
    #[arg(long, global = true, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub max_requests: u16,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    /// The table with more columns (pods: uid, QoS, cgroup).
    Wide,
    /// One JSON array: each node's agent and its answer.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Live connections per pod: NODE, NAMESPACE, POD, CONTAINERS, INBOUND, OUTBOUND, LISTEN, STATE.
    Pods {
        /// Only pods of this namespace.
        #[arg(short, long)]
        namespace: Option<String>,
    },
    /// Drains in progress and released, and terminating pods.
    Drains,
    /// The workloads whose pods exited before their inbound connections
    /// drained, worst first, from every node's recent terminating reports
    /// (the pods the agents report on: those that opted in, and those the
    /// report scope widens to).
    AtRisk {
        /// Only workloads of this namespace (with --events: the namespace
        /// whose Events are read; default: the kubeconfig's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// Rank from the terminating reports' Events in the namespace (one
        /// LIST, with the caller's own RBAC: `list` events, which `view`
        /// grants), not from the agents (which needs port-forward rights in
        /// the agents' namespace).
        #[arg(long)]
        events: bool,
        /// With --events: every namespace's Events.
        #[arg(short = 'A', long, requires = "events", conflicts_with = "namespace")]
        all_namespaces: bool,
    },
    /// Gives workloads graceful's gate as the injection policy would (for
    /// clusters before 1.36, or to write it into the objects): server-side
    /// apply, field manager kubectl-graceful.
    Adopt(Adopt),
    /// Each workload's drains (p50, p99, longest, how many hit their
    /// deadline) and the `max` and grace period they call for, from the
    /// released drains' Events in the namespace, with the caller's own
    /// RBAC.
    Recommend {
        /// The namespace (default: the kubeconfig's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// Every namespace.
        #[arg(short = 'A', long, conflicts_with = "namespace")]
        all_namespaces: bool,
        /// The app's shutdown time after SIGTERM, added to `max` for the
        /// grace period (the agent's --shutdown-budget).
        #[arg(long, default_value = "5s", value_parser = graceful_api::duration::parse)]
        budget: std::time::Duration,
    },
    /// A namespace's drains and terminating reports, from the Events the
    /// agents posted on its pods (oldest first), with the caller's own
    /// RBAC: what an app team reads without rights in the agents'
    /// namespace. Events last as long as the API server keeps them (an
    /// hour by default).
    History {
        /// The namespace (default: the kubeconfig's).
        #[arg(short, long)]
        namespace: Option<String>,
        /// Every namespace.
        #[arg(short = 'A', long, conflicts_with = "namespace")]
        all_namespaces: bool,
    },
    /// Pinned counts per cgroup.
    Cgroups {
        /// Only this cgroup and the ones below it (relative to the cgroup2 mount).
        #[arg(long)]
        path: Option<String>,
        /// Include cgroups with no live connection and no listener.
        #[arg(short, long)]
        all: bool,
    },
    /// Each agent's checks of its node; exits 1 if any fails.
    Doctor,
    /// Before an install: what would stop the agent, one line per node (a
    /// pod like the agent's runs `graceful doctor` on each, and goes);
    /// exits 1 if anything would.
    Preflight(Preflight),
}

impl Command {
    /// The agent API path that answers it; `None` for what no agent
    /// answers (a preflight runs before there is one; Events are the API
    /// server's).
    pub fn path(&self) -> Option<&'static str> {
        match self {
            Command::Pods { .. } => Some("/v1/pods"),
            Command::Drains | Command::AtRisk { events: false, .. } => Some("/v1/drains"),
            Command::Cgroups { .. } => Some("/v1/cgroups"),
            Command::Doctor => Some("/v1/doctor"),
            Command::AtRisk { events: true, .. }
            | Command::History { .. }
            | Command::Recommend { .. }
            | Command::Adopt(_)
            | Command::Preflight(_) => None,
        }
    }
}

/// What the command line asks of `adopt`.
#[derive(Debug, Clone, clap::Args)]
pub struct Adopt {
    /// The workloads: deploy/NAME, sts/NAME, ds/NAME.
    pub workloads: Vec<String>,
    /// Every Deployment, StatefulSet and DaemonSet of the namespace.
    #[arg(long)]
    pub all: bool,
    /// The namespace (default: the kubeconfig's).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Ask the API server to apply it without storing it, and print the
    /// pod template's diff.
    #[arg(long)]
    pub dry_run: bool,
    /// Take the fields adopt sets from the manager that owns them (a
    /// grace period the team's manifest sets, say).
    #[arg(long)]
    pub force_conflicts: bool,
    /// Set each workload's hook `max` and grace period to what its own
    /// drains call for: `kubectl graceful recommend`'s proposal, from the
    /// namespace's Events (needs `list` on events). A workload with
    /// graceful's hook already gets the new figures; one with no drain
    /// measured, the defaults.
    #[arg(long)]
    pub recommended: bool,
    /// The app's shutdown time after SIGTERM, added to `max` for the grace
    /// period, as recommend's `--budget`.
    #[arg(long, default_value = "5s", value_parser = graceful_api::duration::parse, requires = "recommended")]
    pub budget: std::time::Duration,
    /// The longest `max` a recommendation may write: past it the workload
    /// is left as it is, in one line. The figures come from Events, which
    /// anyone allowed to create Events in the namespace can write.
    #[arg(long, default_value = "10m", value_parser = graceful_api::duration::parse, requires = "recommended")]
    pub up_to: std::time::Duration,
}

/// What the command line asks of a preflight.
#[derive(Debug, Clone, clap::Args)]
pub struct Preflight {
    /// The agent's image, as the install will name it (the chart's
    /// image.repository and tag).
    #[arg(long, default_value = concat!("graceful/agent:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// The agent's priority class (the chart's and deploy/base's).
    #[arg(long, default_value = "system-node-critical")]
    pub priority_class: String,
    /// How long each node's pod may take, from its creation to its answer
    /// (an image pull included).
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    pub timeout: u64,
}
