//! The httpGet gate's request: `GET /drain?policy=drained&max=25s&...`,
//! the kubelet's `preStop: httpGet` hook asking, with the same settings as
//! graceful-wait's flags under the same names (and, like them, overridden
//! by the pod's annotations). The one place the hook's query becomes a
//! drain (fuzzed by `fuzz/fuzz_targets/hook_query.rs`).
//!
//! | key                | value                      | graceful-wait flag      |
//! |--------------------|----------------------------|-------------------------|
//! | `policy`           | `drained` or `quiet`       | `--policy`              |
//! | `scope`            | `pod` or `container`       | `--scope`               |
//! | `min`, `max`       | a duration (`2s`, `500ms`) | `--min`, `--max`        |
//! | `settle`, `quiet`  | a duration                 | `--settle`, `--quiet`   |
//! | `after-containers` | names, comma-separated     | `--after-containers`    |
//! | `container`        | the hook's container       | (the exec hook's cgroup)|
//!
//! The kubelet says nothing of which container's hook it runs, so a pod
//! whose several containers have this hook names each in `container`: that
//! is the container's annotations, its `--scope container`, and its own
//! drain.

use crate::{check_containers, clip, duration, DrainRequest, Policy, Scope, MAX_ECHO, SETTINGS};

/// The path the gate answers.
pub const PATH: &str = "/drain";

/// The longest query accepted: every setting fits in far less.
pub const MAX_QUERY: usize = 4096;

/// The key a query carries beside the [`SETTINGS`]: whose hook it is.
pub const CONTAINER: &str = "container";

/// A hook's request: the drain's settings, and the container it is for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookQuery {
    pub request: DrainRequest,
    /// The container's name, as the pod spec gives it.
    pub container: Option<String>,
}

/// Parses the query of `GET /drain?QUERY` (without the `?`; `""` for
/// none) for a hook that arrived at `started_unix_ms`. An error is one
/// line that names the key and says what it takes.
pub fn parse(query: &str, started_unix_ms: u64) -> Result<HookQuery, String> {
    if query.len() > MAX_QUERY {
        return Err(format!("query over {MAX_QUERY} bytes"));
    }
    let mut q = HookQuery {
        request: DrainRequest {
            started_unix_ms,
            ..DrainRequest::default()
        },
        container: None,
    };
    let mut seen: Vec<&str> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(raw_key)?;
        let Some(&known) = SETTINGS.iter().chain([&CONTAINER]).find(|k| **k == key) else {
            return Err(format!(
                "unknown setting {:?}: the gate takes {}, {CONTAINER}",
                clip(&key, MAX_ECHO),
                SETTINGS.join(", ")
            ));
        };
        if seen.contains(&known) {
            return Err(format!("{known} is given twice"));
        }
        seen.push(known);
        let value = decode(raw_value)?;
        let value = value.trim();
        if value.is_empty() {
            return Err(format!("{known} has no value"));
        }
        set(&mut q, known, value).map_err(|e| format!("{known}: {e}"))?;
    }
    Ok(q)
}

fn set(q: &mut HookQuery, key: &str, value: &str) -> Result<(), String> {
    let r = &mut q.request;
    match key {
        "policy" => {
            r.policy = Some(match value {
                "drained" => Policy::Drained,
                "quiet" => Policy::Quiet,
                _ => return Err(format!("drained or quiet, not {:?}", clip(value, MAX_ECHO))),
            })
        }
        "scope" => {
            r.scope = Some(match value {
                "pod" => Scope::Pod,
                "container" => Scope::Container,
                _ => return Err(format!("pod or container, not {:?}", clip(value, MAX_ECHO))),
            })
        }
        "min" => r.min_ms = Some(ms(value)?),
        "max" => {
            let max = ms(value)?;
            if max == 0 {
                return Err("must be above zero".into());
            }
            r.max_ms = Some(max);
        }
        "settle" => r.settle_ms = Some(ms(value)?),
        "quiet" => r.quiet_ms = Some(ms(value)?),
        "after-containers" => {
            let names: Vec<String> = value
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect();
            check_containers(&names)?;
            r.after_containers = Some(names);
        }
        // Parsed with the annotations, so a bad value is reported and the
        // drain runs without it: a 400 would let the kubelet send SIGTERM
        // at once (it takes any answer as the hook's success).
        "ignore-ports" => r.ignore_ports = Some(value.to_string()),
        "ignore-peers" => r.ignore_peers = Some(value.to_string()),
        CONTAINER => {
            // A DNS label, as the pod spec requires of container names.
            if value.len() > 63
                || !value
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            {
                return Err(format!(
                    "{:?} is not a container name (lowercase letters, digits and -, at most 63)",
                    clip(value, MAX_ECHO)
                ));
            }
            q.container = Some(value.to_string());
        }
        _ => unreachable!("parse only passes SETTINGS and CONTAINER"),
    }
    Ok(())
}

fn ms(value: &str) -> Result<u64, String> {
    let d = duration::parse(value).map_err(|e| clip(&e, 2 * MAX_ECHO))?;
    u64::try_from(d.as_millis()).map_err(|_| "out of range".to_string())
}

/// Percent-decoding, as a URL's query carries what it cannot spell (`%2C`
/// for a comma); `+` is a space.
fn decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| {
                    format!(
                        "bad escape in {:?}: write %XX with two hex digits",
                        clip(s, MAX_ECHO)
                    )
                })?;
                out.push(byte);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("{:?} is not UTF-8 once decoded", clip(s, MAX_ECHO)))
}

#[cfg(test)]
mod tests;
