//! What an app team reads without any right in the agents' namespace: the
//! Events graceful's agents post on its pods (core/v1, `reportingComponent:
//! graceful`), in its own namespace, with its own RBAC (`list` on events,
//! which the `view` ClusterRole grants). One LIST through the API server,
//! filtered there, whatever the number of nodes; nothing reaches an agent.
//! They last as long as the API server keeps Events (`--event-ttl`, an
//! hour by default): for longer, the per-workload metrics.
//!
//! - `kubectl graceful history -n shop`: the namespace's drains and
//!   terminations, oldest first;
//! - `kubectl graceful at-risk --events -n shop`: its workloads ranked from
//!   the terminating reports' Events;
//! - `kubectl graceful recommend -n shop`: each workload's drains, from the
//!   released drains' Events, and the `max` and grace period they call for.

use graceful_api::{
    termination::{
        Outcome, EVENT_COMPONENT, EVENT_GRACE_PERIOD_S, EVENT_INBOUND_OPEN, EVENT_MAX_MS, EVENT_OPTED_IN,
        EVENT_RELEASE_REASON, EVENT_WAITED_MS, EVENT_WORKLOAD,
    },
    views::{at_risk::Seen, recommend::Drain, table::table},
    Reason,
};
use k8s_openapi::{api::core::v1::Event, jiff::Timestamp};
use kube::{api::ListParams, Api, Client};

/// Where to list: a namespace (`-n`, else the kubeconfig's), or all.
pub enum Where<'a> {
    Namespace(Option<&'a str>),
    All,
}

/// graceful's Events, oldest first.
pub async fn list(client: Client, at: Where<'_>) -> anyhow::Result<Vec<Event>> {
    let (api, what): (Api<Event>, String) = match at {
        Where::All => (Api::all(client), "any namespace".into()),
        Where::Namespace(ns) => {
            let ns = ns.unwrap_or(client.default_namespace()).to_string();
            (Api::namespaced(client, &ns), format!("namespace {ns}"))
        }
    };
    let params = ListParams::default().fields(&format!("reportingComponent={EVENT_COMPONENT}"));
    let mut items = match api.list(&params).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(s)) if s.code == 403 => anyhow::bail!(
            "cannot list Events in {what}: {} (the view ClusterRole grants it)",
            s.message
        ),
        Err(e) => anyhow::bail!("cannot list Events in {what}: {e}"),
    };
    // Whole seconds, then the microseconds of the Event's own time.
    items.sort_by_key(|e| (last_seen(e), e.event_time.as_ref().map(|t| t.0)));
    Ok(items)
}

/// When it last happened: the repeat's time, else its own.
fn last_seen(e: &Event) -> Option<Timestamp> {
    let last = e.last_timestamp.as_ref().map(|t| t.0);
    last.or_else(|| e.event_time.as_ref().map(|t| t.0))
}

/// The namespace an Event is about: its own, where RBAC put it. One that
/// names a pod of another namespace (the API server allows it for Events
/// with an `eventTime`) is no report of graceful's: `None`.
fn namespace(e: &Event) -> Option<String> {
    let own = e.metadata.namespace.clone()?;
    let io = &e.involved_object;
    (io.namespace.as_deref() == Some(own.as_str()) && io.kind.as_deref() == Some("Pod")).then_some(own)
}

fn note<'a>(e: &'a Event, key: &str) -> Option<&'a str> {
    e.metadata.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The terminating reports among `events`, as the ranking reads them.
pub fn terminations(events: &[Event]) -> Vec<Seen> {
    events
        .iter()
        .filter_map(|e| {
            let outcome = Outcome::of_event_reason(e.reason.as_deref()?)?;
            Some(Seen {
                namespace: namespace(e)?,
                name: e.involved_object.name.clone()?,
                workload: note(e, EVENT_WORKLOAD).map(String::from),
                outcome,
                inbound_open: note(e, EVENT_INBOUND_OPEN)
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
                opted_in: note(e, EVENT_OPTED_IN).and_then(|b| b.parse().ok()),
            })
        })
        .collect()
}

/// The released drains among `events` (an older agent's, without their
/// figures, are left out), as `recommend` reads them.
pub fn drains(events: &[Event]) -> Vec<Drain> {
    events
        .iter()
        .filter(|e| matches!(e.reason.as_deref(), Some("DrainReleased" | "DrainDeadline")))
        .filter_map(|e| {
            Some(Drain {
                namespace: namespace(e)?,
                workload: note(e, EVENT_WORKLOAD).unwrap_or("-").to_string(),
                waited_ms: note(e, EVENT_WAITED_MS)?.parse().ok()?,
                at_deadline: note(e, EVENT_RELEASE_REASON) == Some(Reason::Deadline.as_str()),
                max_ms: note(e, EVENT_MAX_MS).and_then(|m| m.parse().ok()),
                grace_period_s: note(e, EVENT_GRACE_PERIOD_S).and_then(|g| g.parse().ok()),
            })
        })
        .collect()
}

/// The history table: one row per Event, oldest first; the age as kubectl
/// prints it, `xN` for a repeat counted on it.
pub fn render(events: &[Event], now: Timestamp) -> String {
    if events.is_empty() {
        return "No Event of graceful's: none of its drains or terminating reports in the time the API server keeps Events.\n".into();
    }
    let mut rows = vec![["LAST SEEN", "TYPE", "REASON", "POD", "WORKLOAD", "MESSAGE"]
        .map(String::from)
        .to_vec()];
    for e in events {
        let age = last_seen(e).map_or("-".into(), |t| age(now.duration_since(t).as_secs()));
        let count = e
            .count
            .filter(|c| *c > 1)
            .map(|c| format!(" (x{c})"))
            .unwrap_or_default();
        rows.push(vec![
            age,
            e.type_.clone().unwrap_or_default(),
            e.reason.clone().unwrap_or_default(),
            e.involved_object.name.clone().unwrap_or_default(),
            note(e, EVENT_WORKLOAD).unwrap_or("-").to_string(),
            format!("{}{count}", e.message.as_deref().unwrap_or_default()),
        ]);
    }
    let mut out = table(&rows);
    out.push('\n');
    out
}

/// `45s`, `12m`, `3h`, `2d`.
fn age(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests;
