//! Durations as people write them: `500ms`, `2s`, `1m`, `1h`, `1m30s`.
//! Here, not in the agent, because the httpGet gate's query carries them
//! and the fuzz targets build this crate alone.

use std::time::Duration;

/// Parses `500ms`, `2s`, `1m`, `1h` and sums like `1m30s`. A bare number is seconds.
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration: write it like 500ms, 2s or 1m".into());
    }
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!("invalid duration {s:?}: write it like 500ms, 2s or 1m"));
        }
        let value: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration {s:?}: write it like 500ms, 2s or 1m"))?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let factor = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => {
                return Err(format!(
                    "invalid duration unit {unit:?} in {s:?}: use ms, s, m or h"
                ))
            }
        };
        let secs = value * factor;
        if !secs.is_finite() || secs > 1e9 {
            return Err(format!("duration {s:?} is out of range"));
        }
        total += Duration::from_secs_f64(secs);
    }
    Ok(total)
}
