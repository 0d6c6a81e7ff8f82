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
//!    socket is pre-existing and must be adopted.
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
    agent::{self, Agent, Started},
    bpf::{self},
    cgroup::Cgroups,
    AgentArgs,
};

mod figures;
mod workers;

use figures::{bytes_mib, mib, print_maps, sk_storage_charged, Charge, Counts};
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
    /// Largest acceptable agent RSS, in MiB.
    #[arg(long, default_value_t = 50.0)]
    pub target_rss_mib: f64,
    #[command(flatten)]
    pub agent: AgentArgs,
}

struct Phase {
    name: &'static str,
    rss_kib: u64,
    hwm_kib: u64,
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
    let pid = agent.pid().expect("running");
    super::sleep(Duration::from_secs(1))?;
    let counts = Counts::read(agent, per)?;
    let (rss, hwm) = agent::rss_kib(pid)?;
    let charge = Charge::read(memcg)?;
    let tag = format!("[{name}]");
    println!(
        "{tag:<9} ready in {:.0} ms (adoption pass {} ms over {} offered sockets; maps reused: {}); VmRSS {:.1} MiB, VmHWM {:.1} MiB",
        started.ready_after.as_secs_f64() * 1e3,
        started.adopt_ms.map_or("?".into(), |m| m.to_string()),
        started.offered.map_or("?".into(), |m| m.to_string()),
        started.reused_maps.map_or("?".into(), |m| m.to_string()),
        mib(rss),
        mib(hwm)
    );
    println!("{tag:<9} {}", counts.line(connections, ncg));
    println!("{tag:<9} {}", charge.line());
    Ok(Phase {
        name,
        rss_kib: rss,
        hwm_kib: hwm,
        memcg: charge,
        started: Some(started),
        counts: Some(counts),
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let ncg = args.cgroups as usize;
    if args.connections < ncg {
        bail!("--connections must be at least --cgroups");
    }
    raise_own_nofile();
    let bin = args.agent.binary()?;
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
    let (rss, hwm) = agent::rss_kib(pid)?;
    println!(
        "\n[idle]    agent ready in {:.0} ms; VmRSS {:.1} MiB, VmHWM {:.1} MiB",
        started.ready_after.as_secs_f64() * 1e3,
        mib(rss),
        mib(hwm)
    );
    let idle_charge = Charge::read(&memcg)?;
    println!("[idle]    {}", idle_charge.line());
    let idle_maps = bpf::maps_of(pid, &args.pin_dir)?;
    phases.push(Phase {
        name: "idle",
        rss_kib: rss,
        hwm_kib: hwm,
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
    let (rss, hwm) = agent::rss_kib(pid)?;
    println!("[live]    VmRSS {:.1} MiB, VmHWM {:.1} MiB", mib(rss), mib(hwm));
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
        rss_kib: rss,
        hwm_kib: hwm,
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
        "\n{:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "phase", "VmRSS MiB", "VmHWM MiB", "memcg MiB", "kernel MiB", "ready ms", "adopt ms", "counts"
    );
    for p in &phases {
        println!(
            "{:<8} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10} {:>10} {:>9}",
            p.name,
            mib(p.rss_kib),
            mib(p.hwm_kib),
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
    let max_rss = phases.iter().map(|p| p.rss_kib).max().unwrap_or(0);
    let max_hwm = phases.iter().map(|p| p.hwm_kib).max().unwrap_or(0);
    let counts_ok = phases
        .iter()
        .filter_map(|p| p.counts.as_ref())
        .all(|c| c.ok(args.connections, ncg));
    // A memory limit on the agent's container has to hold its peak, so the
    // peak is what the target is checked against.
    let pass = mib(max_hwm) < args.target_rss_mib;
    println!(
        "agent RSS: peak (max VmHWM over phases) {:.1} MiB; target under {:.0} MiB: {}; VmRSS 1 s after ready, max {:.1} MiB",
        mib(max_hwm),
        args.target_rss_mib,
        if pass { "PASS" } else { "FAIL" },
        mib(max_rss),
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
        "rss_kib": by_phase(&|p| p.rss_kib.into()),
        "hwm_kib": by_phase(&|p| p.hwm_kib.into()),
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
        "max_rss_mib": (mib(max_rss) * 10.0).round() / 10.0,
        "max_hwm_mib": (mib(max_hwm) * 10.0).round() / 10.0,
        "pass": pass && counts_ok,
    });
    println!("{summary}");
    Ok(())
}
