//! `/v1/drains` as a table: what the gate is holding, what it released
//! and why, and the terminating pods the agent watches.

use serde_json::Value;

use super::table::table;

fn s(v: &Value, k: &str) -> String {
    match &v[k] {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn short(id: String) -> String {
    id.chars().take(12).collect()
}

fn ms(v: &Value, k: &str) -> String {
    v[k].as_u64()
        .map_or("-".into(), |ms| format!("{:.1}s", ms as f64 / 1000.0))
}

/// Width of the inbound sparkline, in cells.
pub const SPARK: usize = 16;

/// The inbound count over a drain, one cell per slice of its duration:
/// the slice's highest count against the drain's peak (blank: zero).
pub fn sparkline(timeline: &[Value], waited_ms: u64) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let points: Vec<(u64, u64)> = timeline
        .iter()
        .filter_map(|p| Some((p["ms"].as_u64()?, p["inbound"].as_u64()?)))
        .collect();
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
fn ignoring(a: &Value) -> String {
    let rules: Vec<&str> = list(a, "ignoring").iter().filter_map(Value::as_str).collect();
    if rules.is_empty() {
        "-".into()
    } else {
        rules.join(",")
    }
}

/// RELEASED's IGNORED: each rule with the connections it left out
/// (`9090:1 node:12`), a dash for none.
fn ignored(r: &Value) -> String {
    let per_rule: Vec<String> = list(r, "ignored")
        .iter()
        .filter_map(|i| Some(format!("{}:{}", i["rule"].as_str()?, i["connections"].as_u64()?)))
        .collect();
    if per_rule.is_empty() {
        "-".into()
    } else {
        per_rule.join(" ")
    }
}

fn list<'a>(d: &'a Value, k: &str) -> &'a [Value] {
    d[k].as_array().map_or(&[], Vec::as_slice)
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
pub fn render(d: &Value) -> String {
    let mut out = String::new();
    for (title, head, rows) in [holding(d), released(d), terminating(d), terminated(d)] {
        section(&mut out, title, head, rows);
    }
    out
}

/// A section: its title, its head, its rows.
type Section = (&'static str, &'static [&'static str], Vec<Vec<String>>);

fn holding(d: &Value) -> Section {
    let rows = list(d, "active")
        .iter()
        .map(|a| {
            vec![
                s(a, "pod"),
                short(s(a, "container")),
                s(a, "policy"),
                s(a, "scope"),
                ms(a, "max_ms"),
                s(a, "inbound"),
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

fn released(d: &Value) -> Section {
    let rows = list(d, "released")
        .iter()
        .rev()
        .map(|r| {
            vec![
                s(r, "pod"),
                short(s(r, "container")),
                s(r, "reason"),
                ms(r, "waited_ms"),
                s(r, "inbound_at_start"),
                s(r, "peak_inbound"),
                s(r, "new_connections"),
                ignored(r),
                format!(
                    "|{}|",
                    sparkline(
                        r["timeline"].as_array().map_or(&[], Vec::as_slice),
                        r["waited_ms"].as_u64().unwrap_or(0)
                    )
                ),
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

fn terminating(d: &Value) -> Section {
    let rows = list(d, "terminating")
        .iter()
        .map(|t| vec![s(t, "uid"), s(t, "inbound_at_deletion"), s(t, "inbound_now")])
        .collect();
    ("TERMINATING", &["UID", "INBOUND@DELETION", "INBOUND"], rows)
}

fn terminated(d: &Value) -> Section {
    let rows = list(d, "terminated")
        .iter()
        .rev()
        .map(|t| {
            vec![
                s(t, "namespace"),
                s(t, "name"),
                s(t, "outcome"),
                format!("{:.2}s", t["seconds_since_deletion"].as_f64().unwrap_or(0.0)),
                s(t, "inbound_at_deletion"),
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
