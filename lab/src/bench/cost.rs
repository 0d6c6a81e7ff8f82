//! `cargo xtask bench churn-cost`: where the churn bench's extra CPU goes,
//! by kernel path, from CPU samples (`perf record -a -g`) under the churn
//! load with the agent attached and without.
//!
//! The churn bench's ratio swings by ±15 points from one round to the next
//! on a small machine, so a few points of change are lost in its noise.
//! Samples attribute the cost instead: each of graceful's paths is a
//! kernel function whose whole call tree (its "children" share) is
//! graceful's work, and tens of thousands of samples put its share of the
//! busy CPU time within a fraction of a point. Each share is the "with"
//! window's minus the "without" window's, so another tool's programs on
//! the same tracepoints are not counted as ours.
//!
//! The paths:
//! - the state tracepoint: both copies of the state program with their
//!   dispatch, shown with each copy's share and the share that creates
//!   sockets' storage;
//! - the destruction backstop with its dispatch;
//! - the storage's clone into each accepted connection, and its free when
//!   a socket ends;
//! - the deferred frees that follow (kfree_rcu batches).
//!
//! With the CPUs saturated by the load, as here, the summed share is the
//! connection rate lost: a cost of s % of the busy time leaves about
//! (100 − s) % of the connections per second. Only time inside these
//! paths is counted: what they cost the rest of the kernel (caches, lock
//! contention) is not, and the churn bench's ratio includes it.

use std::{
    collections::HashMap,
    os::unix::process::ExitStatusExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{bail, Context as _};
use serde_json::json;

use super::{
    agent::Agent,
    stats::Summary,
    tcp_load::{self, Config, Outcome},
    AgentArgs,
};

/// The churn load under perf, as `churn-cost` and `designs` sample it.
#[derive(Debug, clap::Args)]
pub struct Sampling {
    /// Rounds; each samples one window without graceful and one with each
    /// thing measured.
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Length of each sampled window, in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Client threads (and as many server threads).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Client source addresses 127.0.0.2 … 127.0.0.(1+N) (0: 127.0.0.1 only).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(0..=200))]
    pub sources: u8,
    /// Sampling frequency per CPU, in Hz.
    #[arg(long, default_value_t = 4000)]
    pub frequency: u32,
}

impl Sampling {
    pub fn check(&self) -> anyhow::Result<()> {
        if self.rounds == 0 || self.concurrency == 0 || self.seconds <= 0.0 {
            bail!("--rounds, --concurrency and --seconds must be positive");
        }
        Ok(())
    }

