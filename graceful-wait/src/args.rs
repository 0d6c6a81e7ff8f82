//! Flags, environment and defaults. Durations look like `500ms`, `2s`, `1m`.

use std::time::Duration;

use graceful_api::{DrainRequest, Policy, Scope};

pub const USAGE: &str =
    "usage: graceful-wait [--policy drained|quiet] [--scope pod|container] [--min D] [--max D] \
[--settle D] [--quiet D] [--after-containers a,b] [--ignore-ports 9090,15020] \
[--ignore-peers node,10.0.0.0/8] [--socket PATH|@NAME] [--connect-timeout D] [--fallback-sleep D]";

/// The hook's flags. The drain settings are optional: what a flag leaves
/// out, the agent takes from the pod's annotations (which also override
/// flags) or its defaults, the deadline from the pod's grace period.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    pub socket: String,
    pub policy: Option<String>,
    pub scope: Option<String>,
    pub min: Option<Duration>,
    pub max: Option<Duration>,
    pub settle: Option<Duration>,
    pub quiet: Option<Duration>,
    pub after_containers: Option<Vec<String>>,
    /// As given: the agent parses them, so a bad value is reported in the
    /// drain's warnings and the drain runs without it.
    pub ignore_ports: Option<String>,
    pub ignore_peers: Option<String>,
    pub connect_timeout: Duration,
    pub fallback_sleep: Duration,
}

/// The deadline until the agent says otherwise (and when it cannot be
/// reached): Kubernetes' default grace period, 30 s, less a 5 s budget for
/// the app's own shutdown after SIGTERM.
pub const DEFAULT_MAX: Duration = Duration::from_secs(25);

impl Default for Args {
    fn default() -> Self {
        Self {
            socket: "/graceful/gate.sock".into(),
            policy: None,
            scope: None,
            min: None,
            max: None,
            settle: None,
            quiet: None,
            after_containers: None,
            ignore_ports: None,
            ignore_peers: None,
            connect_timeout: Duration::from_secs(2),
            fallback_sleep: Duration::ZERO,
        }
    }
}

impl Args {
    /// The drain request: only the settings the flags gave.
    pub fn request(&self, started_unix_ms: u64) -> DrainRequest {
        let ms = |d: Option<Duration>| d.map(|d| d.as_millis() as u64);
        DrainRequest {
            // Both checked as the flags were read.
            policy: self.policy.as_deref().map(|p| match p {
                "quiet" => Policy::Quiet,
                _ => Policy::Drained,
            }),
            scope: self.scope.as_deref().map(|s| match s {
                "container" => Scope::Container,
                _ => Scope::Pod,
            }),
            min_ms: ms(self.min),
            max_ms: ms(self.max),
            settle_ms: ms(self.settle),
            quiet_ms: ms(self.quiet),
            after_containers: self.after_containers.clone(),
            ignore_ports: self.ignore_ports.clone(),
            ignore_peers: self.ignore_peers.clone(),
            started_unix_ms,
            resumed: None,
        }
    }
}

/// A duration flag's value, in the one syntax every flag, annotation and
/// query of graceful takes ([`graceful_api::duration::parse`]: `500ms`,
/// `1.5s`, `1m30s`; a bare number is seconds).
fn duration(flag: &str, s: &str) -> Result<Duration, String> {
    graceful_api::duration::parse(s).map_err(|e| format!("{flag}: {e}"))
}

/// Why the flags were not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgsError {
    /// `-h` or `--help`: the usage is the answer, and no error.
    Help,
    /// A bad flag or value, in one line.
    Bad(String),
}

impl std::fmt::Display for ArgsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgsError::Help => f.write_str(USAGE),
            ArgsError::Bad(e) => f.write_str(e),
        }
    }
}

impl From<String> for ArgsError {
    fn from(e: String) -> Self {
        ArgsError::Bad(e)
    }
}

/// Parses flags over the environment's defaults (`GRACEFUL_SOCKET`).
pub fn parse(
    argv: impl IntoIterator<Item = String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Args, ArgsError> {
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
            return Err(ArgsError::Help);
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
                let p = value()?;
                if p != "drained" && p != "quiet" {
                    return Err(format!("--policy must be drained or quiet, not {p:?}").into());
                }
                a.policy = Some(p);
            }
            "--scope" => {
                let s = value()?;
                if s != "pod" && s != "container" {
                    return Err(format!("--scope must be pod or container, not {s:?}").into());
                }
                a.scope = Some(s);
            }
            "--min" => a.min = Some(duration("--min", &value()?)?),
            "--max" => a.max = Some(duration("--max", &value()?)?),
            "--settle" => a.settle = Some(duration("--settle", &value()?)?),
            "--quiet" => a.quiet = Some(duration("--quiet", &value()?)?),
            "--connect-timeout" => a.connect_timeout = duration("--connect-timeout", &value()?)?,
            "--fallback-sleep" => a.fallback_sleep = duration("--fallback-sleep", &value()?)?,
            "--after-containers" => {
                a.after_containers = Some(
                    value()?
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect(),
                )
            }
            "--ignore-ports" => a.ignore_ports = Some(value()?),
            "--ignore-peers" => a.ignore_peers = Some(value()?),
            other => return Err(format!("unknown flag {other}\n{USAGE}").into()),
        }
    }
    if a.max.is_some_and(|m| m.is_zero()) {
        return Err(ArgsError::Bad("--max must be above zero".into()));
    }
    Ok(a)
}

#[cfg(test)]
mod tests;
