//! `cargo xtask bench …`: measurements behind the performance targets.
//!
//! - `churn`: loopback connections per second with graceful's programs
//!   attached against detached, interleaved round by round.
//! - `churn-cost`: the same load's extra CPU split by kernel path, from
//!   CPU samples, precise where the churn ratio is noisy.
//! - `release-latency`: the gate's release after the last inbound close,
//!   against a 1 s sock_diag poller (and the after-containers, terminating
//!   and quiet latencies).
//! - `memory`: agent RSS and kernel map memory with many live connections
//!   across many cgroups, at start, after a restart, and after a cold start
//!   that must adopt every connection.
//! - `handover`: successive agents taking the node over from each other
//!   while a thousand drains are held: the gate's pause, hooks cut, RSS.
//! - `cluster-release`: on the test node's kubelet, a deleted pod's last
//!   inbound close to its app's SIGTERM.
//! - `designs`: the ways of counting side by side, CPU per connection and
//!   misses under the softirq stress.
//! - `nginx`: a real server's CPU per request, with the agent and without.
//!
//! All need root and run the real agent (a release build, under its own
//! pin directory so a node's agent is never touched). `churn`,
//! `churn-cost` and `memory` are measured here, and leave nothing behind,
//! also on error or Ctrl-C. `release-latency` and `cluster-release` need
//! the integration tests' peers, cgroups, fake API and test node: their
//! measurements are the lab's `graceful-bench` program (lab/programs, on
//! the tests' support), which these build in release mode and run.

use std::{
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
};

use anyhow::{bail, Context as _};

pub(crate) mod agent;
mod bpf;
pub(crate) mod cgroup;
mod churn;
mod cluster_release;
mod cost;
mod designs;
mod handover;
mod load;
mod memory;
mod nginx;
mod release;
mod stats;
pub(crate) mod tcp_load;
pub(crate) mod worker;

#[derive(Debug, clap::Subcommand)]
pub enum BenchCmd {
    /// Connections per second on loopback, programs attached vs detached (target: a ratio with/without of at least 0.95 at the median).
    Churn(churn::Args),
    /// Where the churn load's extra CPU goes, by kernel path, from CPU samples (needs perf; target:
    /// at most 4 % of the busy CPU).
    ChurnCost(cost::Args),
    /// The counting designs (sock_ops, the tracepoints, without the twin, and the floors under
    /// them) side by side: CPU per connection, and misses under the softirq stress (needs perf).
    Designs(designs::Args),
    /// nginx on loopback driven by wrk, a new connection per request and keep-alive: the
    /// machine's busy CPU per request with the agent and without (target: at most 1.01×).
    Nginx(nginx::Args),
    /// Agent and keeper RSS and kernel map memory with many live connections across many cgroups (targets: agent 20 MiB, keeper 4 MiB).
    Memory(memory::Args),
    /// Gate release latency after the last inbound close, against a 1 s sock_diag poller (target: p99 <= 10 ms, 100x faster).
    ReleaseLatency(release::Args),
    /// Successive agents take the node over while 1,000 drains are held: the gate's pause (p50,
    /// p99; target under 100 ms at p99), hooks cut (must be 0), both agents' peak RSS.
    Handover(handover::Args),
    /// On the test node's real kubelet: from a deleted pod's last inbound close to its app's
    /// SIGTERM, through graceful's gate, a 1 s poller and `preStop: sleep`, side by side.
    ClusterRelease(cluster_release::Args),
    /// Internal: one process of the memory bench, run inside its cgroup.
    #[command(hide = true)]
    MemoryWorker(worker::Args),
    /// The churn load alone, one window, agent untouched: for profiling with `perf record -a`.
    #[command(hide = true)]
    Load(load::Args),
}

pub fn run(cmd: BenchCmd) -> anyhow::Result<()> {
    if let BenchCmd::MemoryWorker(args) = cmd {
        return worker::run(args);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("benches load BPF programs and create cgroups: run as root");
    }
    install_interrupt_handler();
    match cmd {
        BenchCmd::Churn(args) => churn::run(args),
        BenchCmd::ChurnCost(args) => cost::run(args),
        BenchCmd::Designs(args) => designs::run(args),
        BenchCmd::Nginx(args) => nginx::run(args),
        BenchCmd::Memory(args) => memory::run(args),
        BenchCmd::ReleaseLatency(args) => release::run(args),
        BenchCmd::ClusterRelease(args) => cluster_release::run(args),
        BenchCmd::Handover(args) => handover::run(args),
        BenchCmd::Load(args) => load::run(args),
        BenchCmd::MemoryWorker(_) => unreachable!(),
    }
}

/// Which agent binary to run; shared by every bench.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// The `graceful` binary to benchmark. Default: build it with
    /// `cargo build --release -p graceful-daemon` and use target/release/graceful.
    #[arg(long)]
    pub graceful: Option<PathBuf>,
    /// Use target/release/graceful as it is, without building it first.
    #[arg(long)]
    pub no_build: bool,
}

impl AgentArgs {
    pub fn binary(&self) -> anyhow::Result<PathBuf> {
        if let Some(p) = &self.graceful {
            return Ok(p.clone());
        }
        let root = xtask::util::workspace_root();
        if !self.no_build {
            eprintln!("building the agent: cargo build --release -p graceful-daemon");
            let status = xtask::util::cargo()
                .args(["build", "--release", "-p", "graceful-daemon"])
                .current_dir(&root)
                .status()
                .context("run cargo")?;
            if !status.success() {
                bail!("building graceful-daemon failed ({status})");
            }
        }
        let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
        let bin = target.join("release/graceful");
        if !bin.exists() {
            bail!("{} does not exist: build it or pass --graceful", bin.display());
        }
        Ok(bin)
    }

    /// The static build the image ships (`x86_64-unknown-linux-musl`),
    /// built unless `--no-build`; `--graceful` when given.
    pub fn static_binary(&self) -> anyhow::Result<PathBuf> {
        if let Some(p) = &self.graceful {
            return Ok(p.clone());
        }
        let dir = if self.no_build {
            xtask::util::target_dir().join(xtask::setup::MUSL).join("release")
        } else {
            xtask::image::static_binaries(xtask::setup::MUSL)?
        };
        let bin = dir.join("graceful");
        if !bin.exists() {
            bail!("{} does not exist: build it or pass --graceful", bin.display());
        }
        Ok(bin)
    }
}

/// `cargo build --release -p` each of `packages`; the release directory.
pub fn build_release(packages: &[&str]) -> anyhow::Result<PathBuf> {
    let mut cmd = xtask::util::cargo();
    cmd.args(["build", "--release"]);
    for p in packages {
        cmd.args(["-p", p]);
    }
    let status = cmd
        .current_dir(xtask::util::workspace_root())
        .status()
        .context("run cargo")?;
    if !status.success() {
        bail!("building {} failed ({status})", packages.join(", "));
    }
    Ok(xtask::util::target_dir().join("release"))
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Ctrl-C or SIGTERM make the bench stop at its next check and clean up
/// through its guards, instead of dying with the agent still attached.
pub(crate) fn install_interrupt_handler() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Fails once the user asked the bench to stop.
pub fn check_interrupted() -> anyhow::Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}

/// Sleeps, waking up early (with an error) if interrupted.
pub fn sleep(d: std::time::Duration) -> anyhow::Result<()> {
    let end = std::time::Instant::now() + d;
    loop {
        check_interrupted()?;
        let now = std::time::Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(std::time::Duration::from_millis(50)));
    }
}

/// `/proc/loadavg`, to show how busy the machine was.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
