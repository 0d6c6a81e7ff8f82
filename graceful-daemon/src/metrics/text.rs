//! The Prometheus text format (0.0.4), for scrapers that do not ask for
//! OpenMetrics: `curl .../metrics | promtool check metrics`, older agents,
//! tools that read `text/plain`. prometheus-client encodes OpenMetrics
//! only, and the two differ in little: a counter's family is named without
//! `_total` in OpenMetrics and with it in 0.0.4, `unknown` is `untyped`,
//! and 0.0.4 has no `# UNIT` and no `# EOF`. The `prometheus` crate would
//! encode 0.0.4 itself, but would mean a second registry of every family;
//! this rewrite of the one encoding is a line-by-line pass (a scrape of a
//! node with 256 pods is about 60 KB).

/// The 0.0.4 content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether an `Accept` header asks for OpenMetrics (Prometheus's own
/// scrapes do); anything else gets 0.0.4, as Go's client answers.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|part| {
            let mut it = part.split(';').map(str::trim);
            let media = it.next().unwrap_or_default();
            let refused = it.any(|p| p.replace(' ', "") == "q=0");
            media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
        })
    })
}

/// `openmetrics`, as the 0.0.4 text format. A family's `# HELP` comes
/// before its `# TYPE`, so it is held until the type says whether the
/// family is a counter, whose name gains `_total`.
pub fn from_openmetrics(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len() + 256);
    let mut help: Option<(&str, &str)> = None;
    let mut counter: Option<&str> = None;
    let flush = |out: &mut String, help: &mut Option<(&str, &str)>| {
        if let Some((name, text)) = help.take() {
            out.push_str(&format!("# HELP {name} {text}\n"));
        }
    };
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            flush(&mut out, &mut help);
            help = Some(rest.split_once(' ').unwrap_or((rest, "")));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let (name_out, kind_out) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "unknown" => (name.to_string(), "untyped"),
                "info" | "stateset" => (name.to_string(), "gauge"),
                k => (name.to_string(), k),
            };
            counter = (kind == "counter").then_some(name);
            match help.take() {
                Some((n, text)) if n == name => out.push_str(&format!("# HELP {name_out} {text}\n")),
                other => {
                    help = other;
                    flush(&mut out, &mut help);
                }
            }
            out.push_str(&format!("# TYPE {name_out} {kind_out}\n"));
            continue;
        }
        flush(&mut out, &mut help);
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        // A counter's `_created` sample has no place in 0.0.4.
        let sample = line.split(['{', ' ']).next().unwrap_or_default();
        if counter.is_some_and(|c| sample.strip_suffix("_created") == Some(c)) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    flush(&mut out, &mut help);
    out
}

#[cfg(test)]
mod tests;
