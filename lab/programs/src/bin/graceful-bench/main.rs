//! `graceful-bench`: the benchmarks that need the integration tests'
//! peers, cgroups, agent, fake API or test node, each printing its figures
//! (measured side by side in one run, never asserted). `cargo xtask bench
//! release-latency` and `cargo xtask bench cluster-release` build and run
//! it; the measurements are [`bench`], built on the integration tests'
//! support (`graceful_tests`). Needs root.

mod bench;

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use graceful_tests::cluster::{release::Config, Cluster};

#[derive(Debug, Parser)]
#[command(
    name = "graceful-bench",
    about = "graceful's latency benchmarks on the real kernel and on the test node."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The gate's release after the last inbound close against a 1 s sock_diag poller; then the
    /// release after a container's exit (`--after-containers`), the terminating report after the
    /// last inbound close, the release after a quiet window, and the httpGet gate's response after
    /// the last inbound close. A count of 0 skips its part.
    ReleaseLatency(ReleaseArgs),
    /// On the test node's real kubelet (`GRACEFUL_KUBECONFIG`): from a deleted pod's last inbound
    /// close to its app's SIGTERM, through graceful's gate, a 1 s poller and `preStop: sleep`.
    ClusterRelease(ClusterArgs),
    /// Successive agents take the node over from each other while drains are held: the gate's
    /// pause, hooks cut (must be 0), both agents' peak RSS.
    Handover {
        #[arg(long, default_value_t = 20)]
        swaps: usize,
        #[arg(long, default_value_t = 1000)]
        drains: usize,
        /// `kill -9` of the agent under its keeper instead of handovers.
        #[arg(long)]
        crash: bool,
    },
    /// For `bench handover`: hold a drain from each cgroup listed (see `bench::handover::hold`).
    #[command(hide = true)]
    HoldDrains {
        #[arg(long)]
        socket: std::path::PathBuf,
        #[arg(long)]
        cgroups: std::path::PathBuf,
    },
    /// For `cargo xtask bench designs`: attach programs that do nothing where a design's programs
    /// attach, print `attached`, and hold them until stdin closes.
    Floor {
        #[arg(value_enum)]
        kind: bench::designs::Floor,
    },
    /// For `cargo xtask bench designs`: the softirq stress (the kernel test `nested`) under a
    /// counting design, with the repair pass off; a JSON line per run, then the summary.
    Nested {
        #[arg(value_enum)]
        design: bench::designs::Design,
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// Connections each way of ending, per run (4 ways, plus 500 held).
        #[arg(long, default_value_t = 5000)]
        connections: u64,
    },
}

#[derive(Debug, Args)]
struct ReleaseArgs {
    /// Drains measured through graceful.
    #[arg(long, default_value_t = 1000)]
    drains: usize,
    /// Drains measured through the 1 s poller (each takes up to a second), after graceful's.
    #[arg(long, default_value_t = 30)]
    polls: usize,
    /// `--after-containers` drains each way (exit event, inotify): a container killed, the
    /// release timed.
    #[arg(long, default_value_t = 200)]
    exits: usize,
    /// Terminating pods (each with its own agent and fake API server).
    #[arg(long, default_value_t = 50)]
    terminations: usize,
    /// `--policy quiet` drains through the gate (each waits out a 250 ms window).
    #[arg(long, default_value_t = 100)]
    quiet: usize,
    /// Drains through the httpGet gate: the hook's response after the last inbound close.
    #[arg(long, default_value_t = 1000)]
    http: usize,
    /// Drains through the httpGet gate with exclusions, what they leave out busy: the hook's
    /// response after the last real close.
    #[arg(long, default_value_t = 300)]
    excluding: usize,
}

#[derive(Debug, Args)]
struct ClusterArgs {
    /// Rounds; in each, every kind in turn deletes a batch of its pods.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Pods of each kind per round.
    #[arg(long, default_value_t = 10)]
    batch: usize,
    /// The `sleep` hook's length, in seconds.
    #[arg(long, default_value_t = 15)]
    sleep: u64,
    /// Milliseconds between one pod's clients closing and the next's.
    #[arg(long, default_value_t = 1000)]
    spacing_ms: u64,
}

fn release_latency(a: &ReleaseArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.drains == 0 || a.polls > 0,
        "--polls 0: the drains' figures are compared with the poller's (--drains 0 skips both)"
    );
    if a.drains > 0 {
        bench::release::run(a.drains, a.polls);
    }
    if a.exits > 0 {
        bench::after_containers::run(a.exits);
    }
    if a.terminations > 0 {
        bench::terminating::run(a.terminations);
    }
    if a.quiet > 0 {
        bench::quiet::run(a.quiet);
    }
    if a.http > 0 {
        bench::http_gate::run(a.http);
    }
    if a.excluding > 0 {
        bench::excluding::run(a.excluding);
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    anyhow::ensure!(
        graceful_tests::is_root(),
        "the benches load eBPF programs and create cgroups: run as root"
    );
    match cli.cmd {
        Cmd::ReleaseLatency(a) => release_latency(&a),
        Cmd::ClusterRelease(a) => {
            let cfg = Config {
                rounds: a.rounds,
                batch: a.batch,
                sleep: Duration::from_secs(a.sleep),
                spacing: Duration::from_millis(a.spacing_ms),
            };
            bench::cluster_release::run(&Cluster::get(), &cfg);
            Ok(())
        }
        Cmd::Handover { swaps, drains, crash } => {
            bench::handover::run(&bench::handover::Config { swaps, drains, crash })
        }
        Cmd::HoldDrains { socket, cgroups } => bench::handover::hold(&socket, &cgroups),
        Cmd::Floor { kind } => bench::designs::hold_floor(kind),
        Cmd::Nested {
            design,
            runs,
            connections,
        } => bench::designs::nested_runs(design, runs, connections),
    }
}
