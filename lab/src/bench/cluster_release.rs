//! `cargo xtask bench cluster-release`: on the test node's real kubelet,
//! the time from a deleted pod's last inbound close to its app receiving
//! SIGTERM, through graceful's three gates (exec, httpGet, socket), a 1 s
//! poller in the hook, and `preStop: sleep`, side by side in one run.
//!
//! The measurement lives with the end-to-end tests' support
//! (`graceful_tests::cluster::release`), run and tabled by the lab's
//! `graceful-bench cluster-release` (lab/programs); this builds it in release mode, brings the node up (and down
//! after, if it was not up), and runs it with the flags given.

use xtask::util;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Rounds; in each, every kind in turn deletes a batch of its pods.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// Pods of each kind per round (rounds × batch deletions each way; at 50 the p99 is the
    /// maximum).
    #[arg(long, default_value_t = 10)]
    pub batch: u32,
    /// The `sleep` hook's length, in seconds.
    #[arg(long, default_value_t = 15)]
    pub sleep: u32,
    /// Milliseconds between one pod's clients closing and the next's: how close together the
    /// node's terminations come. A rolling update's come seconds apart (each waits for a new
    /// pod to be ready); at 250 ms, four a second, the last pod's teardown (its sandbox, the
    /// CNI's iptables calls) competes with the next release for this node's two CPUs.
    #[arg(long, default_value_t = 1000)]
    pub spacing_ms: u32,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    // Built first: a failed build should not bring the node up for nothing.
    let bench = crate::programs::build("graceful-bench", true)?;
    let session = crate::cluster::Session::begin()?;
    let mut cmd = std::process::Command::new(bench);
    cmd.arg("cluster-release")
        .args(["--rounds", &args.rounds.to_string()])
        .args(["--batch", &args.batch.to_string()])
        .args(["--sleep", &args.sleep.to_string()])
        .args(["--spacing-ms", &args.spacing_ms.to_string()]);
    session.point(&mut cmd);
    println!("==> {}", util::display(&cmd));
    let result = util::run(&mut cmd);
    session.end()?;
    result
}
