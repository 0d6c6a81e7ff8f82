//! `cargo xtask bench designs`: the ways graceful could count connections,
//! side by side in one run, each with its CPU cost per connection and its
//! misses under the softirq stress.
//!
//! The candidates:
//! - `sock-ops`: the sock_ops program at the cgroup v2 root, the socket's
//!   own callback flags as its state, the owner read from the socket's
//!   cgroup: no storage, no second program, no backstop (the default);
//! - `tracepoint`: graceful 0.1's design (`--counting tracepoint`): the
//!   state program and its twin on `inet_sock_set_state`, storage created,
//!   cloned and freed for every socket, the destruction backstop;
//! - `tracepoint-single`: the same without the twin;
//! - `floor-sock-ops`, `floor-tracepoints`: programs that do nothing,
//!   attached where each design's are: what the kernel charges for running
//!   any program there, the floor under each;
//! - `floor-lookup`: sock_ops's dispatch, callback flags and owner lookups
//!   (the socket's cgroup, the counters entry, the watch flags) without its
//!   atomic adds: `sock-ops` less this is what the adds cost.
//!
//! Cost: rounds of the churn load (as `churn-cost`), each sampling one
//! window with nothing attached and one with each candidate, in an order
//! that rotates from round to round; each candidate's share is every
//! graceful path's "with" minus "without" (see `cost.rs`). The agent is
//! stopped before its windows: its pinned programs count without it, and
//! its process does nothing during a churn anyway.
//!
//! Misses: `graceful-bench nested` runs the kernel test's softirq stress
//! under each design with the periodic repair pass off, and says in how
//! many runs every count was exact.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

use super::{
    agent::Agent,
    cost::{find_perf, graceful_share, sample, us_per_connection, DataDir, Sampling, PATHS},
    stats::Summary,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub sampling: Sampling,
    /// Runs of the softirq stress per design (0: skip the misses).
    #[arg(long, default_value_t = 20)]
    pub stress_runs: usize,
    /// Connections each way of ending per stress run (4 ways, plus 500 held).
    #[arg(long, default_value_t = 5000)]
    pub stress_connections: u64,
    /// Pin directory of the agent under test.
    #[arg(long, default_value = "/sys/fs/bpf/graceful-bench")]
    pub pin_dir: PathBuf,
}

/// One way of counting, or a floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Candidate {
    SockOps,
    Tracepoint,
    TracepointSingle,
    FloorSockOps,
    FloorLookup,
    FloorTracepoints,
}

impl Candidate {
    const ALL: [Candidate; 6] = [
        Candidate::SockOps,
        Candidate::Tracepoint,
        Candidate::TracepointSingle,
        Candidate::FloorSockOps,
        Candidate::FloorLookup,
        Candidate::FloorTracepoints,
    ];

    /// A floor: no counts, no stress run.
    fn floor(self) -> bool {
        matches!(
            self,
            Candidate::FloorSockOps | Candidate::FloorLookup | Candidate::FloorTracepoints
        )
    }

    fn name(self) -> &'static str {
        match self {
            Candidate::SockOps => "sock-ops",
            Candidate::Tracepoint => "tracepoint",
            Candidate::TracepointSingle => "tracepoint-single",
            Candidate::FloorSockOps => "floor-sock-ops",
            Candidate::FloorLookup => "floor-lookup",
            Candidate::FloorTracepoints => "floor-tracepoints",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Candidate::SockOps => "sock_ops at the root; flags as state, owner from sk_cgrp_data (default)",
            Candidate::Tracepoint => "state program + twin, storage per socket, destruction backstop (0.1)",
            Candidate::TracepointSingle => "the same without the twin",
            Candidate::FloorSockOps => "an empty sock_ops program at the root",
            Candidate::FloorLookup => "sock_ops's dispatch, flags and owner lookups, without the adds",
            Candidate::FloorTracepoints => {
                "empty programs: two on inet_sock_set_state, one on tcp_destroy_sock"
            }
        }
    }
}

