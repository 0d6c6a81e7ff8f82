//! Durations as people write them: `500ms`, `2s`, `1m`, `1h`, `1m30s`
//! (parsed by the wire contract's [`graceful_api::duration`]), and printed
//! back the same way.

use std::time::Duration;

pub use graceful_api::duration::parse;

/// `30s`, `1.5s`, `500ms`: durations printed back as people write them
/// (to the millisecond; tenths of a second above one second).
pub fn format(d: Duration) -> String {
    match d.as_millis() {
        m if m % 1000 == 0 => format!("{}s", m / 1000),
        m if m < 1000 => format!("{m}ms"),
        m => format!("{:.1}s", m as f64 / 1000.0),
    }
}

#[cfg(test)]
mod tests;
