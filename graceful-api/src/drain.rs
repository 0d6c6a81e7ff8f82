//! A drain as every client reads it: the lines of the hook's stream
//! ([`Line`]: accepted, progress, then one report), how it ended
//! ([`DrainReport`]), a drain in progress ([`ActiveDrain`]) and the feed of
//! both ([`DrainEvent`]), the caller as `GET /v1/self` shows it
//! ([`SelfView`]), and every error body ([`ErrorBody`]). The agent writes
//! them; graceful-wait reads the lines by member with the std-only
//! [`codec`](crate::codec) (a property test reads every line serde writes
//! that way); the CLI, the plugin and the tests read them with serde. The
//! field names are the contract: the hook's last line, `/v1/drains`,
//! `/v1/events`, `graceful drains -o json`.

use serde::{Deserialize, Serialize};

use crate::{is_zero, Accepted, Point, Policy, Reason, Scope};

#[cfg(test)]
mod tests;

/// One line of the drain stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// The caller, as `GET /v1/self` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfView {
    pub pod: String,
    pub container: Option<String>,
    pub pod_cgroups: Vec<u64>,
    pub inbound_live: u64,
    pub outbound_live: u64,
    pub listeners: u64,
}

/// Every error body: one line a person can act on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

/// The report of a drain: who, and how it went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainReport {
    pub pod: String,
    pub container: Option<String>,
    pub scope: Scope,
    #[serde(flatten)]
    pub report: Report,
}

/// How a drain ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub reason: Reason,
    pub policy: Policy,
    pub waited_ms: u64,
    pub inbound_at_start: u64,
    pub peak_inbound: u64,
    pub inbound_at_release: u64,
    /// Inbound connections opened during the drain.
    pub new_connections: u64,
    /// CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    pub release_ns: u64,
    /// Milliseconds from the last inbound close to the release (when released as drained).
    pub after_last_close_ms: Option<u64>,
    pub timeline: Vec<Point>,
    pub cgroups: Vec<u64>,
    /// What the exclusions left out (`ignore-ports`, `ignore-peers`), a
    /// rule each, in the order written: every figure above counts the
    /// other connections only. Absent for a drain without exclusions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<Ignored>,
    /// Connections the exclusions left out that were live at the release.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ignored_at_release: u64,
    /// The counts may have been short (the counters map was full), and
    /// the drain was held to its deadline for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uncounted: bool,
}

/// One exclusion rule and what it left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ignored {
    /// As written: a port (`9090`), `node`, or a network (`10.0.0.0/8`).
    pub rule: String,
    /// Inbound connections it left out: those live as the drain started,
    /// and those opened since.
    pub connections: u64,
}

/// A drain in progress, as the local API's `/v1/drains` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// What the drains tell the rest of the agent, and `/v1/events`'
/// watchers, as it happens.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DrainEvent {
    DrainStarted(ActiveDrain),
    DrainReleased(Box<DrainReport>),
    /// The hook went away before its release (the container was killed, or
    /// the hook's own timeout): nothing more to report.
    DrainAbandoned(ActiveDrain),
}
