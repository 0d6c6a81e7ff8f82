//! A drain as the rest of the agent sees it: in progress
//! ([`ActiveDrain`]), released ([`DrainReport`], built once by the drainer
//! and fanned out to its sinks by [`publish`](super::publish)), and the
//! feed of both ([`DrainEvent`]). The field names are a contract: the
//! hook's last line, `/v1/drains`, `/v1/events`, `graceful drains -o json`.

use serde::{Deserialize, Serialize};

pub use graceful_api::Scope;

use super::{engine::Report, policy::Policy};

/// The report of a drain: who, and how it went.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DrainReport {
    pub pod: String,
    pub container: Option<String>,
    pub scope: Scope,
    #[serde(flatten)]
    pub report: Report,
}

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
    /// The exclusion rules in effect, as written (`9090`, `node`,
    /// `10.0.0.0/8`); empty for none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignoring: Vec<String>,
    /// The inbound count at the drain's last look; absent until its
    /// first, which a walk of the pod's sockets can hold up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbound: Option<u64>,
}

/// What the drains tell the rest of the agent, as it happens.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DrainEvent {
    DrainStarted(ActiveDrain),
    DrainReleased(Box<DrainReport>),
    /// The hook went away before its release (the container was killed, or
    /// the hook's own timeout): nothing more to report.
    DrainAbandoned(ActiveDrain),
}
