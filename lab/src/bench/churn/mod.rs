//! `cargo xtask bench churn`: what graceful's programs cost a
//! connection-heavy node, as loopback connections per second with the
//! programs attached against detached.
//!
//! Rounds interleave the two conditions, and the order flips every round
//! (without→with, then with→without, …) so a drift of the machine's speed
//! cancels out in the per-round ratio. "with": a fresh `graceful daemon`
//! (started before, not during, the window). "without": the daemon stopped
//! and `graceful uninstall` run, and the kernel checked to have no
//! `sock_set_state` program loaded at all.
//!
//! `--compare PATH` adds a third window to every round, with another
//! `graceful` binary attached (a build of a change to the programs): its
//! ratio is printed beside the main agent's, measured in the same rounds,
//! so the machine's drift does not decide between the two.
//!
//! One more window, after the rounds, turns on the kernel's run-time
//! statistics of BPF programs and reports the time spent per connection
//! inside each program that runs on every connection (the sock_ops
//! program; both copies of the state program and the destruction backstop
//! where they are attached): the part of the cost the
//! programs' own code can change, measured without the noise of a
//! throughput ratio. The rest of the extra CPU is spent outside them.

use std::{path::PathBuf, time::Duration};

use anyhow::bail;
use serde_json::json;

use super::{
    agent::Agent,
    bpf,
    stats::Summary,
    tcp_load::{self, Config},
    AgentArgs,
};

mod inside;
mod round;

