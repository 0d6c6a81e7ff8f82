//! `cargo xtask bench memory`: the agent's resident memory and the kernel
//! memory of its maps with many live connections across many cgroups.
//!
//! Each cgroup gets one worker process (the xtask binary itself, moved into
//! the cgroup before exec) that listens on its own 127.200.x.y address and
//! holds N/cgroups connections to itself: N inbound + N outbound live
//! connections in all. Phases:
//! 1. idle: a fresh agent, nothing open yet;
//! 2. live: the connections opened while the agent runs; three of the
//!    agent's repair passes over every tracked socket are timed (the
//!    bench runs it with `--repair-interval 1s`);
//! 3. restart: the agent stopped and started again on its pins;
//! 4. cold: the agent stopped, `graceful uninstall`, started again: every
//!    socket is pre-existing and must be adopted;
//! 5. keeper: the agent started again under its keeper (`--keeper on`, as
//!    the DaemonSet runs it), the keeper's memory beside the agent's.
//!
//! The agent measured is the static build the image ships
//! (`x86_64-unknown-linux-musl`, musl's allocator); the dev build
//! (`target/release/graceful`, glibc's) is measured idle beside it, since
//! an allocator that keeps what a start-up freed makes a different figure.
//!
//! Each phase checks the counts of `graceful cgroups -o json` against what
//! the workers hold, and reads what the agent's own memory cgroup was
//! charged (graceful-test-support's `memcg`): its RSS plus the kernel memory of its maps and of
//! every socket's storage, which is what its memory limit must hold.

use std::{
    collections::BTreeMap,
    io::{BufRead as _, BufReader},
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::bail;
use graceful_test_support::memcg::MemCgroup;
use serde_json::json;

use super::{
    agent::{Agent, Started},
    bpf::{self},
    cgroup::Cgroups,
    AgentArgs,
};

mod figures;
mod process;
mod workers;

use figures::{bytes_mib, print_maps, sk_storage_charged, Charge, Counts};
use process::{mib, ProcMem};
use workers::{raise_own_nofile, spawn_worker, worker_addr, Workers};

const PREFIX: &str = "graceful-bench-mem-";
const PORT: u16 = 7100;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Live connections in all (each has an inbound and an outbound socket).
    #[arg(long, default_value_t = 100_000)]
    pub connections: usize,
    /// Cgroups to spread them over (one worker process each).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub cgroups: u64,
    /// Pin directory of the agent under test.
    #[arg(long, default_value = "/sys/fs/bpf/graceful-bench-mem")]
    pub pin_dir: PathBuf,
    /// Largest acceptable agent VmRSS, idle and with every connection open, in MiB.
    #[arg(long, default_value_t = 20.0)]
    pub target_rss_mib: f64,
    /// Largest acceptable keeper VmRSS, in MiB.
    #[arg(long, default_value_t = 4.0)]
    pub target_keeper_mib: f64,
    #[command(flatten)]
    pub agent: AgentArgs,
}

struct Phase {
    name: &'static str,
    /// The agent's.
    mem: ProcMem,
    /// Its keeper's, when it runs under one.
    keeper: Option<ProcMem>,
    /// Charged to the agent's memory cgroup: in all, and kernel memory.
    memcg: Charge,
    started: Option<Started>,
    counts: Option<Counts>,
}

/// Starts the agent on whatever is pinned (or not), lets it settle, then
/// prints and returns its readiness, memory and counts as phase `name`.
fn start_and_measure(
    agent: &mut Agent,
    memcg: &MemCgroup,
    name: &'static str,
    per: &BTreeMap<String, u64>,
    connections: usize,
    ncg: usize,
) -> anyhow::Result<Phase> {
    let started = agent.start()?;
    super::sleep(Duration::from_secs(1))?;
    let counts = Counts::read(agent, per)?;
    let (mem, keeper) = measure(agent)?;
    let charge = Charge::read(memcg)?;
    let tag = format!("[{name}]");
    println!(
        "{tag:<9} ready in {:.0} ms (adoption pass {} ms over {} offered sockets; maps reused: {})",
        started.ready_after.as_secs_f64() * 1e3,
        started.adopt_ms.map_or("?".into(), |m| m.to_string()),
        started.offered.map_or("?".into(), |m| m.to_string()),
        started.reused_maps.map_or("?".into(), |m| m.to_string()),
    );
    println!("{tag:<9} agent: {}", mem.line());
    if let Some(k) = &keeper {
        println!("{tag:<9} keeper: {}", k.line());
    }
    println!("{tag:<9} {}", counts.line(connections, ncg));
    println!("{tag:<9} {}", charge.line());
    Ok(Phase {
        name,
        mem,
        keeper,
        memcg: charge,
        started: Some(started),
        counts: Some(counts),
    })
}

