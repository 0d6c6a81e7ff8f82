//! The drain gate's wire contract, shared by the agent and the fuzz
//! targets: what a pod may ask (`POST /v1/drain`), and the names of the
//! policies and release reasons that reports carry.

use serde::{Deserialize, Serialize};

/// Largest request body the gate accepts.
pub const MAX_BODY: usize = 64 * 1024;

/// How a drain decides it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Live inbound connections have been zero for `settle`, and none arrived meanwhile.
    Drained,
    /// No new inbound connection and no inbound payload for `quiet`, even
    /// if idle keep-alive connections remain (the app's own SIGTERM
    /// handling closes them). Also released when drained.
    Quiet,
}

/// Why a drain was released. The names are the report's contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    Drained,
    Quiet,
    Deadline,
    ContainersExited,
    AgentUnreachable,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Drained => "drained",
            Reason::Quiet => "quiet",
            Reason::Deadline => "deadline",
            Reason::ContainersExited => "containers-exited",
            Reason::AgentUnreachable => "agent-unreachable",
        }
    }
}

/// Which connections a drain counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The whole pod's inbound connections (sidecars that must outlive the app).
    #[default]
    Pod,
    /// Only the calling container's own.
    Container,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DrainRequest {
    pub policy: Policy,
    #[serde(default)]
    pub scope: Scope,
    #[serde(default)]
    pub min_ms: u64,
    pub max_ms: u64,
    #[serde(default = "default_settle")]
    pub settle_ms: u64,
    #[serde(default = "default_quiet")]
    pub quiet_ms: u64,
    /// Release once these containers of the same pod have exited (names,
    /// once the Kubernetes API has told them, or id prefixes).
    #[serde(default)]
    pub after_containers: Vec<String>,
    /// When the client started waiting (Unix ms). A client that reconnects
    /// after an agent restart sends the same value, so the drain continues
    /// from its original start.
    pub started_unix_ms: u64,
}

fn default_settle() -> u64 {
    1000
}

fn default_quiet() -> u64 {
    5000
}

impl DrainRequest {
    /// Parses and checks a request body: the one place untrusted bytes
    /// from a pod become a drain (fuzzed by `fuzz/fuzz_targets/drain_request.rs`).
    pub fn parse(body: &[u8]) -> Result<DrainRequest, String> {
        if body.len() > MAX_BODY {
            return Err(format!("request body over {MAX_BODY} bytes"));
        }
        let r: DrainRequest =
            serde_json::from_slice(body).map_err(|e| one_line(&format!("invalid drain request: {e}")))?;
        if r.max_ms == 0 {
            return Err("max_ms must be above zero".into());
        }
        if r.after_containers.len() > 64 || r.after_containers.iter().any(|c| c.is_empty() || c.len() > 256) {
            return Err("after_containers: at most 64 names of 1 to 256 characters".into());
        }
        Ok(r)
    }
}

/// Error messages quote the request (an unknown variant, say): keep them
/// one line whatever the pod sent.
fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_with_defaults_and_reject_the_rest() {
        let r = DrainRequest::parse(br#"{"policy":"quiet","max_ms":5000,"started_unix_ms":1}"#).unwrap();
        assert_eq!(
            (r.policy, r.scope, r.settle_ms, r.quiet_ms),
            (Policy::Quiet, Scope::Pod, 1000, 5000)
        );
        for bad in [
            &br#"{"policy":"soon","max_ms":1,"started_unix_ms":1}"#[..],
            br#"{"policy":"drained","max_ms":0,"started_unix_ms":1}"#,
            br#"{"policy":"drained","max_ms":1,"started_unix_ms":1,"pod":"someone-else"}"#,
            br#"{"policy":"drained","max_ms":1,"started_unix_ms":1,"after_containers":[""]}"#,
            b"{",
            b"",
            // Found by the fuzzer: a newline inside an unknown variant.
            b"{\"policy\":\"a\nb\"}",
        ] {
            let e = DrainRequest::parse(bad).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
        assert_eq!(
            serde_json::to_string(&Reason::ContainersExited).unwrap(),
            "\"containers-exited\""
        );
    }
}
