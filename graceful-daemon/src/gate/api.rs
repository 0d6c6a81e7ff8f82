//! What the gate socket accepts and answers. HTTP/1.1 with JSON bodies, so
//! `curl --unix-socket /graceful/gate.sock` works for debugging.
//!
//! - `POST /v1/drain` with a [`DrainRequest`]: drains the *caller's* pod
//!   or container and streams NDJSON lines: `{"type":"progress",...}`,
//!   then one `{"type":"report",...}`.
//! - `GET /v1/self`: the caller's pod, container and counts.
//!
//! The caller is who SO_PEERCRED says it is; there is no way to name
//! another pod.

use serde::{Deserialize, Serialize};

use crate::drain::{engine::Report, policy::Policy};

/// Largest request body accepted.
pub const MAX_BODY: usize = 64 * 1024;

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
    /// Release once these containers of the same pod have exited (ids, or
    /// names once the Kubernetes API has told them).
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

/// One line of the drain stream.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line {
    Progress { ms: u64, inbound: u64 },
    Report(Box<DrainReport>),
}

/// The report of a drain through the gate: who, and how it went.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DrainReport {
    pub pod: String,
    pub container: Option<String>,
    pub scope: Scope,
    #[serde(flatten)]
    pub report: Report,
}

/// The caller, as `GET /v1/self` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SelfView {
    pub pod: String,
    pub container: Option<String>,
    pub pod_cgroups: Vec<u64>,
    pub inbound_live: u64,
    pub outbound_live: u64,
    pub listeners: u64,
}

/// Every error body: one line a person can act on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}
