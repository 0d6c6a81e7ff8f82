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

use crate::drain::engine::Report;

pub use graceful_api::{DrainRequest, Scope, MAX_BODY};

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
