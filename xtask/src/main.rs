//! `cargo xtask`: the project's tasks, one module per command.
//!
//! - `setup`: make this machine ready (Rust bits, bpf-linker, apt packages).
//! - `test`:  build the agent and run the whole test suite.
//! - `demo`:  show graceful counting a simulated pod's connections as it drains.
//! - `rollout`: a rolling replacement behind a real load balancer, three ways.
//! - `bench`: benchmarks.
//! - `soak`:  a long run of connection churn; the agent's counts against the kernel's.
//! - `vm-test`: the integration tests in qemu, on other kernels.
//! - `cluster`: a real Kubernetes node on this machine (up, down, status).
//! - `layout`: check the tree's structure (import circles, file sizes, inline tests).
//! - `docs`: regenerate docs/cli.md from the CLI's definitions.

use clap::{Parser, Subcommand};

mod bench;
mod cluster;
mod debian;
mod demo;
mod docs;
mod layout;
mod mounts;
mod rollout;
mod setup;
mod soak;
mod test;
mod util;
mod vm;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "graceful's project tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make this machine ready: rust-src, the musl target, bpf-linker and apt packages. Idempotent.
    Setup,
    /// Run setup, build the agent, then `cargo test --workspace` (as root). Extra args go to cargo test.
    /// Then brings the test node up (`cluster up`), runs the end-to-end tests on it, and takes it
    /// down again if it was not up before.
    Test {
        /// Skip the end-to-end tests on the test node (they are then reported as skipped).
        #[arg(long)]
        no_cluster: bool,
        /// Passed to `cargo test`: `cargo xtask test -- restart` (a name filter), `-- -- --nocapture`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
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
    /// A real Kubernetes node on this machine (built from Debian's archive), with graceful's
    /// DaemonSet on it: `cargo xtask cluster up | down | status` (as root).
    Cluster(cluster::Args),
    /// Check the tree's structure: no import circle between modules or rooms, no file over 600
    /// lines, no test module inside a product file. Exit status 1 on any finding.
    Layout(layout::Args),
    /// Regenerate docs/cli.md (the command reference) from the CLI's own definitions.
    Docs,
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
        Command::Setup => setup::run().map(|_| 0),
        Command::Test { no_cluster, args } => test::run(no_cluster, &args),
        Command::Demo(args) => demo::run(args).map(|_| 0),
        Command::Rollout { args } => rollout::run(&args),
        Command::Bench { cmd } => bench::run(cmd).map(|_| 0),
        Command::Soak(args) => soak::run(args),
        Command::SoakWorker(args) => soak::worker::run(args).map(|_| 0),
        Command::SoakPeer(args) => soak::peer::run(args).map(|_| 0),
        Command::VmTest(args) => vm::run(args),
        Command::Cluster(args) => cluster::run(args),
        Command::ClusterForward(args) => cluster::forward::run(args).map(|_| 0),
        Command::Layout(args) => layout::run(args),
        Command::Docs => docs::run_docs().map(|_| 0),
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
