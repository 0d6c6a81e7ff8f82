//! The httpGet gate's query: whatever a kubelet (or anything that can
//! reach the gate) puts after `GET /drain?`, it parses into a checked
//! request or gives a short error line; and what parses, written back out
//! from its values, parses again the same.
//!
//! Input: the first 8 bytes (little-endian) are the hook's arrival time,
//! the rest the query, decoded lossily (invalid UTF-8 becomes U+FFFD, so
//! every input reaches the parser).

use graceful_api::{
    check_containers,
    hook_query::{parse, HookQuery, MAX_QUERY},
    MAX_ECHO,
};

/// The longest error: a quoted value is at most `MAX_ECHO` characters
/// (then an ellipsis and its length), each at most 10 bytes once escaped
/// by `{:?}` (`\u{10ffff}`), and the fixed text around it is short.
const MAX_ERROR: usize = 10 * MAX_ECHO + 256;

/// The target: panics if `data` breaks what this file asserts.
pub fn check(data: &[u8]) {
    let (started, query) = match data.split_first_chunk::<8>() {
        Some((t, rest)) => (u64::from_le_bytes(*t), rest),
        None => (0, data),
    };
    let query = String::from_utf8_lossy(query);
    match parse(&query, started) {
        Ok(q) => {
            assert!(query.len() <= MAX_QUERY);
            let r = &q.request;
            assert_eq!(r.started_unix_ms, started);
            assert_ne!(r.max_ms, Some(0));
            assert!(r.resumed.is_none());
            if let Some(a) = &r.after_containers {
                check_containers(a).unwrap();
            }
            if let Some(c) = &q.container {
                assert!(
                    !c.is_empty()
                        && c.len() <= 63
                        && c.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                    "{c:?} is not a DNS label"
                );
            }
            let again = encode(&q);
            // Durations in ms may be longer than as written (1h): a query
            // at the limit may not fit once written back.
            assert!(again.len() <= query.len() + 64, "{again:?}");
            if again.len() <= MAX_QUERY {
                assert_eq!(parse(&again, started), Ok(q), "{again:?}");
            }
        }
        Err(e) => {
            assert!(!e.is_empty());
            assert!(!e.chars().any(char::is_control), "{e:?}");
            assert!(e.len() <= MAX_ERROR, "{} bytes: {e:?}", e.len());
        }
    }
}

/// `q` as a query, from its values: durations in ms, names and exclusions as they are
/// but for the three characters the query's syntax takes (`%`, `&`, `+`).
fn encode(q: &HookQuery) -> String {
    let r = &q.request;
    let mut pairs: Vec<String> = Vec::new();
    if let Some(p) = r.policy {
        pairs.push(format!("policy={}", p.as_str()));
    }
    if let Some(s) = r.scope {
        pairs.push(format!("scope={}", s.as_str()));
    }
    for (key, v) in [
        ("min", r.min_ms),
        ("max", r.max_ms),
        ("settle", r.settle_ms),
        ("quiet", r.quiet_ms),
    ] {
        if let Some(ms) = v {
            pairs.push(format!("{key}={ms}ms"));
        }
    }
    if let Some(names) = &r.after_containers {
        // No names at all is a lone comma: an empty value is refused.
        let list = if names.is_empty() {
            "%2C".to_string()
        } else {
            names.iter().map(|n| percent(n)).collect::<Vec<_>>().join(",")
        };
        pairs.push(format!("after-containers={list}"));
    }
    // Kept as written: the agent parses them with the annotations.
    for (key, v) in [
        ("ignore-ports", &r.ignore_ports),
        ("ignore-peers", &r.ignore_peers),
    ] {
        if let Some(v) = v {
            pairs.push(format!("{key}={}", percent(v)));
        }
    }
    if let Some(c) = &q.container {
        pairs.push(format!("container={}", percent(c)));
    }
    pairs.join("&")
}

fn percent(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            '&' => out.push_str("%26"),
            '+' => out.push_str("%2B"),
            c => out.push(c),
        }
    }
    out
}
