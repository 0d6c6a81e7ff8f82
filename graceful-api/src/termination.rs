//! A terminating pod as every client reads it: while the agent watches it
//! ([`Watched`], `/v1/drains`' `terminating`), and the report it gets
//! ([`TerminationReport`]: its outcome, the figures a log line and an
//! Event carry, and the Event's one-line message), in `/v1/drains`'
//! `terminated` and on `/v1/events`. The agent writes them; the CLI, the
//! plugin and the tests read them with serde. The field names are a
//! contract: a field added later is optional, so a client reads an older
//! agent's answers.

use serde::{Deserialize, Serialize};

/// The annotations graceful's Events carry, for the clients that read a
/// namespace's Events rather than the agents (`kubectl graceful history`,
/// `at-risk --events`): the pod's workload (every Event on a pod the API
/// named), and, on a terminating pod's report, the inbound connections
/// open when it was reported and whether the pod had opted in.
pub const EVENT_WORKLOAD: &str = "graceful.dev/workload";
/// The `reportingComponent` (and `source.component`) of every Event the
/// agents post: what the clients that read Events select on.
pub const EVENT_COMPONENT: &str = "graceful";
pub const EVENT_INBOUND_OPEN: &str = "graceful.dev/inbound-open";
pub const EVENT_OPTED_IN: &str = "graceful.dev/opted-in";
/// On a released drain's Event (`DrainReleased`, `DrainDeadline`): how
/// long it held the SIGTERM, why it released (`drained`, `quiet`,
/// `deadline`, `containers-exited`), its deadline, and the pod's grace
/// period, for `kubectl graceful recommend`.
pub const EVENT_WAITED_MS: &str = "graceful.dev/waited-ms";
pub const EVENT_RELEASE_REASON: &str = "graceful.dev/release-reason";
pub const EVENT_MAX_MS: &str = "graceful.dev/max-ms";
pub const EVENT_GRACE_PERIOD_S: &str = "graceful.dev/grace-period-s";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Inbound reached zero with the containers still running.
    Drained,
    /// A container exited with inbound connections open.
    Exited,
    /// The pod object was deleted with inbound connections open.
    Deleted,
}

impl Outcome {
    /// Every outcome a report can have.
    pub const ALL: [Outcome; 3] = [Outcome::Drained, Outcome::Exited, Outcome::Deleted];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Drained => "drained",
            Outcome::Exited => "exited",
            Outcome::Deleted => "deleted",
        }
    }

    pub fn event_reason(self) -> &'static str {
        match self {
            Outcome::Drained => "InboundDrained",
            Outcome::Exited => "ExitedBeforeDrain",
            Outcome::Deleted => "DeletedBeforeDrain",
        }
    }

    /// The outcome an Event's reason reports; `None` for any other Event.
    pub fn of_event_reason(reason: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.event_reason() == reason)
    }
}

/// A pod being watched since its deletion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Watched {
    pub uid: String,
    pub inbound_at_deletion: u64,
    pub inbound_now: u64,
    /// CLOCK_MONOTONIC ns of the deletion (on the agent's node).
    pub deletion_ns: u64,
    pub deletion_requested_at: Option<String>,
}

/// One terminating pod's report. The field names are a contract (logs,
/// `graceful pods`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TerminationReport {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub outcome: Outcome,
    /// From deletion to the report.
    pub seconds_since_deletion: f64,
    /// The pod's inbound connections when its deletion was seen.
    pub inbound_at_deletion: u64,
    /// Open when reported: 0 when drained; for `exited`, those the exit
    /// closed; for `deleted`, those still counted.
    pub inbound_open: u64,
    /// The container that exited, for `exited`.
    pub container: Option<String>,
    /// The API's deletion request time (RFC 3339).
    pub deletion_requested_at: Option<String>,
    pub grace_period_seconds: Option<i64>,
    /// Deletion was seen more than 2 s after the API's request time.
    pub observed_late: bool,
    /// CLOCK_MONOTONIC ns of the report and of the pod's last inbound close.
    pub report_ns: u64,
    pub last_inbound_close_ns: u64,
    pub cgroups: Vec<u64>,
    /// The pod's controller, `kind/name` (`deployment/checkout`), `pod`
    /// without one; absent from an older agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// The pod carried anything of graceful's (a gate, an annotation); a
    /// pod reported without is one a widened report scope took in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opted_in: Option<bool>,
}

impl TerminationReport {
    /// What its Event carries besides the message (the workload comes
    /// with the pod): [`EVENT_INBOUND_OPEN`], [`EVENT_OPTED_IN`].
    pub fn event_notes(&self) -> Vec<(&'static str, String)> {
        let mut notes = vec![(EVENT_INBOUND_OPEN, self.inbound_open.to_string())];
        if let Some(o) = self.opted_in {
            notes.push((EVENT_OPTED_IN, o.to_string()));
        }
        notes
    }

    /// The Event's one-line message.
    pub fn message(&self) -> String {
        let grace = self
            .grace_period_seconds
            .map(|g| format!(", grace period {g}s"))
            .unwrap_or_default();
        let s = self.seconds_since_deletion;
        let at = self.inbound_at_deletion;
        match self.outcome {
            Outcome::Drained => format!(
                "inbound connections drained {s:.3}s after deletion ({at} open at deletion{grace})"
            ),
            Outcome::Exited => format!(
                "container {} exited {s:.3}s after deletion with {} inbound connection(s) still open ({at} at deletion{grace}); the kernel closed them",
                self.container.as_deref().unwrap_or("?"),
                self.inbound_open
            ),
            Outcome::Deleted => format!(
                "pod object removed {s:.3}s after deletion with {} inbound connection(s) still open ({at} at deletion{grace})",
                self.inbound_open
            ),
        }
    }
}
