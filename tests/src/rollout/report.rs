//! The rollout's table, as text and as JSON.

use serde::Serialize;

use super::Run;

/// One run as `--json` prints it. The first six fields are the contract;
/// the others say under which conditions the figures were taken.
#[derive(Debug, Serialize)]
pub struct Row {
    pub mode: &'static str,
    pub requests: u64,
    pub failed: u64,
    pub p99_ms: f64,
    pub per_pod_termination_s: f64,
    pub total_s: f64,
    pub keepalive: bool,
    pub propagation_s: f64,
    /// Mean time from an endpoint's removal to the pod's last response.
    pub drain_s: Option<f64>,
    /// The failed requests by what went wrong (`connection refused`, ...).
    pub failures: std::collections::BTreeMap<String, u64>,
    /// Requests before the measured window (the cluster rollout's second
    /// of warm-up), and how many of them failed.
    pub warmup_requests: u64,
    pub warmup_failed: u64,
}

fn round(x: f64, decimals: i32) -> f64 {
    let p = 10f64.powi(decimals);
    (x * p).round() / p
}

impl Row {
    pub fn of(run: &Run) -> Row {
        Row {
            mode: run.mode.name(),
            requests: run.load.requests,
            failed: run.load.failed,
            p99_ms: round(run.load.percentile_ms(99.0), 1),
            per_pod_termination_s: round(run.per_pod_termination_s(), 2),
            total_s: round(run.total.as_secs_f64(), 2),
            keepalive: run.keepalive,
            propagation_s: round(run.propagation.as_secs_f64(), 3),
            drain_s: run.drain_s().map(|d| round(d, 2)),
            failures: run.load.failures.clone(),
            warmup_requests: run.load.warmup_requests,
            warmup_failed: run.load.warmup_failures.values().sum(),
        }
    }
}

pub fn json(runs: &[Run]) -> String {
    let rows: Vec<Row> = runs.iter().map(Row::of).collect();
    serde_json::to_string_pretty(&rows).expect("rows serialize")
}

/// The table, one line a run, and under it what failed and why.
pub fn table(runs: &[Run]) -> String {
    let mut out = format!(
        "{:<12} {:>10} {:>9} {:>7} {:>7} {:>16} {:>7} {:>7}\n",
        "MODE", "KEEP-ALIVE", "REQUESTS", "FAILED", "P99", "TERMINATION/POD", "DRAIN", "TOTAL"
    );
    let s = |x: f64| format!("{x:.2} s");
    for run in runs {
        let r = Row::of(run);
        out += &format!(
            "{:<12} {:>10} {:>9} {:>7} {:>7} {:>16} {:>7} {:>7}\n",
            r.mode,
            if r.keepalive { "yes" } else { "no" },
            r.requests,
            r.failed,
            format!("{:.0} ms", r.p99_ms),
            s(r.per_pod_termination_s),
            r.drain_s.map_or("-".to_string(), s),
            format!("{:.1} s", r.total_s),
        );
    }
    let failed: Vec<String> = runs
        .iter()
        .filter(|r| r.load.failed > 0)
        .map(|run| {
            let why: Vec<String> = run
                .load
                .failures
                .iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect();
            format!("{} failed: {}\n", run.mode, why.join(", "))
        })
        .collect();
    if !failed.is_empty() {
        out += &format!("\n{}", failed.concat());
    }
    out
}
