//! What drains take from the Kubernetes API, when the agent has it: the
//! calling pod's annotations and grace period (for its settings), and
//! Events on the pod (misconfigurations, releases).

use std::sync::Arc;

use graceful_api::{
    drain::DrainReport,
    termination::{EVENT_GRACE_PERIOD_S, EVENT_MAX_MS, EVENT_RELEASE_REASON, EVENT_WAITED_MS},
};

use super::{policy::Reason, settings::PodFacts, stop_order};
use crate::{
    duration,
    node::kube::{events::Notes, pod::ContainerKind, EventPoster, PodRef, PodStore},
};

#[derive(Clone)]
pub struct PodKube {
    pub store: Arc<PodStore>,
    pub events: EventPoster,
}

impl PodKube {
    /// The facts about pod `uid` for container `container_id`; empty when
    /// the API has not told of the pod (yet).
    pub fn facts(&self, uid: &str, container_id: Option<&str>) -> PodFacts {
        let Some(p) = self.store.get(uid) else {
            return PodFacts::default();
        };
        let container = container_id.and_then(|id| {
            p.containers
                .iter()
                .find(|c| c.id.as_deref() == Some(id) || c.previous_ids.iter().any(|x| x == id))
                .map(|c| c.name.clone())
        });
        PodFacts {
            annotations: p.annotations.clone(),
            container,
            grace_period_seconds: p.grace_period_seconds(),
            deletion_requested_unix_ms: p
                .deletion_requested_at()
                .and_then(|t| u64::try_from(t.as_millisecond()).ok()),
            mesh_ports: crate::node::kube::mesh::own_ports(&p).to_vec(),
            stop_ranks: stop_order::ranks(
                p.containers
                    .iter()
                    .filter(|c| c.kind == ContainerKind::App)
                    .map(|c| c.name.as_str()),
                &p.containers
                    .iter()
                    .filter(|c| c.kind == ContainerKind::Sidecar)
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>(),
            ),
        }
    }

    fn pod_ref(&self, uid: &str) -> Option<PodRef> {
        Some(self.store.get(uid)?.pod_ref())
    }

    fn post(&self, uid: &str, reason: &'static str, message: String, warning: bool) {
        self.post_with(uid, reason, message, warning, Notes::new());
    }

    fn post_with(&self, uid: &str, reason: &'static str, message: String, warning: bool, notes: Notes) {
        let Some(pod) = self.pod_ref(uid) else {
            return;
        };
        self.events.post_later_with(pod, reason, message, warning, notes);
    }

    /// A Warning Event listing what was wrong with a drain's settings.
    pub fn misconfigured(&self, uid: &str, container: Option<&str>, warnings: &[String]) {
        if warnings.is_empty() {
            return;
        }
        let who = container.map(|c| format!("container {c}: ")).unwrap_or_default();
        self.post(
            uid,
            "DrainMisconfigured",
            format!("{who}{}", warnings.join("; ")),
            true,
        );
    }

    /// A Warning Event: the drain of `uid` is held to its deadline, since
    /// its counts may be short (`why`).
    pub fn uncounted(&self, uid: &str, container: Option<&str>, why: &str) {
        let who = container.map(|c| format!("container {c}: ")).unwrap_or_default();
        self.post(uid, "DrainUncounted", format!("{who}{why}"), true);
    }

    /// The Event of a released drain: Normal, or Warning when it hit its
    /// deadline (`max_ms`) with connections still open. Annotated with
    /// what `kubectl graceful recommend` reads: the wait, the release
    /// reason, the deadline and the pod's grace period.
    pub fn released(&self, r: &DrainReport, container: Option<&str>, max_ms: u64) {
        let rep = &r.report;
        let who = container
            .map(|c| format!("container {c}"))
            .unwrap_or_else(|| "the pod".into());
        let waited = duration::format(std::time::Duration::from_millis(rep.waited_ms));
        let why = match (rep.reason, rep.after_last_close_ms) {
            (Reason::Drained, Some(after)) => format!("drained, {after} ms after the last inbound close"),
            (Reason::Deadline, _) => format!(
                "deadline reached with {} inbound connection(s) open",
                rep.inbound_at_release
            ),
            (reason, _) => reason.as_str().to_string(),
        };
        let message = format!(
            "held the SIGTERM of {who} for {waited}: {why} ({} inbound at start, peak {}, {} new during the drain; policy {})",
            rep.inbound_at_start,
            rep.peak_inbound,
            rep.new_connections,
            rep.policy.as_str()
        );
        let deadline = rep.reason == Reason::Deadline && rep.inbound_at_release > 0;
        let reason = if deadline {
            "DrainDeadline"
        } else {
            "DrainReleased"
        };
        let mut notes: Notes = vec![
            (EVENT_WAITED_MS, rep.waited_ms.to_string()),
            (EVENT_RELEASE_REASON, rep.reason.as_str().to_string()),
            (EVENT_MAX_MS, max_ms.to_string()),
        ];
        let grace = self.store.get(&r.pod).and_then(|p| p.grace_period_seconds());
        notes.extend(grace.map(|g| (EVENT_GRACE_PERIOD_S, g.to_string())));
        self.post_with(&r.pod, reason, message, deadline, notes);
    }
}
