//! `cargo xtask bench release-latency`: how long after a pod's last inbound
//! close the gate releases it, against a sock_diag poller at 1 s, in one
//! run; and, in the same run, how long after a container's exit an
//! `--after-containers` drain is released, how long after a terminating
//! pod's last inbound close its report comes, and how long after its quiet
//! window a `--policy quiet` drain is released.
//!
//! The measurements live with the integration tests (the ignored
//! `bench_*` tests in `tests/tests/kernel/`), which own the peers, cgroups,
//! agent and fake API they need; this runs them in release mode and lets
//! their figures through.

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Drains measured through graceful.
    #[arg(long, default_value_t = 1000)]
    pub drains: usize,
    /// Drains measured through the 1 s poller (each takes up to a second).
    #[arg(long, default_value_t = 30)]
    pub polls: usize,
    /// `--after-containers` drains: a container killed, the release timed.
    #[arg(long, default_value_t = 200)]
    pub exits: usize,
    /// Terminating pods (each with its own agent and fake API server).
    #[arg(long, default_value_t = 50)]
    pub terminations: usize,
    /// `--policy quiet` drains through the gate (each waits out a 250 ms window).
    #[arg(long, default_value_t = 100)]
    pub quiet: usize,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let root = super::workspace_root();
    let status = crate::util::cargo()
        .args([
            "build",
            "--release",
            "-p",
            "graceful-daemon",
            "-p",
            "graceful-wait",
            "-p",
            "graceful-tests",
        ])
        .current_dir(&root)
        .status()?;
    anyhow::ensure!(
        status.success(),
        "building the agent, the hook and the tests failed"
    );
    let status = crate::util::cargo()
        .args([
            "test",
            "--release",
            "-p",
            "graceful-tests",
            "--test",
            "kernel",
            // Every `bench_*` latency measurement: drains, container
            // exits, terminating reports, quiet drains.
            "bench_",
            "--",
        ])
        .args(["--ignored", "--nocapture", "--test-threads=1"])
        .env("GRACEFUL_BENCH_DRAINS", args.drains.to_string())
        .env("GRACEFUL_BENCH_POLLS", args.polls.to_string())
        .env("GRACEFUL_BENCH_EXITS", args.exits.to_string())
        .env("GRACEFUL_BENCH_TERMINATIONS", args.terminations.to_string())
        .env("GRACEFUL_BENCH_QUIET", args.quiet.to_string())
        .env("GRACEFUL_BIN", root.join("target/release/graceful"))
        .current_dir(&root)
        .status()?;
    anyhow::ensure!(status.success(), "the release-latency bench failed");
    Ok(())
}