/// Whatever holds a candidate attached during its window.
enum Held {
    /// An agent's pins (the agent stopped).
    Agent(Agent),
    /// `graceful-bench floor`, holding its programs until its stdin closes.
    Floor(Child),
}

impl Held {
    fn attach(c: Candidate, bins: &Bins, pins: &Path) -> anyhow::Result<Held> {
        let floor = |kind: &str| -> anyhow::Result<Held> {
            let mut child = Command::new(&bins.bench)
                .args(["floor", kind])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .context("start graceful-bench floor")?;
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
            if line.trim() != "attached" {
                let _ = child.kill();
                let _ = child.wait();
                bail!("graceful-bench floor {kind} did not attach");
            }
            Ok(Held::Floor(child))
        };
        match c {
            Candidate::FloorSockOps => floor("sock-ops"),
            Candidate::FloorLookup => floor("lookup"),
            Candidate::FloorTracepoints => floor("tracepoints"),
            _ => {
                let mut agent = Agent::new(&bins.graceful, pins)?;
                if c != Candidate::SockOps {
                    agent.extra_args = vec!["--counting".into(), "tracepoint".into()];
                }
                agent.start()?;
                agent.stop()?;
                if c == Candidate::TracepointSingle {
                    for p in agent.link_pins() {
                        let name = p.file_name().unwrap_or_default().to_string_lossy();
                        if name.starts_with("sock_state_twin-") {
                            std::fs::remove_file(&p).with_context(|| format!("unpin {}", p.display()))?;
                        }
                    }
                }
                Ok(Held::Agent(agent))
            }
        }
    }

    fn release(self) -> anyhow::Result<()> {
        match self {
            Held::Agent(mut a) => a.uninstall(),
            Held::Floor(mut child) => {
                drop(child.stdin.take());
                let status = child.wait()?;
                anyhow::ensure!(status.success(), "graceful-bench floor exited with {status}");
                Ok(())
            }
        }
    }
}

struct Bins {
    graceful: PathBuf,
    bench: PathBuf,
}

