//! `cargo xtask bench cluster-release`: on the test node's real kubelet,
//! the time from a deleted pod's last inbound close to its app receiving
//! SIGTERM, through graceful's gate, a 1 s poller in the hook, and
//! `preStop: sleep`, side by side in one run.
//!
//! The measurement lives with the end-to-end tests (the ignored
//! `bench_cluster_release` in `tests/tests/cluster/`); this brings the node
//! up (and down after, if it was not up), runs it, and lets its figures
//! through.

use crate::util;

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
    let session = crate::cluster::Session::begin()?;
    let mut cmd = util::cargo();
    cmd.args([
        "test",
        "-p",
        "graceful-tests",
        "--features",
        "cluster",
        "--test",
        "cluster",
    ])
    .args(["bench_cluster_release", "--", "--ignored", "--nocapture"])
    .env("GRACEFUL_KUBECONFIG", &session.kubeconfig)
    .env("GRACEFUL_BENCH_ROUNDS", args.rounds.to_string())
    .env("GRACEFUL_BENCH_BATCH", args.batch.to_string())
    .env("GRACEFUL_BENCH_SLEEP_S", args.sleep.to_string())
    .env("GRACEFUL_BENCH_SPACING_MS", args.spacing_ms.to_string());
    println!("==> {}", util::display(&cmd));
    let result = util::run(&mut cmd);
    session.end()?;
    result
}
