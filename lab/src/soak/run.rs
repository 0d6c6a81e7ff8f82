//! The soak's course: the agent started, the workers started, the rounds
//! (with the restart at the middle one), the held connections, and the
//! reckoning.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use super::{
    ending::Ending,
    fleet::Fleet,
    report::{self, cpu_of},
    rounds,
    tally::{total, Truth},
    Args, Restart,
};
use crate::bench::{agent::Agent, cgroup::Cgroups};

/// How long the end's live counts may take to agree with `ss`.
const SETTLE: Duration = Duration::from_secs(30);

/// The agent's life: its CPU time and the connections made while it ran.
#[derive(Default)]
struct Life {
    cpu: Duration,
    connections: u64,
}

fn per_conn_us(life: &Life) -> f64 {
    life.cpu.as_secs_f64() * 1e6 / life.connections.max(1) as f64
}

pub fn soak(args: &Args, bin: &Path, cgroups: &Cgroups, agent: &mut Agent) -> anyhow::Result<i32> {
    let k = cgroups.dirs.len() as u64;
    let (rounds, per_round) = rounds(args.connections, k, args.round);
    println!("== graceful soak: connection churn across cgroups, the agent's counts against the kernel's");
    println!(
        "agent:       {} (release build), its own pins and API socket",
        bin.display()
    );
    println!(
        "load:        {} connections of churn = {rounds} rounds × {k} cgroups × {per_round}, seed {}",
        rounds * k * per_round,
        args.seed
    );
    let mix: Vec<String> = Ending::ALL
        .iter()
        .map(|e| format!("{} {} %", e.name(), e.weight()))
        .collect();
    println!(
        "mix:         {} (a quarter of the accepted ones over ::1)",
        mix.join(", ")
    );
    println!(
        "peers:       each round, in every cgroup, one peer SIGKILLed holding {} connections each way",
        args.victim_connections
    );
    println!(
        "restart:     {} at round {} of {rounds}; held at the end: {} per cgroup",
        args.restart.name(),
        rounds / 2 + 1,
        args.hold
    );
    println!(
        "machine:     {} CPUs, load {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        crate::bench::loadavg()
    );
    let started = agent.start()?;
    println!("agent up:    ready in {:.2} s", started.ready_after.as_secs_f64());
    let mut fleet = Fleet::start(&cgroups.dirs, args.seed)?;
    let mut mine = fleet.pids();
    mine.extend(agent.pid());
    let others = report::others(&mine);
    if others.is_empty() {
        println!("others:      no other graceful process on the machine");
    } else {
        println!(
            "others:      {} other graceful process(es) share the machine:",
            others.len()
        );
        for o in &others {
            println!("               {o}");
        }
    }

    let mut truth = Truth::new(fleet.len());
    let mut endings = vec![0u64; Ending::ALL.len()];
    let mut errors = 0;
    let (mut first, mut second) = (Life::default(), Life::default());
    let t0 = Instant::now();
    for r in 0..rounds {
        crate::bench::check_interrupted()?;
        let before = truth.connections();
        let restart_here = r == rounds / 2 && args.restart != Restart::None;
        let mut restarted: Option<anyhow::Result<String>> = None;
        let round = fleet.round(
            r * per_round,
            per_round,
            args.victim_connections,
            &mut truth,
            || {
                if restart_here {
                    restarted = Some(restart(agent, args.restart, &mut first));
                }
                Ok(())
            },
        )?;
        if let Some(note) = restarted {
            println!("restart:     {}", note?);
            // The restart round's connections are the second agent's.
            first.connections = before;
        }
        errors += round.errors;
        for (s, n) in endings.iter_mut().zip(&round.endings) {
            *s += n;
        }
        if (r + 1) % (rounds / 10).max(1) == 0 || r + 1 == rounds {
            let made = truth.connections();
            println!(
                "round {:>4}/{rounds}: {made:>10} connections established, {:>7.0} per second, {errors} connect errors, load {}",
                r + 1,
                made as f64 / t0.elapsed().as_secs_f64(),
                crate::bench::loadavg()
            );
        }
    }
    let churn = t0.elapsed();
    let churned: u64 = endings.iter().sum();
    let victims = truth.connections() - churned;
    fleet.hold(args.hold, &mut truth)?;
    let (lines, settled) = report::settle(agent, cgroups, &truth, SETTLE)?;
    if let Some(pid) = agent.pid() {
        second.cpu = cpu_of(pid)?;
    }
    second.connections = truth.connections() - first.connections;
    if args.restart == Restart::None {
        first = std::mem::take(&mut second);
    }

    println!();
    println!("== per cgroup: the agent's figure, `≠truth` where it differs (live: `ss`; totals: the workers' counts)");
    report::print_table(&lines, &truth);
    let drift = total(&lines.iter().map(report::Line::drift).collect::<Vec<_>>());
    println!();
    println!("== figures");
    println!(
        "connections: {} established: {churned} of churn, {victims} of the killed peers (both ways), {} held; {errors} connect errors",
        truth.connections(),
        truth.connections() - churned - victims
    );
    for e in Ending::ALL {
        println!("  {:<26} {:>10}", e.name(), endings[e.index()]);
    }
    println!(
        "rate:        {:.0} connections per second over {:.1} s of churn ({k} workers; the peers' included)",
        (churned + victims) as f64 / churn.as_secs_f64(),
        churn.as_secs_f64()
    );
    println!(
        "settled:     the live counts were read {:.1} s after the churn",
        settled.as_secs_f64()
    );
    println!(
        "agent CPU:   {:.2} s for {} connections before the restart ({:.2} µs each); {:.2} s for {} after it ({:.2} µs each)",
        first.cpu.as_secs_f64(),
        first.connections,
        per_conn_us(&first),
        second.cpu.as_secs_f64(),
        second.connections,
        per_conn_us(&second)
    );
    println!("kernel:      the programs' own counters (pinned: they span both agents):");
    report::print_kernel_figures(agent);
    let live_ok = drift.live_is_zero() && lines.iter().all(|l| l.drift().live_is_zero());
    let totals_ok = lines.iter().all(|l| l.drift().totals_are_zero());
    println!();
    println!(
        "result:      live drift {}; totals drift {}",
        if live_ok { "0 (every cgroup)" } else { "NOT 0" },
        if totals_ok {
            "0 (every cgroup)"
        } else {
            "NOT 0 (see above)"
        }
    );
    Ok(if live_ok { 0 } else { 1 })
}

/// Restarts the agent as `how` says, while the round's churn runs; notes
/// the first agent's CPU time in `first`.
fn restart(agent: &mut Agent, how: Restart, first: &mut Life) -> anyhow::Result<String> {
    // Let the round get going: the agent goes down in the middle of it.
    std::thread::sleep(Duration::from_millis(300));
    let pid = agent.pid().unwrap_or(0);
    first.cpu = cpu_of(pid)?;
    let t = Instant::now();
    match how {
        Restart::Kill9 => agent.kill()?,
        Restart::Term => agent.stop()?,
        Restart::None => {}
    }
    let down = t.elapsed();
    let started = agent.start()?;
    Ok(format!(
        "agent {pid} {} mid-round (down in {:.0} ms), the new one {} ready in {:.2} s (maps reused: {:?}, link reused: {:?}, {} sockets offered to adoption)",
        if how == Restart::Kill9 { "SIGKILLed" } else { "stopped by SIGTERM" },
        down.as_secs_f64() * 1e3,
        agent.pid().unwrap_or(0),
        started.ready_after.as_secs_f64(),
        started.reused_maps,
        started.reused_link,
        started.offered.map_or("?".to_string(), |n| n.to_string()),
    ))
}