fn build() -> anyhow::Result<Bins> {
    let release = super::build_release(&["graceful-daemon", "graceful-tests"])?;
    Ok(Bins {
        graceful: release.join("graceful"),
        bench: crate::programs::build("graceful-bench", true)?,
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    args.sampling.check()?;
    let perf = find_perf()?;
    let bins = build()?;
    let cfg = args.sampling.config();
    let smp = &args.sampling;
    let dir = DataDir::create()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    println!(
        "== graceful's counting designs, side by side (perf record -a -g, {} Hz; the churn load: {} + {} threads on loopback)",
        smp.frequency, smp.concurrency, smp.concurrency
    );
    for c in Candidate::ALL {
        println!("  {:<18} {}", c.name(), c.describe());
    }
    println!(
        "{} rounds × (nothing, then each candidate in a rotating order) × {:.1} s\n",
        smp.rounds, smp.seconds
    );

    let n = Candidate::ALL.len();
    let mut shares: Vec<Vec<f64>> = vec![Vec::new(); n];
    // Per candidate, per path of `cost::PATHS`: its share in each round.
    let mut by_path: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); PATHS.len()]; n];
    let mut us: Vec<Vec<f64>> = vec![Vec::new(); n];
    for round in 0..smp.rounds as usize {
        super::check_interrupted()?;
        let (without, _) = sample(&perf, &cfg, &dir.path().join("none.data"), smp.frequency)?;
        let mut line = format!("round {}:", round + 1);
        for k in 0..n {
            let i = (k + round) % n;
            let c = Candidate::ALL[i];
            let held = Held::attach(c, &bins, &args.pin_dir)?;
            let with = sample(
                &perf,
                &cfg,
                &dir.path().join(format!("{}.data", c.name())),
                smp.frequency,
            );
            held.release()?;
            let (with, load) = with?;
            let share = graceful_share(&with, &without);
            shares[i].push(share);
            for (k, p) in PATHS.iter().enumerate() {
                by_path[i][k].push(with.busy_share(p.roots) - without.busy_share(p.roots));
            }
            us[i].push(us_per_connection(share, &with, &load, cpus));
            line.push_str(&format!(" {} {share:.2} %;", c.name()));
        }
        println!("{line}");
    }

    println!("\nby path, % of the busy CPU (median of the rounds):");
    print!("{:<50}", "path");
    for c in Candidate::ALL {
        print!(" {:>17}", c.name());
    }
    println!();
    for (k, p) in PATHS.iter().enumerate() {
        print!("{:<50}", p.label);
        for per in &by_path {
            print!(" {:>17.2}", Summary::of(&per[k]).map_or(0.0, |s| s.median));
        }
        println!();
    }

    let mut misses: Vec<Option<Value>> = vec![None; n];
    if args.stress_runs > 0 {
        println!(
            "\nthe softirq stress (the kernel test `nested`), {} runs per design, repair pass off:",
            args.stress_runs
        );
        for (i, c) in Candidate::ALL.iter().enumerate() {
            if c.floor() {
                continue;
            }
            super::check_interrupted()?;
            misses[i] = Some(stress(&bins, *c, &args)?);
        }
    }

    println!(
        "\n{:<18} {:>22} {:>20} {:>9} {:>12} {:>10} {:>10}",
        "design",
        "% busy CPU min/med/max",
        "µs/conn min/med/max",
        "ns/conn",
        "exact runs",
        "live off",
        "caught"
    );
    let mut rows = Vec::new();
    for (i, c) in Candidate::ALL.iter().enumerate() {
        let s = Summary::of(&shares[i]).expect("rounds > 0");
        let u = Summary::of(&us[i]).expect("rounds > 0");
        let m = &misses[i];
        let field = |k: &str| m.as_ref().and_then(|v| v[k].as_u64());
        let exact = match (field("exact_runs"), field("runs")) {
            (Some(e), Some(r)) => format!("{e}/{r}"),
            _ => "-".into(),
        };
        println!(
            "{:<18} {:>6.2} {:>6.2} {:>6.2}   {:>5.2} {:>5.2} {:>5.2}  {:>9.0} {:>12} {:>10} {:>10}",
            c.name(),
            s.min,
            s.median,
            s.max,
            u.min,
            u.median,
            u.max,
            u.median * 1000.0,
            exact,
            field("runs_with_live_drift").map_or("-".into(), |v| v.to_string()),
            field("caught").map_or("-".into(), |v| v.to_string()),
        );
        rows.push(json!({"design": c.name(), "pct": s.json(2), "us_per_conn": u.json(2), "stress": m}));
    }
    println!(
        "\n(live off: runs where a live count differed from ss; caught: changes the state programs missed and a \
         backstop handled)"
    );
    println!(
        "{}",
        json!({"bench": "designs", "rounds": smp.rounds, "seconds": smp.seconds, "designs": rows})
    );
    Ok(())
}

/// `graceful-bench nested` for `c`: its summary line.
fn stress(bins: &Bins, c: Candidate, args: &Args) -> anyhow::Result<Value> {
    let out = Command::new(&bins.bench)
        .args(["nested", c.name()])
        .args(["--runs", &args.stress_runs.to_string()])
        .args(["--connections", &args.stress_connections.to_string()])
        .env("GRACEFUL_BIN", &bins.graceful)
        .stderr(Stdio::inherit())
        .output()
        .context("run graceful-bench nested")?;
    let text = String::from_utf8_lossy(&out.stdout);
    anyhow::ensure!(
        out.status.success(),
        "graceful-bench nested {} failed ({}):\n{text}",
        c.name(),
        out.status
    );
    let summary = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["bench"] == "nested")
        .context("graceful-bench nested printed no summary")?;
    println!(
        "  {:<18} exact in {} of {} runs; live counts off in {}; {} outbound connections never counted; {} changes caught by a backstop",
        c.name(),
        summary["exact_runs"],
        summary["runs"],
        summary["runs_with_live_drift"],
        summary["outbound_short"],
        summary["caught"]
    );
    Ok(summary)
}
