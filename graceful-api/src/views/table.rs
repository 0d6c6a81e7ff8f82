//! Plain-text tables as kubectl prints them.

/// Counts as signed: a sum read from several map entries at slightly
/// different times can be transiently low, and -1 reads better than 2^64-1.
pub fn n(v: u64) -> String {
    (v as i64).to_string()
}

pub fn dash(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "-".into())
}

/// A cell with its control characters escaped (`\x1b`, `\n`): what a
/// table shows may come from objects anyone in a namespace can write (an
/// Event's message, an ownerReference), and must not reach the terminal
/// as escape sequences (kubectl does the same).
fn cell(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Left-aligned columns, three spaces apart, as kubectl prints them.
pub fn table(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| cell(c)).collect()).collect();
    let rows = rows.as_slice();
    let cols = rows.first().map_or(0, Vec::len);
    let width: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 < cols {
                line.push_str(&format!("{cell:<w$}   ", w = width[c]));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.pop();
    out
}
