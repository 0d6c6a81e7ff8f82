//! `cargo xtask bench release-latency`: how long after a pod's last inbound
//! close the gate releases it, against a sock_diag poller at 1 s, in one
//! run; and, in the same run, how long after a container's exit an
//! `--after-containers` drain is released, how long after a terminating
//! pod's last inbound close its report comes, how long after its quiet
//! window a `--policy quiet` drain is released, and how long after a pod's
//! last inbound close the httpGet gate's response has its last byte.
//!
//! The measurements are the lab's `graceful-bench release-latency`
//! (lab/programs), on the integration tests' peers, cgroups, agent and
//! fake API; this builds it in release mode with the agent and the hook, and
//! runs it with the counts given.

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
    /// Drains through the httpGet gate: the hook's response after the last inbound close.
    #[arg(long, default_value_t = 1000)]
    pub http: usize,
    /// Drains through the httpGet gate with exclusions in place, and a scraper and probes they
    /// leave out busy: the hook's response after the last real close.
    #[arg(long, default_value_t = 300)]
    pub excluding: usize,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let root = xtask::util::workspace_root();
    let release = super::build_release(&["graceful-daemon", "graceful-wait", "graceful-tests"])?;
    let bench = crate::programs::build("graceful-bench", true)?;
    let status = std::process::Command::new(bench)
        .arg("release-latency")
        // Every latency measurement: drains, container exits, terminating
        // reports, quiet drains, the httpGet gate.
        .args(["--drains", &args.drains.to_string()])
        .args(["--polls", &args.polls.to_string()])
        .args(["--exits", &args.exits.to_string()])
        .args(["--terminations", &args.terminations.to_string()])
        .args(["--quiet", &args.quiet.to_string()])
        .args(["--http", &args.http.to_string()])
        .args(["--excluding", &args.excluding.to_string()])
        .env("GRACEFUL_BIN", release.join("graceful"))
        .current_dir(&root)
        .status()?;
    anyhow::ensure!(status.success(), "the release-latency bench failed");
    Ok(())
}
