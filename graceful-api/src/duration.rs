//! Durations as people write them: `500ms`, `2s`, `1m`, `1h`, `1m30s`.
//! Here, not in the agent, because the httpGet gate's query carries them
//! and the fuzz targets build this crate alone.

use std::time::Duration;

/// The longest duration accepted, bare or summed: far past any grace
/// period, and within what milliseconds in a `u64` (and `Duration`) hold.
pub const MAX_SECS: u64 = 1_000_000_000;

/// Parses `500ms`, `2s`, `1m`, `1h` and sums like `1m30s`. A bare number is
/// seconds. Decimals (`1.5s`) are exact to the nanosecond: no float between
/// the text and the value, so `Nms` is always N milliseconds.
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("empty duration: write it like 500ms, 2s or 1m".into());
    }
    let out_of_range = || format!("duration {s:?} is out of range (at most {MAX_SECS} s)");
    if let Ok(secs) = s.parse::<u64>() {
        if secs > MAX_SECS {
            return Err(out_of_range());
        }
        return Ok(Duration::from_secs(secs));
    }
    const MAX_NANOS: u128 = MAX_SECS as u128 * 1_000_000_000;
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let number = &rest[..digits];
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        if digits == 0 || frac.contains('.') || (int.is_empty() && frac.is_empty()) {
            return Err(format!("invalid duration {s:?}: write it like 500ms, 2s or 1m"));
        }
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let unit_nanos: u128 = match unit {
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(format!(
                    "invalid duration unit {unit:?} in {s:?}: use ms, s, m or h"
                ))
            }
        };
        // Digits past the 18th of a fraction are under a nanosecond of an hour.
        let frac = &frac[..frac.len().min(18)];
        let whole = if int.is_empty() {
            Some(0)
        } else {
            int.parse::<u128>().ok()
        };
        let part = whole
            .and_then(|w| w.checked_mul(unit_nanos))
            .and_then(|w| {
                let f: u128 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
                w.checked_add(f * unit_nanos / 10u128.pow(frac.len() as u32))
            })
            .filter(|n| *n <= MAX_NANOS)
            .ok_or_else(out_of_range)?;
        total += part;
        if total > MAX_NANOS {
            return Err(out_of_range());
        }
    }
    let secs = (total / 1_000_000_000) as u64;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

#[cfg(test)]
mod tests;
