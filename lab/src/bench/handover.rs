//! `cargo xtask bench handover`: successive agents take the node over from
//! each other (a surge rollout, a restart beside the old process) while
//! drains are held: the gate's pause at p50 and p99, hooks cut (must be 0)
//! and both agents' peak RSS. `--crash`: `kill -9` of the agent under its
//! keeper instead, each round (the pause is the node's time without an
//! agent; the RSS, the keeper's and the new agent's). The measurement is the lab's
//! `graceful-bench handover` (lab/programs), on the integration tests'
//! simulated pods and agents; this builds it in release mode with the
//! agent and the hook, and runs it.

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Handovers, one after the other.
    #[arg(long, default_value_t = 20)]
    pub swaps: usize,
    /// Drains held throughout (each from a container of its own).
    #[arg(long, default_value_t = 1000)]
    pub drains: usize,
    /// `kill -9` of the agent under its keeper instead of handovers.
    #[arg(long)]
    pub crash: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let release = super::build_release(&["graceful-daemon", "graceful-wait", "graceful-tests"])?;
    let bench = crate::programs::build("graceful-bench", true)?;
    let status = std::process::Command::new(bench)
        .arg("handover")
        .args(["--swaps", &args.swaps.to_string()])
        .args(["--drains", &args.drains.to_string()])
        .args(args.crash.then_some("--crash"))
        .env("GRACEFUL_BIN", release.join("graceful"))
        .current_dir(xtask::util::workspace_root())
        .status()?;
    anyhow::ensure!(status.success(), "the handover bench failed");
    Ok(())
}