/// The agent's memory, and its keeper's when it runs under one (then
/// the process started is the keeper, and the agent its child).
fn measure(agent: &Agent) -> anyhow::Result<(ProcMem, Option<ProcMem>)> {
    let pid = agent.pid().expect("running");
    if !agent.extra_args.iter().any(|a| a == "--keeper") {
        return Ok((ProcMem::read(pid)?, None));
    }
    let child = match process::children(pid)?.as_slice() {
        [one] => *one,
        other => bail!(
            "the keeper ({pid}) runs {} children, not its one agent",
            other.len()
        ),
    };
    Ok((ProcMem::read(child)?, Some(ProcMem::read(pid)?)))
}

/// The dev build's memory, idle, for comparison (nothing open, its own
/// pins, not in the bench's memory cgroup).
fn dev_build_idle(dev: &std::path::Path, pins: &std::path::Path) -> anyhow::Result<ProcMem> {
    // bpffs takes no dot in a name.
    let name = pins.file_name().unwrap_or_default().to_string_lossy();
    let mut agent = Agent::new(dev, &pins.with_file_name(format!("{name}-dev")))?;
    agent.start()?;
    super::sleep(Duration::from_secs(1))?;
    let mem = ProcMem::read(agent.pid().expect("running"));
    drop(agent);
    mem
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let ncg = args.cgroups as usize;
    if args.connections < ncg {
        bail!("--connections must be at least --cgroups");
    }
    raise_own_nofile();
    let dev = args.agent.binary()?;
    let bin = args.agent.static_binary()?;
    let dev_idle = dev_build_idle(&dev, &args.pin_dir)?;
    // Dropped in reverse order: workers, then cgroups, then the agent (stop + uninstall).
    // Declared first, so dropped last: after the agent has stopped.
    let memcg = MemCgroup::create("graceful-bench-agent")?;
    let mut agent = Agent::new(&bin, &args.pin_dir)?;
    agent.repair_every("1s");
    agent.in_cgroup(memcg.dir());
    let cg = Cgroups::create(PREFIX, ncg)?;
    let mut workers = Workers { children: Vec::new() };

    println!(
        "== graceful memory bench: {} live connections across {ncg} cgroups",
        args.connections
    );
    println!(
        "agent:    {} --pin-dir {}, in memory cgroup {} ({})",
        bin.display(),
        args.pin_dir.display(),
        memcg.dir().display(),
        memcg.version()
    );
    println!(
        "cgroups:  {}/{PREFIX}0 … {PREFIX}{}, one worker each listening on 127.200.<i/250>.<i%250+1>:{PORT} and connected to itself",
        cg.mount.display(),
        ncg - 1
    );
    println!(
        "machine:  {} CPUs, load {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        super::loadavg()
    );
    let mut phases: Vec<Phase> = Vec::new();

    // 1. idle
    let started = agent.start()?;
    let pid = agent.pid().expect("running");
    super::sleep(Duration::from_secs(1))?;
    let mem = ProcMem::read(pid)?;
    println!(
        "\n[idle]    agent ready in {:.0} ms; {}",
        started.ready_after.as_secs_f64() * 1e3,
        mem.line()
    );
    let idle_charge = Charge::read(&memcg)?;
    println!("[idle]    {}", idle_charge.line());
    let idle_maps = bpf::maps_of(pid, &args.pin_dir)?;
    phases.push(Phase {
        name: "idle",
        mem,
        keeper: None,
        memcg: idle_charge,
        started: Some(started),
        counts: None,
    });

    // 2. live: open the connections while the agent runs.
    let mut per = BTreeMap::new();
    let t0 = Instant::now();
    for (i, dir) in cg.dirs.iter().enumerate() {
        super::check_interrupted()?;
        let n = args.connections / ncg + usize::from(i < args.connections % ncg);
        let mut child = spawn_worker(dir, &worker_addr(i), n)?;
        let stdin = child.stdin.take();
        workers.children.push((child, stdin));
        per.insert(cg.relative(dir), n as u64);
    }
    for (i, (child, _)) in workers.children.iter_mut().enumerate() {
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("piped")).read_line(&mut line)?;
        if !line.starts_with("ready") {
            bail!("worker {i} ({}) failed before it was ready", worker_addr(i));
        }
    }
    super::check_interrupted()?;
    println!(
        "[open]    {} workers hold {} connections ({} sockets) after {:.1} s",
        ncg,
        args.connections,
        2 * args.connections,
        t0.elapsed().as_secs_f64()
    );
    super::sleep(Duration::from_secs(1))?;
    let counts = Counts::read(&agent, &per)?;
    println!("[live]    {}", counts.line(args.connections, ncg));
    let mem = ProcMem::read(pid)?;
    println!("[live]    agent: {}", mem.line());
    let live_charge = Charge::read(&memcg)?;
    println!("[live]    {}", live_charge.line());
    let mut repairs: Vec<f64> = (0..3)
        .filter_map(|_| agent.next_repair_ms(Duration::from_secs(10)))
        .collect();
    repairs.sort_by(f64::total_cmp);
    match repairs.as_slice() {
        [] => println!("[live]    repair pass: none logged within 10 s (is the agent older than --repair-interval?)"),
        r => println!(
            "[live]    repair pass over every tracked socket: {:.0} / {:.0} / {:.0} ms (min / median / max of {})",
            r[0],
            r[r.len() / 2],
            r[r.len() - 1],
            r.len()
        ),
    }
    let live_maps = bpf::maps_of(pid, &args.pin_dir)?;
    let storage = sk_storage_charged()?;
    // Every attached graceful keeps its own storage on every socket.
    let mut foreign = bpf::state_programs_loaded()?.saturating_sub(1);
    let (storage_sockets, storage_bytes) = storage
        .iter()
        .fold((0, 0), |(n, b), c| (n + c.sockets, b + c.bytes));
    phases.push(Phase {
        name: "live",
        mem,
        keeper: None,
        memcg: live_charge,
        started: None,
        counts: Some(counts),
    });

    // 3. restart on the pins.
    agent.stop()?;
    phases.push(start_and_measure(
        &mut agent,
        &memcg,
        "restart",
        &per,
        args.connections,
        ncg,
    )?);

    // 4. cold start: nothing pinned, every socket must be adopted.
    agent.stop()?;
    agent.uninstall()?;
    let cold = start_and_measure(&mut agent, &memcg, "cold", &per, args.connections, ncg)?;
    let cold_storage = sk_storage_charged()?;
    foreign = foreign.max(bpf::state_programs_loaded()?.saturating_sub(1));
    let cold_storage_bytes: u64 = cold_storage.iter().map(|c| c.bytes).sum();
    phases.push(cold);

    // 5. under a keeper, as the DaemonSet runs it: the same pins again.
    agent.stop()?;
    agent.extra_args = vec!["--keeper".into(), "on".into()];
    phases.push(start_and_measure(
        &mut agent,
        &memcg,
        "keeper",
        &per,
        args.connections,
        ncg,
    )?);

    // Closing: every count goes back to zero.
    let t0 = Instant::now();
    workers.stop();
    let drained = loop {
        let c = Counts::read(&agent, &per)?;
        if c.inbound == 0 && c.outbound == 0 && c.listeners == 0 {
            break Some(t0.elapsed());
        }
        if t0.elapsed() > Duration::from_secs(20) {
            println!(
                "[closed]  still counted 20 s after the workers exited: {}",
                c.line(0, 0)
            );
            break None;
        }
        super::sleep(Duration::from_millis(100))?;
    };
    if let Some(d) = drained {
        println!(
            "[closed]  workers exited; every bench cgroup back to 0 live / 0 listeners after {:.1} s",
            d.as_secs_f64()
        );
    }
    let closed_charge = Charge::read(&memcg)?;
    println!("[closed]  {}", closed_charge.line());
    let memcg_peak = memcg.peak()?;

    println!("\nkernel maps held by the agent with the connections open (memlock from /proc/<pid>/fdinfo):");
    print_maps(&live_maps);
    let idle_total: u64 = idle_maps.iter().map(|m| m.memlock).sum();
    let live_total: u64 = live_maps.iter().map(|m| m.memlock).sum();
    println!("  (idle: {idle_total} bytes; memlock of an sk_storage map excludes its per-socket elements)");
    println!("socket-local storage (GRACEFUL_SOCKS elements), charged to each socket: sum of `o` (sk_omem_alloc) in `ss -tanm`:");
    for (name, c) in ["outbound", "inbound (accepted)", "listeners"]
        .iter()
        .zip(storage)
    {
        println!(
            "  {name:<20} {:>7} sockets {:>11} bytes  ({:.0} bytes/socket)",
            c.sockets,
            c.bytes,
            c.per_socket()
        );
    }
    println!(
        "  {:<20} {storage_sockets:>7} sockets {storage_bytes:>11} bytes; after the cold start's adoption: {cold_storage_bytes} bytes",
        "all"
    );
    if foreign > 0 {
        println!(
            "  WARNING: {foreign} other graceful instance(s) (a test suite?) had programs loaded: their own storage is in these figures"
        );
    }
    println!(
        "kernel memory in all: {:.2} MiB (maps {:.2} + socket storage {:.2})",
        (live_total + storage_bytes) as f64 / 1048576.0,
        live_total as f64 / 1048576.0,
        storage_bytes as f64 / 1048576.0
    );
    // What a DaemonSet's memory limit must hold: the kernel charges the
    // maps and every socket's storage to the agent's memory cgroup.
    let kernel_per_socket =
        (live_charge.kernel as f64 - idle_charge.kernel as f64) / storage_sockets.max(1) as f64;
    println!(
        "agent's memory cgroup ({}): peak {:.1} MiB over the run, what its memory limit must hold;",
        memcg.version(),
        bytes_mib(memcg_peak)
    );
    println!(
        "  each tracked socket added {kernel_per_socket:.0} bytes of kernel memory to it (live − idle over {storage_sockets} sockets);"
    );
    println!(
        "  with every connection closed it was back to {:.1} MiB",
        bytes_mib(closed_charge.all)
    );

    println!(
        "\n{:<8} {:>10} {:>8} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "phase",
        "VmRSS MiB",
        "anon",
        "file",
        "VmHWM MiB",
        "memcg MiB",
        "kernel MiB",
        "ready ms",
        "adopt ms",
        "counts"
    );
    for p in &phases {
        println!(
            "{:<8} {:>10.1} {:>8.1} {:>8.1} {:>10.1} {:>10.1} {:>10.1} {:>10} {:>10} {:>9}",
            p.name,
            mib(p.mem.rss),
            mib(p.mem.anon),
            mib(p.mem.file),
            mib(p.mem.hwm),
            bytes_mib(p.memcg.all),
            bytes_mib(p.memcg.kernel),
            p.started.as_ref().map_or("-".into(), |s| format!(
                "{:.0}",
                s.ready_after.as_secs_f64() * 1e3
            )),
            p.started
                .as_ref()
                .and_then(|s| s.adopt_ms)
                .map_or("-".into(), |m| m.to_string()),
            p.counts.as_ref().map_or("-", |c| if c.ok(args.connections, ncg) {
                "OK"
            } else {
                "MISMATCH"
            }),
        );
    }
    let max_rss = phases.iter().map(|p| p.mem.rss).max().unwrap_or(0);
    let max_hwm = phases.iter().map(|p| p.mem.hwm).max().unwrap_or(0);
    let keeper = phases.iter().find_map(|p| p.keeper).unwrap_or_default();
    let counts_ok = phases
        .iter()
        .filter_map(|p| p.counts.as_ref())
        .all(|c| c.ok(args.connections, ncg));
    let verdict = |ok: bool| if ok { "PASS" } else { "FAIL" };
    let rss_pass = mib(max_rss) <= args.target_rss_mib;
    let keeper_pass = mib(keeper.rss) <= args.target_keeper_mib;
    println!(
        "agent VmRSS, idle and with {} connections open: max {:.1} MiB over the phases; target {:.0} MiB: {}",
        args.connections,
        mib(max_rss),
        args.target_rss_mib,
        verdict(rss_pass)
    );
    println!(
        "keeper VmRSS {:.1} MiB (anon {:.1}, file {:.1}; PSS {:.1}, private {:.1}); target {:.0} MiB: {}",
        mib(keeper.rss),
        mib(keeper.anon),
        mib(keeper.file),
        mib(keeper.pss),
        mib(keeper.private),
        args.target_keeper_mib,
        verdict(keeper_pass)
    );
    println!("the dev build ({}), idle: {}", dev.display(), dev_idle.line());
    // A memory limit on the agent's container has to hold the start's
    // peak (the kernel's BTF parsed) and the kernel memory charged to it.
    println!(
        "peak: VmHWM {:.1} MiB at most (a start-up); with the kernel memory charged, the memory cgroup peaked at {:.1} MiB",
        mib(max_hwm),
        bytes_mib(memcg_peak)
    );
    println!(
        "counts: {}",
        if counts_ok && drained.is_some() {
            "all phases exact, and back to zero on close"
        } else {
            "MISMATCH (see above)"
        }
    );

    drop(workers);
    drop(cg);
    drop(agent);

    let by_phase = |f: &dyn Fn(&Phase) -> serde_json::Value| -> serde_json::Value {
        phases
            .iter()
            .map(|p| (p.name.to_string(), f(p)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let summary = json!({
        "bench": "memory",
        "connections": args.connections,
        "cgroups": ncg,
        "sockets": 2 * args.connections,
        "binary": bin.display().to_string(),
        "rss_kib": by_phase(&|p| p.mem.rss.into()),
        "anon_kib": by_phase(&|p| p.mem.anon.into()),
        "file_kib": by_phase(&|p| p.mem.file.into()),
        "hwm_kib": by_phase(&|p| p.mem.hwm.into()),
        "keeper_kib": {"rss": keeper.rss, "anon": keeper.anon, "file": keeper.file, "pss": keeper.pss, "private": keeper.private},
        "dev_build_idle_kib": {"rss": dev_idle.rss, "anon": dev_idle.anon, "file": dev_idle.file, "hwm": dev_idle.hwm},
        "ready_ms": by_phase(&|p| p.started.as_ref().map(|s| s.ready_after.as_millis() as u64).into()),
        "adopt_ms": by_phase(&|p| p.started.as_ref().and_then(|s| s.adopt_ms).into()),
        "repair_pass_ms_live": repairs,
        "maps_memlock_bytes": live_maps.iter().map(|m| (m.name.clone(), m.memlock.into())).collect::<serde_json::Map<_, _>>(),
        "maps_memlock_total_bytes": live_total,
        "sk_storage_charged_bytes": storage_bytes,
        "sk_storage_sockets": storage_sockets,
        "other_graceful_loaded": foreign,
        "sk_storage_bytes_per_socket": {
            "outbound": storage[0].per_socket().round(),
            "inbound": storage[1].per_socket().round(),
            "listener": storage[2].per_socket().round(),
        },
        "sk_storage_charged_bytes_after_cold_adoption": cold_storage_bytes,
        "memcg_version": memcg.version(),
        "memcg_charged_bytes": by_phase(&|p| p.memcg.all.into()),
        "memcg_kernel_bytes": by_phase(&|p| p.memcg.kernel.into()),
        "memcg_peak_bytes": memcg_peak,
        "memcg_closed_bytes": closed_charge.all,
        "memcg_kernel_bytes_per_socket": kernel_per_socket.round(),
        "counts_ok": counts_ok,
        "counts_zero_after_close": drained.is_some(),
        "target_rss_mib": args.target_rss_mib,
        "target_keeper_mib": args.target_keeper_mib,
        "max_rss_mib": (mib(max_rss) * 10.0).round() / 10.0,
        "max_hwm_mib": (mib(max_hwm) * 10.0).round() / 10.0,
        "pass": rss_pass && keeper_pass && counts_ok,
    });
    println!("{summary}");
    Ok(())
}
