//! The end of the soak: the agent's counts settled against `ss` and the
//! workers' tallies, printed per cgroup with the drift; and the figures
//! around them (the agent's CPU, its kernel programs' own counters).

use std::{
    path::PathBuf,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use graceful_test_support::ss::{self, View};

use super::tally::{total, Figures, Truth};
use crate::bench::{agent::Agent, cgroup::Cgroups};

/// One cgroup at the end.
pub struct Line {
    pub path: String,
    pub agent: Figures,
    pub want: Figures,
    pub ss: View,
}

impl Line {
    pub fn drift(&self) -> Figures {
        self.agent.minus(self.want)
    }
}

fn run_ss(args: &[&str]) -> String {
    Command::new("ss")
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Every cgroup's figures now: the agent's (`graceful cgroups`), and the
/// kernel's (`ss`) with the workers' totals.
fn read(agent: &Agent, cgroups: &Cgroups, truth: &Truth) -> anyhow::Result<Vec<Line>> {
    let rows = agent.cgroups()?;
    let mut lines = Vec::new();
    for (i, dir) in cgroups.dirs.iter().enumerate() {
        let path = cgroups.relative(dir);
        let row = rows.iter().find(|r| r.path.as_deref() == Some(path.as_str()));
        let view = ss::view(run_ss, &path);
        lines.push(Line {
            agent: row.map(Figures::of_agent).unwrap_or_default(),
            want: Figures::expected(truth, i, &view),
            ss: view,
            path,
        });
    }
    Ok(lines)
}

/// Reads until the live counts agree with `ss` twice in a row (sockets
/// still closing settle within moments), or `limit` passes: then the last
/// reading, disagreements and all.
pub fn settle(
    agent: &Agent,
    cgroups: &Cgroups,
    truth: &Truth,
    limit: Duration,
) -> anyhow::Result<(Vec<Line>, Duration)> {
    let t0 = Instant::now();
    let mut agreed = 0;
    loop {
        let lines = read(agent, cgroups, truth)?;
        let live_ok = lines.iter().all(|l| l.drift().live_is_zero());
        agreed = if live_ok { agreed + 1 } else { 0 };
        if agreed >= 2 || t0.elapsed() > limit {
            return Ok((lines, t0.elapsed()));
        }
        crate::bench::sleep(Duration::from_millis(500))?;
    }
}

fn pair(agent: i64, want: i64) -> String {
    if agent == want {
        format!("{agent}")
    } else {
        format!("{agent}≠{want}")
    }
}

/// The table: one row per cgroup (agent's figure, `≠truth` where they
/// differ), then the drift summed.
pub fn print_table(lines: &[Line], truth: &Truth) {
    println!(
        "{:<28} {:>9} {:>9} {:>6} {:>6} {:>6} {:>14} {:>14} {:>14}",
        "CGROUP", "IN_LIVE", "OUT_LIVE", "LISTEN", "HELD_I", "HELD_O", "IN_TOTAL", "OUT_TOTAL", "IN_CLOSED"
    );
    for (i, l) in lines.iter().enumerate() {
        let (a, w) = (l.agent, l.want);
        println!(
            "{:<28} {:>9} {:>9} {:>6} {:>6} {:>6} {:>14} {:>14} {:>14}",
            l.path,
            pair(a.inbound_live, w.inbound_live),
            pair(a.outbound_live, w.outbound_live),
            pair(a.listeners, w.listeners),
            truth.held_in[i],
            truth.held_out[i],
            pair(a.inbound_total, w.inbound_total),
            pair(a.outbound_total, w.outbound_total),
            pair(a.inbound_closed_total, w.inbound_closed_total),
        );
    }
    let d = total(&lines.iter().map(Line::drift).collect::<Vec<_>>());
    println!(
        "drift (agent − truth), summed over the cgroups: live inbound {:+}, outbound {:+}, listeners {:+}; totals inbound {:+}, outbound {:+}, inbound closed {:+}",
        d.inbound_live, d.outbound_live, d.listeners, d.inbound_total, d.outbound_total, d.inbound_closed_total
    );
    let off: Vec<&str> = lines
        .iter()
        .filter(|l| !l.drift().live_is_zero() || !l.drift().totals_are_zero())
        .map(|l| l.path.as_str())
        .collect();
    println!(
        "cgroups with any drift: {}",
        if off.is_empty() {
            "none".to_string()
        } else {
            off.join(" ")
        }
    );
    let ss_held = lines
        .iter()
        .enumerate()
        .filter(|(i, l)| l.ss.inbound_live != truth.held_in[*i] || l.ss.outbound_live != truth.held_out[*i])
        .count();
    if ss_held > 0 {
        println!("note: in {ss_held} cgroup(s) `ss` sees other live connections than the held ones (not yet closed?)");
    }
}

/// User + system CPU time of `pid` so far, from /proc/PID/stat.
pub fn cpu_of(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("read /proc/{pid}/stat"))?;
    let (_, rest) = stat.rsplit_once(')').context("no (comm) in /proc/PID/stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // Fields after "(comm)": state is 0, utime 11, stime 12.
    Ok(crate::bench::tcp_load::ticks_to_duration(num(11) + num(12)))
}

/// The kernel programs' own counters, and the repair passes', from the
/// agent's `/metrics`.
pub fn print_kernel_figures(agent: &Agent) {
    match agent.api_get("/metrics") {
        Ok(lines) => {
            for l in lines.iter().filter(|l| {
                [
                    "graceful_kernel",
                    "graceful_adopted",
                    "graceful_repaired",
                    "graceful_map_entries",
                ]
                .iter()
                .any(|p| l.starts_with(p))
            }) {
                println!("  {l}");
            }
        }
        Err(e) => println!("  (no /metrics: {e:#})"),
    }
}

/// Other `graceful` processes on the machine (`pgrep -a graceful`): they
/// share the CPUs and the tracepoint.
pub fn others(mine: &[u32]) -> Vec<String> {
    let out = Command::new("pgrep").args(["-a", "graceful"]).output();
    let me = std::process::id();
    out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            let pid = l.split_whitespace().next().and_then(|p| p.parse::<u32>().ok());
            pid.is_some_and(|p| p != me && !mine.contains(&p))
        })
        .map(str::to_owned)
        .collect()
}

/// The state directory of this run: the agent's API socket and its lock
/// file. Removed on drop, after the agent (declare it first).
pub struct StateDir(pub PathBuf);

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
