//! The lab: everything the project runs to show and measure graceful, apart
//! from the product and from its test suite. `cargo xtask <command>` hands
//! these commands here, so their names stay the ones the docs use.
//!
//! - `cluster`: a real Kubernetes node on this machine (up, down, status,
//!   build, env).
//! - `vm-test`: the integration tests in qemu, on Debian's kernels.
//! - `bench`: benchmarks.
//! - `soak`: a long run of connection churn; the agent's counts against the
//!   kernel's.
//! - `demo`: graceful counting a simulated pod's connections as it drains,
//!   or a real pod's on the test node.
//! - `rollout`: a rolling replacement behind a real load balancer, five
//!   ways.
//!
//! Making the machine ready and building the agent come from xtask's
//! library (`xtask::setup`, `xtask::build`): the lab depends on xtask, never
//! the other way round.

use clap::{Parser, Subcommand};

mod bench;
mod cluster;
mod debian;
mod demo;
mod mounts;
mod programs;
mod rollout;
mod soak;
mod vm;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", about = "graceful's lab")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run setup, build, then show the agent counting a simulated pod's connections while it drains.
    Demo(demo::Args),
    /// Run setup, build, then roll N pods behind HAProxy with no preStop hook, with `preStop: sleep 15`
    /// and with graceful's gate; print failed requests, p99 latency, time per pod termination and total
    /// rollout time. `cargo xtask rollout --help` lists its flags.
    #[command(disable_help_flag = true)]
    Rollout {
        /// Passed to the simulation: `--pods N --propagation 2s --latency 100ms --sleep 15s --rate 100
        /// --no-keepalive --modes none,sleep,graceful --json`, `--help`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        cmd: bench::BenchCmd,
    },
    /// A long run: N connections of churn across K cgroups with every ending and an agent restart
    /// in the middle; prints every cgroup's counts against `ss` and the workers' tallies, and the
    /// drift. Exit status 1 if a live count drifted. `cargo xtask soak --help` lists its flags.
    Soak(soak::Args),
    /// Run the integration tests in qemu on Debian kernels (bookworm's 6.1, sid's 7.2, and the refusal on bullseye's 5.10; `--all` adds bookworm's and trixie's 6.12) and on this kernel.
    VmTest(vm::Args),
    /// A real Kubernetes node on this machine (built from its Go modules), with graceful's
    /// DaemonSet on it: `cargo xtask cluster up | down | status | build | env` (as root).
    Cluster(cluster::Args),
    /// The host's door to the cluster's API server (started by `cluster up` itself).
    #[command(name = "__cluster-forward", hide = true)]
    ClusterForward(cluster::forward::Args),
    /// One cgroup's worker of the soak (started by `soak` itself).
    #[command(name = "__soak-worker", hide = true)]
    SoakWorker(soak::worker::Args),
    /// A peer of the soak that is killed (started by a soak worker).
    #[command(name = "__soak-peer", hide = true)]
    SoakPeer(soak::peer::Args),
    /// The demo's client process (started by `demo` itself).
    #[command(name = "__demo-client", hide = true)]
    DemoClient(demo::client::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args).map(|_| 0),
        Command::Rollout { args } => rollout::run(&args),
        Command::Bench { cmd } => bench::run(cmd).map(|_| 0),
        Command::Soak(args) => soak::run(args),
        Command::SoakWorker(args) => soak::worker::run(args).map(|_| 0),
        Command::SoakPeer(args) => soak::peer::run(args).map(|_| 0),
        Command::VmTest(args) => vm::run(args),
        Command::Cluster(args) => cluster::run(args),
        Command::ClusterForward(args) => cluster::forward::run(args).map(|_| 0),
        Command::DemoClient(args) => demo::client::run(args).map(|_| 0),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}
