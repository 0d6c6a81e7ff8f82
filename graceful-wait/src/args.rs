//! Flags, environment and defaults. Durations look like `500ms`, `2s`, `1m`.

use std::time::Duration;

pub const USAGE: &str =
    "usage: graceful-wait [--policy drained|quiet] [--scope pod|container] [--min D] [--max D] \
[--settle D] [--quiet D] [--after-containers a,b] [--socket PATH] [--connect-timeout D] [--fallback-sleep D]";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    pub socket: String,
    pub policy: String,
    pub scope: String,
    pub min: Duration,
    pub max: Duration,
    pub settle: Duration,
    pub quiet: Duration,
    pub after_containers: Vec<String>,
    pub connect_timeout: Duration,
    pub fallback_sleep: Duration,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            socket: "/graceful/gate.sock".into(),
            policy: "drained".into(),
            scope: "pod".into(),
            // Endpoint removal takes a moment to reach kube-proxy and load
            // balancers: never release before this.
            min: Duration::from_secs(2),
            // Kubernetes' default grace period (30 s) less a 5 s budget for
            // the app's own shutdown after SIGTERM.
            max: Duration::from_secs(25),
            settle: Duration::from_secs(1),
            quiet: Duration::from_secs(5),
            after_containers: Vec::new(),
            connect_timeout: Duration::from_secs(2),
            fallback_sleep: Duration::ZERO,
        }
    }
}

/// `500ms`, `2s`, `1m`, `1m30s`; a bare number is seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?}: write it like 500ms, 2s or 1m");
    if let Ok(n) = s.parse::<u64>() {
        return Ok(Duration::from_secs(n));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let d = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            _ => return Err(bad()),
        };
        total = total.saturating_add(d);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// Parses flags over the environment's defaults (`GRACEFUL_SOCKET`).
pub fn parse(
    argv: impl IntoIterator<Item = String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Args, String> {
    let mut a = Args::default();
    if let Some(s) = env("GRACEFUL_SOCKET") {
        a.socket = s;
    }
    let mut it = argv.into_iter();
    while let Some(flag) = it.next() {
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (flag.clone(), None),
        };
        if name == "-h" || name == "--help" {
            return Err(USAGE.into());
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match name.as_str() {
            "--socket" => a.socket = value()?,
            "--policy" => {
                a.policy = value()?;
                if a.policy != "drained" && a.policy != "quiet" {
                    return Err(format!("--policy must be drained or quiet, not {:?}", a.policy));
                }
            }
            "--scope" => {
                a.scope = value()?;
                if a.scope != "pod" && a.scope != "container" {
                    return Err(format!("--scope must be pod or container, not {:?}", a.scope));
                }
            }
            "--min" => a.min = duration(&value()?)?,
            "--max" => a.max = duration(&value()?)?,
            "--settle" => a.settle = duration(&value()?)?,
            "--quiet" => a.quiet = duration(&value()?)?,
            "--connect-timeout" => a.connect_timeout = duration(&value()?)?,
            "--fallback-sleep" => a.fallback_sleep = duration(&value()?)?,
            "--after-containers" => {
                a.after_containers = value()?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    if a.max.is_zero() {
        return Err("--max must be above zero".into());
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Args, String> {
        parse(args.iter().map(|s| s.to_string()), |_| None)
    }

    #[test]
    fn flags_and_durations() {
        let a = p(&[
            "--policy",
            "quiet",
            "--scope=container",
            "--min",
            "500ms",
            "--max",
            "1m",
            "--after-containers",
            "app,db",
        ])
        .unwrap();
        assert_eq!(a.policy, "quiet");
        assert_eq!(a.scope, "container");
        assert_eq!(a.min, Duration::from_millis(500));
        assert_eq!(a.max, Duration::from_secs(60));
        assert_eq!(a.after_containers, vec!["app", "db"]);
        assert_eq!(duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(p(&["--policy", "soon"]).is_err());
        assert!(p(&["--min"]).is_err());
        assert!(p(&["--max", "0s"]).is_err());
        assert!(p(&["--bogus"]).is_err());
        assert!(duration("5x").is_err());
        let env = parse(Vec::new(), |k| {
            (k == "GRACEFUL_SOCKET").then(|| "/x.sock".to_string())
        })
        .unwrap();
        assert_eq!(env.socket, "/x.sock");
    }
}