use inside::{measure_attached, settle_detached, sysctl, time_inside};
use round::{Cond, Round};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Rounds; each measures both conditions once.
    #[arg(long, default_value_t = 10)]
    pub rounds: u32,
    /// Length of each measurement window, in seconds.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Client threads (and as many server threads).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Unmeasured load before each window, in seconds.
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// Client source addresses 127.0.0.2 … 127.0.0.(1+N) (0: 127.0.0.1 only).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(0..=200))]
    pub sources: u8,
    /// Percentage of connections the client aborts with RST (SO_LINGER 0) instead of closing with FIN.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub rst_percent: u8,
    /// Pin directory of the agent under test.
    #[arg(long, default_value = "/sys/fs/bpf/graceful-bench")]
    pub pin_dir: PathBuf,
    /// Largest acceptable loss of connections per second, in percent (median ratio): 5, a
    /// ratio with/without of at least 0.95.
    #[arg(long, default_value_t = 5.0)]
    pub target_pct: f64,
    /// A round counts as undisturbed if other processes used at most this share of the CPUs, in percent.
    #[arg(long, default_value_t = 10.0)]
    pub max_others_pct: f64,
    /// A second `graceful` binary, measured in a third window of every
    /// round (with its own pin directory): its ratio against "without" is
    /// printed beside the main agent's. For judging a change to the
    /// programs side by side, in the same run.
    #[arg(long, value_name = "PATH")]
    pub compare: Option<PathBuf>,
    #[command(flatten)]
    pub agent: AgentArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.rounds == 0 || args.concurrency == 0 || args.seconds <= 0.0 {
        bail!("--rounds, --concurrency and --seconds must be positive");
    }
    let bin = args.agent.binary()?;
    let cfg = Config {
        concurrency: args.concurrency,
        sources: args.sources,
        rst_percent: args.rst_percent,
        warmup: Duration::from_secs_f64(args.warmup),
        window: Duration::from_secs_f64(args.seconds),
    };
    let mut agent = Agent::new(&bin, &args.pin_dir)?;
    let mut compared = match &args.compare {
        Some(path) => {
            let mut pins = args.pin_dir.clone().into_os_string();
            pins.push("-compare");
            Some(Agent::new(path, &PathBuf::from(pins))?)
        }
        None => None,
    };
    let profile = if cfg!(debug_assertions) {
        "dev (unoptimised)"
    } else {
        "release"
    };

    println!("== graceful churn bench: loopback TCP connections per second, programs attached vs detached");
    println!(
        "agent:      {} --pin-dir {}",
        bin.display(),
        args.pin_dir.display()
    );
    if let Some(path) = &args.compare {
        println!("compared:   {} (a third window each round)", path.display());
    }
    println!(
        "load:       {} client + {} server threads, connect → accept → client close → server close (read to EOF)",
        args.concurrency, args.concurrency
    );
    println!(
        "addresses:  server 127.0.0.1:<ephemeral>; clients bound to {} with IP_BIND_ADDRESS_NO_PORT; {}% closed with RST, the rest with FIN",
        if args.sources == 0 { "127.0.0.1 (kernel's choice)".to_string() } else { format!("127.0.0.2-127.0.0.{}", 1 + args.sources) },
        args.rst_percent
    );
    println!(
        "windows:    {} rounds × {} × {:.1} s (after {:.1} s warm-up each); {}",
        args.rounds,
        if args.compare.is_some() { 3 } else { 2 },
        args.seconds,
        args.warmup,
        if args.compare.is_some() {
            "each window comes first in turn"
        } else {
            "order flips every round"
        }
    );
    println!(
        "machine:    {} CPUs, load {}, tcp_tw_reuse={}, tcp_max_tw_buckets={}, ip_local_port_range={}; bench built {profile}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        super::loadavg(),
        sysctl("net.ipv4.tcp_tw_reuse"),
        sysctl("net.ipv4.tcp_max_tw_buckets"),
        sysctl("net.ipv4.ip_local_port_range"),
    );

    let foreign0 = settle_detached()?;
    if foreign0 > 0 {
        println!("WARNING: {foreign0} sock_set_state program(s) of another graceful are loaded (a test suite?): \"without\" is not clean");
    }
    // Bring TIME_WAIT and caches to their steady state before the first window.
    print!("priming (unmeasured load, 2 s)… ");
    let prime = tcp_load::measure(&Config {
        warmup: Duration::ZERO,
        window: Duration::from_secs(2),
        ..cfg.clone()
    })?;
    println!("{:.0} conn/s\n", prime.per_second());

    println!("columns: cpu µs/conn = CPU time of the bench process (its client and server threads and the kernel work");
    println!("         done in their context, the BPF programs included) per connection; other procs % = CPU used by");
    println!("         other user-space processes in the worse window of the round (disturbance; ≤ {:.0} % is undisturbed)", args.max_others_pct);
    println!(
        "{:>5}  {:<12} {:>10} {:>10} {:>8}  {:>9} {:>9} {:>8}  {:>7}  {:>8} {:>9} {:>7}",
        "round",
        "order",
        "without/s",
        "with/s",
        "ratio",
        "cpu w.o.",
        "cpu with",
        "cpu",
        "other",
        "agent",
        "agent",
        "foreign"
    );
    println!(
        "{:>5}  {:<12} {:>10} {:>10} {:>8}  {:>9} {:>9} {:>8}  {:>7}  {:>8} {:>9} {:>7}",
        "",
        "",
        "conn/s",
        "conn/s",
        "with/w.o",
        "µs/conn",
        "µs/conn",
        "with/w.o",
        "procs %",
        "ready ms",
        "counted",
        "progs"
    );
    let mut conds = vec![Cond::Without, Cond::With];
    if compared.is_some() {
        conds.push(Cond::Compared);
    }
    let mut rounds = Vec::new();
    for i in 0..args.rounds {
        super::check_interrupted()?;
        // Each condition comes first in turn: with two, the order flips
        // every round.
        let mut order = conds.clone();
        order.rotate_left(i as usize % conds.len());
        let (mut without, mut with, mut compared_out) = (None, None, None);
        let mut agent_ready = Duration::ZERO;
        let mut agent_counted = 0;
        let mut foreign = 0;
        for &cond in &order {
            match cond {
                Cond::Without => {
                    if agent.link_pinned() {
                        bail!("the agent's link is still pinned in a \"without\" window");
                    }
                    foreign = foreign.max(settle_detached()?);
                    without = Some(tcp_load::measure(&cfg)?);
                }
                Cond::With => {
                    let a = measure_attached(&mut agent, &cfg)?;
                    (agent_ready, agent_counted) = (a.ready, a.counted);
                    foreign = foreign.max(a.foreign);
                    with = Some(a.out);
                }
                Cond::Compared => {
                    let other = compared.as_mut().expect("only with --compare");
                    let a = measure_attached(other, &cfg)?;
                    foreign = foreign.max(a.foreign);
                    compared_out = Some(a.out);
                }
            }
        }
        let r = Round {
            without: without.expect("measured"),
            with: with.expect("measured"),
            compared: compared_out,
            order,
            agent_ready,
            agent_counted,
            foreign,
        };
        let errors = r.without.connect_errors + r.with.connect_errors;
        println!(
            "{:>5}  {:<12} {:>10.0} {:>10.0} {:>8.4}  {:>9.2} {:>9.2} {:>8.4}  {:>7.1}  {:>8.0} {:>9} {:>7}{}{}",
            i + 1,
            r.order_label(),
            r.without.per_second(),
            r.with.per_second(),
            r.ratio(),
            r.without.cpu_us_per_conn(),
            r.with.cpu_us_per_conn(),
            r.cpu_ratio(),
            r.others_pct(),
            r.agent_ready.as_secs_f64() * 1e3,
            r.agent_counted,
            r.foreign,
            if r.clean(args.max_others_pct) { "" } else { "  (disturbed)" },
            if errors > 0 { format!("  ({errors} failed connects)") } else { String::new() },
        );
        if let (Some(c), Some(ratio), Some(cpu)) = (r.compared, r.compared_ratio(), r.compared_cpu_ratio()) {
            println!(
                "{:>5}  {:<12} {:>10} {:>10.0} {:>8.4}  {:>9} {:>9.2} {:>8.4}",
                "",
                "  compared",
                "",
                c.per_second(),
                ratio,
                "",
                c.cpu_us_per_conn(),
                cpu
            );
        }
        rounds.push(r);
    }
    drop(compared);

    super::check_interrupted()?;
    let inside = time_inside(&mut agent, &cfg)?;

    let pick = |f: &dyn Fn(&Round) -> f64, only_clean: bool| -> Vec<f64> {
        rounds
            .iter()
            .filter(|r| !only_clean || r.clean(args.max_others_pct))
            .map(f)
            .collect()
    };
    let sw = Summary::of(&pick(&|r| r.without.per_second(), false)).expect("rounds > 0");
    let sa = Summary::of(&pick(&|r| r.with.per_second(), false)).expect("rounds > 0");
    let sr = Summary::of(&pick(&Round::ratio, false)).expect("rounds > 0");
    let cw = Summary::of(&pick(&|r| r.without.cpu_us_per_conn(), false)).expect("rounds > 0");
    let ca = Summary::of(&pick(&|r| r.with.cpu_us_per_conn(), false)).expect("rounds > 0");
    let cr = Summary::of(&pick(&Round::cpu_ratio, false)).expect("rounds > 0");
    let clean = pick(&Round::ratio, true);
    let clean_sr = Summary::of(&clean);
    let clean_cr = Summary::of(&pick(&Round::cpu_ratio, true));
    let overhead = (1.0 - sr.median) * 100.0;
    let pass = overhead <= args.target_pct;
    let errors: u64 = rounds
        .iter()
        .map(|r| r.without.connect_errors + r.with.connect_errors)
        .sum();
    println!();
    println!(
        "{:<34} {:>10} {:>10} {:>10}",
        "all rounds", "min", "median", "max"
    );
    let row = |name: &str, s: &Summary, d: usize| {
        println!("{name:<34} {:>10.d$} {:>10.d$} {:>10.d$}", s.min, s.median, s.max);
    };
    row("conn/s without programs", &sw, 0);
    row("conn/s with programs", &sa, 0);
    row("ratio with/without (conn/s)", &sr, 4);
    row("CPU µs per connection, without", &cw, 2);
    row("CPU µs per connection, with", &ca, 2);
    row("ratio with/without (CPU/conn)", &cr, 4);
    let compared_ratios: Vec<f64> = rounds.iter().filter_map(Round::compared_ratio).collect();
    let compared_sr = Summary::of(&compared_ratios);
    let compared_cr = Summary::of(
        &rounds
            .iter()
            .filter_map(Round::compared_cpu_ratio)
            .collect::<Vec<_>>(),
    );
    if let (Some(s), Some(c)) = (&compared_sr, &compared_cr) {
        row("compared agent: ratio (conn/s)", s, 4);
        row("compared agent: ratio (CPU/conn)", c, 4);
        let wins = rounds
            .iter()
            .filter(|r| r.compared_ratio().is_some_and(|c| c > r.ratio()))
            .count();
        println!(
            "compared agent faster than the main one in {wins} of {} rounds",
            rounds.len()
        );
    }
    if let (Some(s), Some(c)) = (clean_sr, clean_cr) {
        println!(
            "undisturbed rounds only ({} of {}: other processes ≤ {:.0} % CPU and no other graceful loaded):",
            clean.len(),
            rounds.len(),
            args.max_others_pct
        );
        row("  ratio with/without (conn/s)", &s, 4);
        row("  ratio with/without (CPU/conn)", &c, 4);
    } else {
        println!(
            "no undisturbed round (other processes ≤ {:.0} % CPU and no other graceful loaded)",
            args.max_others_pct
        );
    }
    println!(
        "cost: {overhead:.2} % fewer connections per second (median of all per-round ratios); target at most {:.1} %: {}",
        args.target_pct,
        if pass { "PASS" } else { "FAIL" }
    );
    let extra = Summary::of(&pick(
        &|r| r.with.cpu_us_per_conn() - r.without.cpu_us_per_conn(),
        false,
    ))
    .expect("rounds > 0");
    println!(
        "      {:.2} % more CPU per connection (median ratio), {:.2} µs more per connection (median difference;",
        (cr.median - 1.0) * 100.0,
        extra.median
    );
    println!("      a connection is 2 sockets and about 10 state changes)");
    println!(
        "inside the program (kernel run-time stats, one more {:.1} s window, kept out of the ratios):",
        args.seconds
    );
    for (name, (ns, runs)) in bpf::PER_CONNECTION_PROGRAMS.iter().zip(inside.programs) {
        println!(
            "      {name:<16} {ns:>5.0} ns per run × {runs:>5.2} runs per connection = {:.2} µs per connection",
            ns * runs / 1e3
        );
    }
    println!(
        "      {:<16} {:>5.0} ns per run × {:>5.2} runs per connection = {:.2} µs per connection (the stats' own clock reads included)",
        "all",
        inside.ns_per_run(),
        inside.runs_per_conn(),
        inside.us_per_conn()
    );
    println!(
        "      the rest of the extra CPU is outside the programs: their dispatch, and (under the tracepoint"
    );
    println!(
        "      design) each socket's storage; `cargo xtask bench churn-cost` splits it all by kernel path"
    );
    if errors > 0 {
        println!("note: {errors} connect() calls failed in total (port exhaustion?)");
    }
    println!(
        "TIME_WAIT sockets at the end: {}; load at the end: {}",
        tcp_load::time_wait_sockets().map_or("?".into(), |n| n.to_string()),
        super::loadavg()
    );
    drop(agent);

    let r4 = |x: f64| (x * 1e4).round() / 1e4;
    let summary = json!({
        "bench": "churn",
        "rounds": args.rounds,
        "seconds": args.seconds,
        "concurrency": args.concurrency,
        "sources": args.sources,
        "rst_percent": args.rst_percent,
        "conn_per_s_without": sw.json(0),
        "conn_per_s_with": sa.json(0),
        "ratio_with_without": sr.json(4),
        "cpu_us_per_conn_without": cw.json(3),
        "cpu_us_per_conn_with": ca.json(3),
        "cpu_ratio_with_without": cr.json(4),
        "extra_cpu_us_per_conn": extra.json(3),
        "inside_program_ns_per_run": (inside.ns_per_run() * 10.0).round() / 10.0,
        "inside_program_runs_per_conn": (inside.runs_per_conn() * 100.0).round() / 100.0,
        "inside_per_program": bpf::PER_CONNECTION_PROGRAMS.iter().zip(inside.programs).map(|(name, (ns, runs))| json!({
            "program": name,
            "ns_per_run": (ns * 10.0).round() / 10.0,
            "runs_per_conn": (runs * 100.0).round() / 100.0,
        })).collect::<Vec<_>>(),
        "inside_program_us_per_conn": (inside.us_per_conn() * 1000.0).round() / 1000.0,
        "per_round_ratio": rounds.iter().map(|r| r4(r.ratio())).collect::<Vec<_>>(),
        "compared_ratio_with_without": compared_sr.map(|s| s.json(4)),
        "compared_cpu_ratio_with_without": compared_cr.map(|s| s.json(4)),
        "per_round_compared_ratio": compared_ratios.iter().map(|x| r4(*x)).collect::<Vec<_>>(),
        "per_round_others_cpu_pct": rounds.iter().map(|r| (r.others_pct() * 10.0).round() / 10.0).collect::<Vec<_>>(),
        "undisturbed_rounds": clean.len(),
        "undisturbed_ratio_with_without": clean_sr.map(|s| s.json(4)),
        "undisturbed_cpu_ratio_with_without": clean_cr.map(|s| s.json(4)),
        "overhead_pct_median": (overhead * 100.0).round() / 100.0,
        "target_max_overhead_pct": args.target_pct,
        "pass": pass,
        "rounds_with_other_graceful": rounds.iter().filter(|r| r.foreign > 0).count(),
        "failed_connects": errors,
        "bench_profile": profile,
    });
    println!("{summary}");
    Ok(())
}
