//! `kubectl graceful recommend`: each workload's drains (how long they
//! held the SIGTERM, how many hit their deadline) and the `max` and grace
//! period they call for, so that a team replaces a guess with a figure.
//!
//! The rule, printed beside each proposal:
//! - no drain hit its deadline: `max` is twice the p99 of the waits, at
//!   least one and a half times the longest, at least 5 s, in whole
//!   seconds (a drain's time grows with its clients' and with load: the
//!   margin is for the rollout that is slower than those measured);
//! - some did: their real length is unknown (past the deadline), so `max`
//!   is twice the deadline they had; roll again and look;
//! - the grace period is `max` plus the app's shutdown budget (the agent's
//!   `--shutdown-budget`, 5 s by default), in whole seconds, so that the
//!   kubelet never kills a container mid-drain.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::table::table;

/// One released drain, as its Event (or an agent) tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drain {
    pub namespace: String,
    /// `kind/name`; `-` where it was not said.
    pub workload: String,
    pub waited_ms: u64,
    /// Released at its deadline rather than by its traffic.
    pub at_deadline: bool,
    /// The deadline it had.
    pub max_ms: Option<u64>,
    /// The pod's grace period.
    pub grace_period_s: Option<i64>,
}

/// A workload's figures and the proposal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recommendation {
    pub namespace: String,
    pub workload: String,
    pub drains: u64,
    pub p50_ms: u64,
    pub p99_ms: u64,
    pub longest_ms: u64,
    pub at_deadline: u64,
    /// The largest deadline and grace period its drains had.
    pub max_now_ms: Option<u64>,
    pub grace_period_now_s: Option<i64>,
    pub max_s: u64,
    pub grace_period_s: u64,
    /// How the proposal was made, in a few words.
    pub rule: String,
}

/// The least `max` proposed.
const FLOOR_MS: u64 = 5_000;
/// A wait or a deadline longer than a day is no drain's (an Event anyone
/// in the namespace may write says so): left out.
const PLAUSIBLE_MS: u64 = 86_400_000;

/// One row a workload, by namespace and workload; `budget_ms` is the
/// app's shutdown time after SIGTERM.
pub fn recommend(drains: impl IntoIterator<Item = Drain>, budget_ms: u64) -> Vec<Recommendation> {
    let mut by: BTreeMap<(String, String), Vec<Drain>> = BTreeMap::new();
    let plausible = |d: &Drain| d.waited_ms <= PLAUSIBLE_MS && d.max_ms.is_none_or(|m| m <= PLAUSIBLE_MS);
    for d in drains.into_iter().filter(plausible) {
        by.entry((d.namespace.clone(), d.workload.clone()))
            .or_default()
            .push(d);
    }
    by.into_iter()
        .map(|((namespace, workload), ds)| one(namespace, workload, &ds, budget_ms))
        .collect()
}

fn one(namespace: String, workload: String, ds: &[Drain], budget_ms: u64) -> Recommendation {
    let mut waits: Vec<u64> = ds.iter().map(|d| d.waited_ms).collect();
    waits.sort_unstable();
    let rank = |q: f64| waits[((q * waits.len() as f64).ceil() as usize).clamp(1, waits.len()) - 1];
    let (p50, p99, longest) = (rank(0.5), rank(0.99), *waits.last().unwrap_or(&0));
    let at_deadline = ds.iter().filter(|d| d.at_deadline).count() as u64;
    let max_now = ds.iter().filter_map(|d| d.max_ms).max();
    let (max_ms, rule) = if at_deadline > 0 {
        let had = max_now.unwrap_or(longest);
        (
            had.saturating_mul(2),
            format!("{at_deadline} hit the deadline: 2x it, then roll and look again"),
        )
    } else {
        let few = if waits.len() < 20 {
            ", few drains: p99 is near the longest"
        } else {
            ""
        };
        let m = p99
            .saturating_mul(2)
            .max(longest.saturating_mul(3) / 2)
            .max(FLOOR_MS);
        (m, format!("2x p99, >= 1.5x the longest, >= 5s{few}"))
    };
    let max_s = max_ms.div_ceil(1000);
    Recommendation {
        namespace,
        workload,
        drains: ds.len() as u64,
        p50_ms: p50,
        p99_ms: p99,
        longest_ms: longest,
        at_deadline,
        max_now_ms: max_now,
        grace_period_now_s: ds.iter().filter_map(|d| d.grace_period_s).max(),
        max_s,
        grace_period_s: max_s
            .saturating_mul(1000)
            .saturating_add(budget_ms)
            .div_ceil(1000),
        rule,
    }
}

fn secs(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// The table: the figures, then the proposal and its rule.
pub fn render(rows: &[Recommendation]) -> String {
    if rows.is_empty() {
        return "No released drain to learn from: roll a workload that has graceful's gate, then ask again.\n".into();
    }
    let mut all = vec![[
        "NAMESPACE",
        "WORKLOAD",
        "DRAINS",
        "P50",
        "P99",
        "LONGEST",
        "AT DEADLINE",
        "MAX NOW",
        "GRACE NOW",
        "MAX",
        "GRACE",
        "RULE",
    ]
    .map(String::from)
    .to_vec()];
    for r in rows {
        all.push(vec![
            r.namespace.clone(),
            r.workload.clone(),
            r.drains.to_string(),
            secs(r.p50_ms),
            secs(r.p99_ms),
            secs(r.longest_ms),
            r.at_deadline.to_string(),
            r.max_now_ms.map_or("-".into(), secs),
            r.grace_period_now_s.map_or("-".into(), |g| format!("{g}s")),
            format!("{}s", r.max_s),
            format!("{}s", r.grace_period_s),
            r.rule.clone(),
        ]);
    }
    let mut out = table(&all);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests;
