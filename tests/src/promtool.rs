//! Prometheus's own checker, `promtool` (Debian's `prometheus` package,
//! which `cargo xtask setup` unpacks): the agent's live scrape and the
//! chart's alert rules are checked with it, not with a parser of ours.

use std::{path::Path, process::Command};

/// `promtool`, as `cargo xtask test` names it in `GRACEFUL_PROMTOOL`.
pub fn command() -> Command {
    let bin = std::env::var_os("GRACEFUL_PROMTOOL").unwrap_or_else(|| {
        panic!("GRACEFUL_PROMTOOL is not set: run the tests through `cargo xtask test` (its setup unpacks promtool)")
    });
    assert!(
        Path::new(&bin).is_file(),
        "{} is missing: run `cargo xtask setup`",
        Path::new(&bin).display()
    );
    Command::new(bin)
}

/// `promtool check metrics` of a scrape: its findings (empty when clean).
/// Panics if promtool cannot parse the text at all.
pub fn check_metrics(scrape: &str) -> String {
    let out = crate::output_with_stdin(command().args(["check", "metrics"]), scrape);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() || out.status.code() == Some(3),
        "promtool check metrics could not read the scrape ({}): {text}",
        out.status
    );
    text
}
