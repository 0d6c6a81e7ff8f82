//! The time spent inside the programs that run on every connection, from
//! the kernel's run-time statistics of BPF programs.

use std::time::Duration;

use anyhow::{bail, Context as _};

use crate::bench::{
    agent::Agent,
    bpf,
    tcp_load::{self, Config, Outcome},
};

pub(super) fn sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/")))
        .map(|s| s.trim().replace('\t', " "))
        .unwrap_or_else(|_| "?".into())
}

/// Waits for the kernel to free our program after `graceful uninstall`
/// (it goes once the last link and descriptor are gone). What is left is
/// someone else's.
pub(super) fn settle_detached() -> anyhow::Result<usize> {
    let t0 = std::time::Instant::now();
    loop {
        let n = bpf::state_programs_loaded().context("list loaded BPF programs")?;
        if n == 0 || t0.elapsed() > Duration::from_secs(2) {
            return Ok(n);
        }
        crate::bench::sleep(Duration::from_millis(20))?;
    }
}

/// Time spent inside the agent's programs, from the kernel's own run-time
/// statistics: where the cost per connection lands, measured without the
/// noise of a throughput ratio. Stats add two clock reads to every run of
/// every program, so this window is kept out of the ratios.
pub(super) struct Inside {
    /// Per program of [`bpf::PER_CONNECTION_PROGRAMS`]: ns per run, runs
    /// per connection.
    pub(super) programs: [(f64, f64); 4],
}

impl Inside {
    pub(super) fn us_per_conn(&self) -> f64 {
        self.programs.iter().map(|(ns, runs)| ns * runs).sum::<f64>() / 1e3
    }

    pub(super) fn runs_per_conn(&self) -> f64 {
        self.programs.iter().map(|(_, runs)| runs).sum()
    }

    pub(super) fn ns_per_run(&self) -> f64 {
        self.us_per_conn() * 1e3 / self.runs_per_conn()
    }
}

/// One window with `agent` attached.
pub(super) struct Attached {
    pub(super) out: Outcome,
    pub(super) ready: Duration,
    pub(super) counted: u64,
    pub(super) foreign: usize,
}

pub(super) fn measure_attached(agent: &mut Agent, cfg: &Config) -> anyhow::Result<Attached> {
    let started = agent.start()?;
    let loaded = bpf::state_programs_loaded()?;
    if loaded == 0 {
        bail!("the agent is ready but no sock_set_state program is loaded");
    }
    let before: u64 = agent.cgroups()?.iter().map(|r| r.inbound_total).sum();
    let out = tcp_load::measure(cfg)?;
    let after: u64 = agent.cgroups()?.iter().map(|r| r.inbound_total).sum();
    let counted = after - before;
    if counted < out.completed {
        bail!(
            "the agent counted {counted} inbound connections but {} completed: is it attached?",
            out.completed
        );
    }
    agent.stop()?;
    agent.uninstall()?;
    Ok(Attached {
        out,
        ready: started.ready_after,
        counted,
        foreign: loaded - 1,
    })
}

pub(super) fn time_inside(agent: &mut Agent, cfg: &Config) -> anyhow::Result<Inside> {
    agent.start()?;
    let stats = bpf::RunTimeStats::enable().context("enabling BPF run-time statistics (BPF_ENABLE_STATS)")?;
    let before = bpf::per_connection_run_times()?;
    let out = tcp_load::measure(cfg)?;
    let after = bpf::per_connection_run_times()?;
    drop(stats);
    agent.stop()?;
    agent.uninstall()?;
    let mut programs = [(0.0, 0.0); 4];
    for (k, p) in programs.iter_mut().enumerate() {
        let (ns, runs) = (
            after[k].0.saturating_sub(before[k].0),
            after[k].1.saturating_sub(before[k].1),
        );
        if runs > 0 && out.completed > 0 {
            *p = (ns as f64 / runs as f64, runs as f64 / out.completed as f64);
        }
    }
    if programs[0].1 == 0.0 {
        bail!(
            "the state program did not run during the run-time window ({} connections)",
            out.completed
        );
    }
    Ok(Inside { programs })
}
