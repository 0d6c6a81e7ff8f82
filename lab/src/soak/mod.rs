//! `cargo xtask soak`: a long run of connection churn against the real
//! agent, to show that its counts never drift. A benchmark's kind of
//! command (it prints figures), not a test of the suite.
//!
//! K cgroups under the cgroup2 root, one worker process each (this binary,
//! moved into its cgroup before exec), every cgroup on its own 127.77.x.y
//! address and on ::1. The workers churn `--connections` connections to
//! each other's listeners, in rounds, with a deterministic mix of endings
//! (`--seed`): client FIN first, server FIN first, client RST, server RST,
//! never accepted (left in a listener's queue, then closed by the client,
//! or the listener closed with them queued); and each round, in every
//! cgroup, a peer process SIGKILLed while it holds connections both ways
//! (a new one in the same cgroup next round). At the halfway round the
//! agent is restarted while the churn runs (`--restart kill9`: SIGKILL,
//! or `term`: SIGTERM), then started again on the same pins. At the end,
//! connections held open by every worker keep the live counts non-zero.
//!
//! Output: the run's settings, a progress line every tenth of the rounds,
//! then per cgroup `graceful cgroups`' figures against the truth: live
//! connections and listeners against `ss` (the kernel's own view; TIME_WAIT
//! and other closing states are not live, see graceful-common's
//! `tcp::is_live`), totals against what the workers counted as
//! established (inbound: on the server side, accepted or not). A cell
//! reads `agent≠truth` where they differ. Then the drift summed (agent −
//! truth; the goal is 0), connections per second, the agent's CPU time per
//! connection (before and after the restart) and its kernel programs' own
//! counters (lost events, untracked sockets, underflows, caught state
//! changes). Exit status 1 if any live count drifted.
//!
//! Needs root. The agent is a release build on a pin directory and an API
//! socket of the soak's own (no TCP API); everything is removed at the end,
//! also on error or Ctrl-C.

use std::path::PathBuf;

use anyhow::bail;

use crate::bench::{agent::Agent, cgroup::Cgroups, AgentArgs};

mod churn;
mod conn;
mod ending;
mod fleet;
pub mod peer;
mod report;
mod run;
mod tally;
pub mod worker;

/// How the agent is restarted at the halfway round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Restart {
    /// SIGTERM (its own shutdown), then start again.
    Term,
    /// SIGKILL (nothing of its shutdown runs), then start again.
    Kill9,
    /// No restart.
    None,
}

impl Restart {
    pub fn name(self) -> &'static str {
        match self {
            Restart::Term => "SIGTERM and start",
            Restart::Kill9 => "SIGKILL and start",
            Restart::None => "none",
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Connections of churn in all (the killed peers' and the held ones come on top).
    #[arg(long, default_value_t = 10_000_000)]
    pub connections: u64,
    /// Cgroups (one worker process each), 2 to 250.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(2..=250))]
    pub cgroups: u64,
    /// How the agent is restarted at the halfway round.
    #[arg(long, value_enum, default_value_t = Restart::Kill9)]
    pub restart: Restart,
    /// Seed of the mix of endings and targets.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Connections per worker per round (each round ends with its queue listeners closed).
    #[arg(long, default_value_t = 4000)]
    pub round: u64,
    /// Connections each way of the peer every worker kills each round.
    #[arg(long, default_value_t = 4)]
    pub victim_connections: u64,
    /// Connections every worker holds open at the end.
    #[arg(long, default_value_t = 32)]
    pub hold: u64,
    #[command(flatten)]
    pub agent: AgentArgs,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the soak loads BPF programs and creates cgroups: run as root");
    }
    if args.connections == 0 || args.round == 0 {
        bail!("--connections and --round must be positive");
    }
    crate::bench::install_interrupt_handler();
    crate::bench::worker::raise_nofile(8192)?;
    let bin = args.agent.binary()?;
    let tag = format!("graceful-soak-{}", std::process::id());
    let dir = report::StateDir(std::env::temp_dir().join(&tag));
    std::fs::create_dir_all(&dir.0)?;
    let cgroups = Cgroups::create(&format!("{tag}-"), args.cgroups as usize)?;
    let mut agent = Agent::new(&bin, &PathBuf::from("/sys/fs/bpf").join(&tag))?;
    agent.api_socket(&dir.0.join("api.sock"));
    run::soak(&args, &bin, &cgroups, &mut agent)
}

/// Rounds, and connections per worker per round, for `connections` over
/// `workers`: rounds of about `round` each, an even number of them (the
/// restart is at the middle one), at least two.
pub fn rounds(connections: u64, workers: u64, round: u64) -> (u64, u64) {
    let per_worker = connections.div_ceil(workers);
    let mut rounds = per_worker.div_ceil(round).max(2);
    rounds += rounds % 2;
    (rounds, per_worker.div_ceil(rounds))
}

#[cfg(test)]
mod tests;