    /// The load of one window.
    pub fn config(&self) -> Config {
        Config {
            concurrency: self.concurrency,
            sources: self.sources,
            rst_percent: 0,
            warmup: Duration::from_millis(500),
            window: Duration::from_secs_f64(self.seconds),
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub sampling: Sampling,
    /// Pin directory of the agent under test.
    #[arg(long, default_value = "/sys/fs/bpf/graceful-bench")]
    pub pin_dir: PathBuf,
    /// Largest acceptable loss of connections per second, in percent.
    #[arg(long, default_value_t = 4.0)]
    pub target_pct: f64,
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// One of graceful's kernel paths: the functions whose call trees make it.
/// A part of an earlier path is shown under it and not summed again.
pub(super) struct KernelPath {
    pub label: &'static str,
    pub roots: &'static [&'static str],
    pub part_of_previous: bool,
}

/// A root written `prog:<name>` is a BPF program: its symbol is
/// `bpf_prog_<tag>_<name>`, and the tag changes with every build.
pub(super) const PATHS: &[KernelPath] = &[
    KernelPath {
        label: "sock_ops program and its dispatch",
        roots: &["__cgroup_bpf_run_filter_sock_ops"],
        part_of_previous: false,
    },
    KernelPath {
        label: "  of which: the program (its code and helpers)",
        roots: &["prog:sock_ops"],
        part_of_previous: true,
    },
    KernelPath {
        label: "state tracepoint: both copies and their dispatch",
        // With one program attached, the tracepoint calls its dispatcher
        // directly; with more, through the iterator, which calls it for
        // each: the larger of the two is the whole. (The container-exit
        // program's tracepoint has three arguments too, and fires once per
        // container exit: nothing under this load.)
        roots: &["__traceiter_inet_sock_set_state", "bpf_trace_run3"],
        part_of_previous: false,
    },
    KernelPath {
        label: "  of which: the first copy (its code and helpers)",
        roots: &["prog:sock_set_state"],
        part_of_previous: true,
    },
    KernelPath {
        label: "    of which: creating a socket's storage",
        roots: &["bpf_local_storage_update"],
        part_of_previous: true,
    },
    KernelPath {
        label: "  of which: the second copy",
        roots: &["prog:sock_state_twin"],
        part_of_previous: true,
    },
    KernelPath {
        label: "destruction backstop and its dispatch",
        // Its tracepoint's stub jumps to the dispatcher: no frame of its own.
        roots: &["bpf_trace_run1"],
        part_of_previous: false,
    },
    KernelPath {
        label: "storage cloned into each accepted connection",
        roots: &["bpf_sk_storage_clone"],
        part_of_previous: false,
    },
    KernelPath {
        label: "storage freed when a socket ends",
        roots: &["bpf_sk_storage_free"],
        part_of_previous: false,
    },
    KernelPath {
        // The storage is freed with kfree_rcu; the batches' work is ours.
        // (Other RCU callbacks vary too much under this load to subtract.)
        label: "deferred frees (kfree_rcu batches)",
        roots: &["kfree_rcu_work"],
        part_of_previous: false,
    },
];

/// Inclusive ("children") share of every sampled symbol, in percent of
/// all samples; the idle share is `do_idle`'s.
pub(super) struct Profile {
    children: HashMap<String, f64>,
}

impl Profile {
    fn share(&self, roots: &[&str]) -> f64 {
        roots
            .iter()
            .map(|r| match r.strip_prefix("prog:") {
                Some(name) => self
                    .children
                    .iter()
                    .filter(|(sym, _)| is_program(sym, name))
                    .map(|(_, pct)| pct)
                    .sum(),
                None => self.children.get(*r).copied().unwrap_or(0.0),
            })
            // A path's roots are alternatives, or nest: the largest share
            // holds the others.
            .fold(0.0, f64::max)
    }

    /// Percent of all samples the CPUs were idle.
    pub fn idle(&self) -> f64 {
        self.share(&["do_idle"])
    }

    /// `roots`' share of the busy (non-idle) samples, in percent.
    pub fn busy_share(&self, roots: &[&str]) -> f64 {
        let busy = 100.0 - self.idle();
        if busy <= 0.0 {
            return 0.0;
        }
        self.share(roots) * 100.0 / busy
    }
}

/// Every graceful path's share of the busy CPU, "with" minus "without".
pub(super) fn graceful_share(with: &Profile, without: &Profile) -> f64 {
    PATHS
        .iter()
        .filter(|p| !p.part_of_previous)
        .map(|p| with.busy_share(p.roots) - without.busy_share(p.roots))
        .sum()
}

/// `share` % of the busy CPU time of the window `with` sampled, spread over
/// the connections its load made, in µs.
pub(super) fn us_per_connection(share: f64, with: &Profile, load: &Outcome, cpus: f64) -> f64 {
    let busy_us = (1.0 - with.idle() / 100.0) * cpus * load.elapsed.as_secs_f64() * 1e6;
    share / 100.0 * busy_us / load.completed.max(1) as f64
}

/// A directory for perf's data files, removed when dropped.
pub(super) struct DataDir(PathBuf);

impl DataDir {
    pub fn create() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("graceful-churn-cost-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(Self(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether `sym` is the BPF program `name`: `bpf_prog_<16 hex digits>_<name>`.
fn is_program(sym: &str, name: &str) -> bool {
    sym.strip_prefix("bpf_prog_")
        .and_then(|rest| rest.split_once('_'))
        .is_some_and(|(tag, rest)| {
            tag.len() == 16 && tag.bytes().all(|b| b.is_ascii_hexdigit()) && rest == name
        })
}

/// `perf record` running system-wide until stopped.
pub(super) struct Recorder {
    child: Child,
}

impl Recorder {
    pub fn start(perf: &Path, out: &Path, frequency: u32) -> anyhow::Result<Self> {
        let child = Command::new(perf)
            .args(["record", "-a", "-g", "-q", "-F"])
            .arg(frequency.to_string())
            .arg("-o")
            .arg(out)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {} record", perf.display()))?;
        // perf opens its events before it writes anything: give it a moment.
        std::thread::sleep(Duration::from_millis(300));
        Ok(Self { child })
    }

    pub fn stop(mut self) -> anyhow::Result<()> {
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        let status = self.child.wait().context("wait for perf record")?;
        // perf writes its data on SIGINT, then dies of it again on purpose.
        let interrupted = status.code() == Some(130) || status.signal() == Some(libc::SIGINT);
        if !status.success() && !interrupted {
            let mut err = String::new();
            if let Some(mut e) = self.child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            bail!("perf record failed ({status}): {}", err.trim());
        }
        Ok(())
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The churn load under `perf record`, then the profile of that window.
pub(super) fn sample(
    perf: &Path,
    cfg: &Config,
    out: &Path,
    frequency: u32,
) -> anyhow::Result<(Profile, Outcome)> {
    let rec = Recorder::start(perf, out, frequency)?;
    let load = tcp_load::measure(cfg);
    rec.stop()?;
    let load = load?;
    Ok((report(perf, out)?, load))
}

pub(super) fn report(perf: &Path, data: &Path) -> anyhow::Result<Profile> {
    let out = Command::new(perf)
        .args([
            "report",
            "--children",
            "--sort",
            "sym",
            "-g",
            "none",
            "--stdio",
            "--percent-limit",
            "0",
            "-i",
        ])
        .arg(data)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .context("run perf report")?;
    if !out.status.success() {
        bail!("perf report failed ({})", out.status);
    }
    let children = parse_report(&String::from_utf8_lossy(&out.stdout));
    if children.is_empty() {
        bail!("perf report gave no samples for {}", data.display());
    }
    Ok(Profile { children })
}

/// Lines such as `  5.41%  1.39%  [k] bpf_trace_run3`: symbol → children %.
fn parse_report(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(children), Some(_self), Some(_kind), Some(sym)) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            continue;
        };
        let Some(children) = children.strip_suffix('%').and_then(|c| c.parse::<f64>().ok()) else {
            continue;
        };
        // A symbol may appear once per binary it was seen in: add them up.
        *out.entry(sym.to_string()).or_insert(0.0) += children;
    }
    out
}

pub(super) fn find_perf() -> anyhow::Result<PathBuf> {
    let ok = Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        bail!("perf is not installed: apt-get install linux-perf (only this bench needs it)");
    }
    Ok(PathBuf::from("perf"))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    args.sampling.check()?;
    let perf = find_perf()?;
    let bin = args.agent.binary()?;
    let cfg = args.sampling.config();
    let smp = &args.sampling;
    let dir = DataDir::create()?;
    let mut agent = Agent::new(&bin, &args.pin_dir)?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;

    println!(
        "== graceful churn cost: where the extra CPU goes, by kernel path (perf record -a -g, {} Hz)",
        smp.frequency
    );
    println!(
        "agent:      {} --pin-dir {}",
        bin.display(),
        args.pin_dir.display()
    );
    println!(
        "load:       the churn bench's: {} client + {} server threads on loopback; {} rounds × (without, with) × {:.1} s",
        smp.concurrency, smp.concurrency, smp.rounds, smp.seconds
    );
    println!(
        "shares:     of the busy CPU time, \"with\" minus \"without\", each path with everything it calls\n"
    );

    // Per round: each path's share, the sum, the idle shares, the rates.
    let mut shares: Vec<Vec<f64>> = vec![Vec::new(); PATHS.len()];
    let mut totals = Vec::new();
    let mut us_per_conn = Vec::new();
    for round in 0..smp.rounds {
        super::check_interrupted()?;
        let (without, load_without) = sample(&perf, &cfg, &dir.path().join("without.data"), smp.frequency)?;
        agent.start()?;
        let with = sample(&perf, &cfg, &dir.path().join("with.data"), smp.frequency);
        agent.stop()?;
        agent.uninstall()?;
        let (with, load_with) = with?;
        for (k, p) in PATHS.iter().enumerate() {
            shares[k].push(with.busy_share(p.roots) - without.busy_share(p.roots));
        }
        let total = graceful_share(&with, &without);
        totals.push(total);
        let us = us_per_connection(total, &with, &load_with, cpus);
        us_per_conn.push(us);
        println!(
            "round {}: graceful {total:.2} % of the busy CPU, {us:.2} µs per connection; idle {:.1} % without, {:.1} % with; {:.0} → {:.0} conn/s",
            round + 1,
            without.idle(),
            with.idle(),
            load_without.per_second(),
            load_with.per_second(),
        );
    }
    drop(agent);

    println!(
        "\n{:<58} {:>7} {:>7} {:>7}",
        "path (% of busy CPU, with − without)", "min", "median", "max"
    );
    let mut json_paths = Vec::new();
    for (p, s) in PATHS.iter().zip(&shares) {
        let sm = Summary::of(s).expect("rounds > 0");
        println!(
            "{:<58} {:>7.2} {:>7.2} {:>7.2}",
            p.label, sm.min, sm.median, sm.max
        );
        json_paths.push(json!({"path": p.label.trim().trim_start_matches("of which: "), "part_of_previous": p.part_of_previous, "roots": p.roots, "pct": sm.json(2)}));
    }
    let t = Summary::of(&totals).expect("rounds > 0");
    println!(
        "{:<58} {:>7.2} {:>7.2} {:>7.2}",
        "all of graceful's paths", t.min, t.median, t.max
    );
    let us = Summary::of(&us_per_conn).expect("rounds > 0");
    println!(
        "{:<58} {:>7.2} {:>7.2} {:>7.2}",
        "the same, in CPU µs per connection (2 sockets)", us.min, us.median, us.max
    );
    println!(
        "{:<58} {:>7.0} {:>7.0} {:>7.0}",
        "the same, in CPU ns per connection (open + close)",
        us.min * 1000.0,
        us.median * 1000.0,
        us.max * 1000.0
    );
    let pass = t.median <= args.target_pct;
    println!(
        "\ncost: {:.2} % of the busy CPU (median), so about {:.2} % fewer connections per second with the CPUs saturated;",
        t.median, t.median
    );
    println!(
        "      target at most {:.1} %: {}",
        args.target_pct,
        if pass { "PASS" } else { "FAIL" }
    );
    println!(
        "{}",
        json!({
            "bench": "churn-cost",
            "rounds": smp.rounds,
            "seconds": smp.seconds,
            "frequency_hz": smp.frequency,
            "paths": json_paths,
            "total_pct": t.json(2),
            "us_per_conn": us.json(2),
            "target_max_overhead_pct": args.target_pct,
            "pass": pass,
        })
    );
    Ok(())
}

#[cfg(test)]
mod tests;
