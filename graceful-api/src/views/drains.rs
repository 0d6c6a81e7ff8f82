//! `/v1/drains` ([`Drains`]) and its table: what the gate is holding, what
//! it released and why, and the terminating pods the agent watches.

use serde::{Deserialize, Serialize};

use super::table::table;
use crate::{
    drain::{ActiveDrain, DrainReport},
    termination::{TerminationReport, Watched},
    Point,
};

/// `/v1/drains`: the drains in progress and released (oldest first), and
/// the terminating pods watched and reported (gated or not). A section an
/// older agent did not send reads as empty.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Drains {
    #[serde(default)]
    pub active: Vec<ActiveDrain>,
    #[serde(default)]
    pub released: Vec<DrainReport>,
    #[serde(default)]
    pub terminating: Vec<Watched>,
    #[serde(default)]
    pub terminated: Vec<TerminationReport>,
}

/// An optional field, or a dash.
fn or_dash(v: Option<impl ToString>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn short(id: Option<&str>) -> String {
    id.map_or("-".into(), |id| id.chars().take(12).collect())
}

fn secs(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// Width of the inbound sparkline, in cells.
pub const SPARK: usize = 16;

/// The inbound count over a drain, one cell per slice of its duration:
/// the slice's highest count against the drain's peak (blank: zero).
pub fn sparkline(timeline: &[Point], waited_ms: u64) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let points: Vec<(u64, u64)> = timeline.iter().map(|p| (p.ms, p.inbound)).collect();
    let peak = points.iter().map(|p| p.1).max().unwrap_or(0);
    if points.is_empty() || peak == 0 {
        return " ".repeat(SPARK);
    }
    let span = waited_ms.max(1);
    (0..SPARK as u64)
        .map(|i| {
            let (from, to) = (span * i / SPARK as u64, span * (i + 1) / SPARK as u64);
            // The count in effect at the slice's start, and every change in it.
            let at_start = points.iter().rev().find(|p| p.0 <= from).map_or(0, |p| p.1);
            let within = points.iter().filter(|p| p.0 > from && p.0 < to).map(|p| p.1);
            let v = within.fold(at_start, u64::max);
            if v == 0 {
                ' '
            } else {
                BARS[((v * 8).div_ceil(peak) as usize).clamp(1, 8) - 1]
            }
        })
        .collect()
}

/// HOLDING's IGNORING: the rules as written (`9090,node`), a dash for none.
fn ignoring(a: &ActiveDrain) -> String {
    if a.ignoring.is_empty() {
        "-".into()
    } else {
        a.ignoring.join(",")
    }
}

/// RELEASED's IGNORED: each rule with the connections it left out
/// (`9090:1 node:12`), a dash for none.
fn ignored(r: &DrainReport) -> String {
    let per_rule: Vec<String> = r
        .report
        .ignored
        .iter()
        .map(|i| format!("{}:{}", i.rule, i.connections))
        .collect();
    if per_rule.is_empty() {
        "-".into()
    } else {
        per_rule.join(" ")
    }
}

fn section(out: &mut String, title: &str, head: &[&str], rows: Vec<Vec<String>>) {
    out.push_str(&format!("{title} ({})\n", rows.len()));
    if !rows.is_empty() {
        let mut all = vec![head.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
        all.extend(rows);
        out.push_str(&table(&all));
        out.push('\n');
    }
    out.push('\n');
}

/// Four short tables: held now, released (newest first), terminating,
/// terminated (newest first).
pub fn render(d: &Drains) -> String {
    let mut out = String::new();
    for (title, head, rows) in [holding(d), released(d), terminating(d), terminated(d)] {
        section(&mut out, title, head, rows);
    }
    out
}

/// A section: its title, its head, its rows.
type Section = (&'static str, &'static [&'static str], Vec<Vec<String>>);

fn holding(d: &Drains) -> Section {
    let rows = d
        .active
        .iter()
        .map(|a| {
            vec![
                a.pod.clone(),
                short(a.container.as_deref()),
                a.policy.as_str().into(),
                a.scope.as_str().into(),
                secs(a.max_ms),
                or_dash(a.inbound),
                ignoring(a),
            ]
        })
        .collect();
    let head = &[
        "POD",
        "CONTAINER",
        "POLICY",
        "SCOPE",
        "MAX",
        "INBOUND",
        "IGNORING",
    ];
    ("HOLDING", head, rows)
}

fn released(d: &Drains) -> Section {
    let rows = d
        .released
        .iter()
        .rev()
        .map(|r| {
            let o = &r.report;
            vec![
                r.pod.clone(),
                short(r.container.as_deref()),
                o.reason.as_str().into(),
                secs(o.waited_ms),
                o.inbound_at_start.to_string(),
                o.peak_inbound.to_string(),
                o.new_connections.to_string(),
                ignored(r),
                format!("|{}|", sparkline(&o.timeline, o.waited_ms)),
            ]
        })
        .collect();
    let head = &[
        "POD",
        "CONTAINER",
        "REASON",
        "WAITED",
        "INBOUND@START",
        "PEAK",
        "NEW",
        "IGNORED",
        "INBOUND OVER THE DRAIN",
    ];
    ("RELEASED", head, rows)
}

fn terminating(d: &Drains) -> Section {
    let rows = d
        .terminating
        .iter()
        .map(|t| {
            vec![
                t.uid.clone(),
                t.inbound_at_deletion.to_string(),
                t.inbound_now.to_string(),
            ]
        })
        .collect();
    ("TERMINATING", &["UID", "INBOUND@DELETION", "INBOUND"], rows)
}

fn terminated(d: &Drains) -> Section {
    let rows = d
        .terminated
        .iter()
        .rev()
        .map(|t| {
            vec![
                t.namespace.clone(),
                t.name.clone(),
                t.outcome.as_str().into(),
                format!("{:.2}s", t.seconds_since_deletion),
                t.inbound_at_deletion.to_string(),
            ]
        })
        .collect();
    let head = &[
        "NAMESPACE",
        "POD",
        "OUTCOME",
        "AFTER DELETION",
        "INBOUND@DELETION",
    ];
    ("TERMINATED", head, rows)
}

#[cfg(test)]
mod tests;
