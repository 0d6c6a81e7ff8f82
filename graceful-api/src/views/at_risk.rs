//! `graceful at-risk` and `kubectl graceful at-risk`: the workloads whose
//! pods exited (or were deleted) before their inbound connections drained,
//! worst first, from the agents' terminating reports (`/v1/drains`'
//! `terminated`) or from their Events in a namespace (`--events`). It is where a platform team starts: widen the report
//! scope (`--report-namespaces`, `--report-selector`), roll, and read which
//! workloads cut connections.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::table::table;
use crate::termination::{Outcome, TerminationReport};

/// One workload's terminations, as the reports show them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    pub namespace: String,
    /// `kind/name`; `-` where the agent did not say (an older agent).
    pub workload: String,
    /// Terminating pods reported.
    pub terminations: u64,
    /// Of them, exited or deleted with inbound connections open.
    pub before_drain: u64,
    /// The inbound connections those exits and deletions closed.
    pub connections_cut: u64,
    /// How many of its reported pods carried a graceful gate or setting.
    pub opted_in: u64,
    /// The last pod that exited before its drain.
    pub last_pod: String,
}

/// One terminating pod's report, as an agent keeps it or as its Event
/// carries it: what the ranking reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub namespace: String,
    pub name: String,
    pub workload: Option<String>,
    pub outcome: Outcome,
    pub inbound_open: u64,
    pub opted_in: Option<bool>,
}

impl From<&TerminationReport> for Seen {
    fn from(r: &TerminationReport) -> Seen {
        Seen {
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            workload: r.workload.clone(),
            outcome: r.outcome,
            inbound_open: r.inbound_open,
            opted_in: r.opted_in,
        }
    }
}

/// The workloads with a termination before drain, worst first (most such
/// terminations, then most connections cut), from any number of agents'
/// reports or Events.
pub fn rank(reports: impl IntoIterator<Item = Seen>) -> Vec<Workload> {
    let mut by: BTreeMap<(String, String), Workload> = BTreeMap::new();
    for r in reports {
        let workload = r.workload.clone().unwrap_or_else(|| "-".into());
        let w = by
            .entry((r.namespace.clone(), workload.clone()))
            .or_insert_with(|| Workload {
                namespace: r.namespace.clone(),
                workload,
                ..Workload::default()
            });
        w.terminations += 1;
        w.opted_in += u64::from(r.opted_in == Some(true));
        if r.outcome != Outcome::Drained {
            w.before_drain += 1;
            w.connections_cut = w.connections_cut.saturating_add(r.inbound_open);
            w.last_pod = r.name.clone();
        }
    }
    let mut out: Vec<Workload> = by.into_values().filter(|w| w.before_drain > 0).collect();
    out.sort_by(|a, b| {
        (b.before_drain, b.connections_cut)
            .cmp(&(a.before_drain, a.connections_cut))
            .then_with(|| (&a.namespace, &a.workload).cmp(&(&b.namespace, &b.workload)))
    });
    out
}

/// The table: one row per workload, worst first.
pub fn render(rows: &[Workload]) -> String {
    if rows.is_empty() {
        return "No workload's pod exited before its inbound connections drained, in the reports the agents keep.\n"
            .into();
    }
    let mut all = vec![[
        "NAMESPACE",
        "WORKLOAD",
        "BEFORE DRAIN",
        "OF TERMINATIONS",
        "CONNECTIONS CUT",
        "GATED",
        "LAST POD",
    ]
    .map(String::from)
    .to_vec()];
    for w in rows {
        all.push(vec![
            w.namespace.clone(),
            w.workload.clone(),
            w.before_drain.to_string(),
            w.terminations.to_string(),
            w.connections_cut.to_string(),
            format!("{}/{}", w.opted_in, w.terminations),
            w.last_pod.clone(),
        ]);
    }
    let mut out = table(&all);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests;
