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

pub use graceful_api::{Accepted, DrainRequest, Scope, MAX_BODY};

/// One line of the drain stream.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line {
    /// First: the settings in effect.
    Accepted(Box<Accepted>),
    Progress {
        ms: u64,
        inbound: u64,
    },
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

pub use crate::reply::ErrorBody;

/// A drain in progress, as the local API's `/v1/drains` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ActiveDrain {
    /// Unique within this agent's run.
    pub id: u64,
    pub pod: String,
    pub container: Option<String>,
    pub scope: Scope,
    pub policy: Policy,
    pub max_ms: u64,
    /// CLOCK_MONOTONIC ns when the hook started (its own clock, converted).
    pub start_ns: u64,
    pub cgroups: Vec<u64>,
}

/// What the gate tells the rest of the agent, as it happens.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GateEvent {
    DrainStarted(ActiveDrain),
    DrainReleased(Box<DrainReport>),
    /// The hook went away before its release (the container was killed, or
    /// the hook's own timeout): nothing more to report.
    DrainAbandoned(ActiveDrain),
}
