//! Kubernetes Events on pods (core/v1), as `kubectl describe pod` shows
//! them.
//!
//! An Event is posted with the fields both the old and the new Event
//! readers use: `source` and `firstTimestamp`/`lastTimestamp`/`count` for
//! `kubectl describe`, `eventTime`/`reportingComponent`/`reportingInstance`/
//! `action` for `kubectl events` and events.k8s.io/v1. The API server
//! requires `action` and `reportingComponent` once `eventTime` is set.
//!
//! Posting never holds its caller long: it gives up after a timeout, and a
//! failure is logged and returned, never retried (an Event is a courtesy;
//! the log line beside it is the record). What the agent posts as things
//! happen ([`EventPoster::post_later`]) is aggregated and paced per pod
//! ([`correlate`]), so no pod can make the agent write to the API in a
//! loop.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use graceful_api::termination::EVENT_WORKLOAD;
use k8s_openapi::{
    api::core::v1::{Event, EventSource, ObjectReference},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time},
    jiff::Timestamp,
};
use kube::{
    api::{Patch, PatchParams, PostParams},
    Api, Client,
};
use tracing::{debug, warn};

/// The component name Events are posted under.
pub const COMPONENT: &str = graceful_api::termination::EVENT_COMPONENT;
/// The API server's limit on `message` (bytes).
const MESSAGE_LIMIT: usize = 1024;

/// The pod an Event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Its controller, `kind/name`, when known: the Event carries it
    /// ([`graceful_api::termination::EVENT_WORKLOAD`]), so that a team
    /// reading its namespace's Events sees its workloads.
    pub workload: Option<String>,
}

/// Figures an Event carries as annotations, for the clients that read
/// Events rather than the agents ([`graceful_api::termination`]'s keys).
pub type Notes = Vec<(&'static str, String)>;

#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("no connection to the Kubernetes API")]
    NotConnected,
    #[error("the API did not answer within {0:?}")]
    Timeout(Duration),
    #[error("{}", super::error::chain(.0))]
    Api(#[from] kube::Error),
}

/// Posts Events; cheap to clone. Has a client once the watch made one.
#[derive(Clone)]
pub struct EventPoster {
    /// Set once the watch has reached the API; a post made before can
    /// wait for it ([`EventPoster::post_once_connected`]).
    client: Arc<tokio::sync::watch::Sender<Option<Client>>>,
    node: String,
    timeout: Duration,
    /// Posts started by [`EventPoster::post_later`] and not yet done.
    pending: Arc<std::sync::atomic::AtomicUsize>,
    /// Repeats counted on Events already posted, and each pod's budget.
    correlator: Arc<Mutex<correlate::Correlator>>,
    /// Events dropped over their pod's budget, and repeats counted.
    tally: Arc<Tally>,
}

pub mod correlate;

/// What the correlator did, for `/metrics`.
#[derive(Debug, Default)]
pub struct Tally {
    pub dropped: AtomicU64,
    pub aggregated: AtomicU64,
}

/// One post counted in [`EventPoster::pending`] until it ends.
struct Pending(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl EventPoster {
    pub fn new(node: String, timeout: Duration) -> Self {
        Self {
            client: Arc::new(tokio::sync::watch::Sender::new(None)),
            node,
            timeout,
            pending: Arc::default(),
            correlator: Arc::default(),
            tally: Arc::default(),
        }
    }

    /// What the correlator dropped and aggregated so far.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Posts in the background, aggregated and paced per pod
    /// ([`correlate`]); a stopping agent waits for it
    /// ([`EventPoster::flush`]), so a drain it released still gets its Event.
    pub fn post_later(&self, pod: PodRef, reason: &'static str, message: String, warning: bool) {
        self.post_later_with(pod, reason, message, warning, Notes::new());
    }

    /// [`EventPoster::post_later`], the Event annotated with `notes`.
    pub fn post_later_with(
        &self,
        pod: PodRef,
        reason: &'static str,
        message: String,
        warning: bool,
        notes: Notes,
    ) {
        let message = one_line(&message);
        let decision = crate::sync::lock(&self.correlator).decide(&pod.uid, reason, &message, Instant::now());
        let message = match decision {
            correlate::Decision::Create(message) => message,
            correlate::Decision::Dropped => {
                self.tally.dropped.fetch_add(1, Ordering::Relaxed);
                return debug!(pod = %format!("{}/{}", pod.namespace, pod.name), reason, "Event dropped: the pod is past its budget of Events");
            }
            correlate::Decision::Counted { name, flush } => {
                self.tally.aggregated.fetch_add(1, Ordering::Relaxed);
                if flush {
                    self.flush_later(pod, name);
                }
                return;
            }
        };
        self.pending.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let guard = Pending(self.pending.clone());
        let me = self.clone();
        tokio::spawn(async move {
            if let Ok(name) = me.post_event_with(&pod, reason, &message, warning, &notes).await {
                crate::sync::lock(&me.correlator).created(&pod.uid, reason, &message, name);
            }
            drop(guard);
        });
    }

    /// Writes a repeated Event's count once [`correlate::FLUSH`] has passed.
    fn flush_later(&self, pod: PodRef, name: String) {
        let me = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(correlate::FLUSH).await;
            let Some(f) = crate::sync::lock(&me.correlator).flush(&name, Instant::now()) else {
                return;
            };
            let Some(client) = me.client.borrow().clone() else {
                return;
            };
            let api: Api<Event> = Api::namespaced(client, &pod.namespace);
            let patch = serde_json::json!({
                "count": f.count,
                "lastTimestamp": Time(Timestamp::now()),
            });
            let done = tokio::time::timeout(
                me.timeout,
                api.patch(&f.name, &PatchParams::default(), &Patch::Merge(&patch)),
            )
            .await;
            if !matches!(done, Ok(Ok(_))) {
                debug!(event = %f.name, "cannot write a repeated Event's count (the log lines are the record)");
            }
        });
    }

    /// Posts once a client exists (the watch makes one as it first reaches
    /// the API), waiting at most `within` for it: for what happened
    /// before the API was reached.
    pub fn post_once_connected(
        &self,
        pod: PodRef,
        reason: &'static str,
        message: String,
        warning: bool,
        within: Duration,
    ) {
        let me = self.clone();
        let mut connected = self.client.subscribe();
        tokio::spawn(async move {
            let reached = tokio::time::timeout(within, connected.wait_for(Option::is_some)).await;
            if !matches!(reached, Ok(Ok(_))) {
                return warn!(
                    pod = %format!("{}/{}", pod.namespace, pod.name),
                    reason,
                    "cannot post the Kubernetes Event: the API was not reached within {within:?} (the log line is the record)"
                );
            }
            me.post_later(pod, reason, message, warning);
        });
    }

    /// Waits, at most `limit`, for the posts in the background to end;
    /// returns how many were still going.
    pub async fn flush(&self, limit: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let n = self.pending.load(std::sync::atomic::Ordering::Acquire);
            if n == 0 || tokio::time::Instant::now() >= deadline {
                return n;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(crate) fn set_client(&self, c: Client) {
        self.client.send_replace(Some(c));
    }

    /// Posts one Event on `pod`: `reason` (UpperCamelCase), a one-line
    /// `message`, type Warning or Normal; its name. Returns within the
    /// timeout; a failure is logged here, so callers may ignore the result.
    pub async fn post_event(
        &self,
        pod: &PodRef,
        reason: &str,
        message: &str,
        warning: bool,
    ) -> Result<String, EventError> {
        self.post_event_with(pod, reason, message, warning, &[]).await
    }

    /// [`EventPoster::post_event`], the Event annotated with `notes`.
    pub async fn post_event_with(
        &self,
        pod: &PodRef,
        reason: &str,
        message: &str,
        warning: bool,
        notes: &[(&'static str, String)],
    ) -> Result<String, EventError> {
        let post = async {
            let client = self.client.borrow().clone().ok_or(EventError::NotConnected)?;
            let ev = build_event(pod, reason, message, warning, &self.node, Timestamp::now(), notes);
            let name = ev.metadata.name.clone().unwrap_or_default();
            let api: Api<Event> = Api::namespaced(client, &pod.namespace);
            match tokio::time::timeout(self.timeout, api.create(&PostParams::default(), &ev)).await {
                Ok(r) => r.map(|_| name).map_err(EventError::from),
                Err(_) => Err(EventError::Timeout(self.timeout)),
            }
        };
        let result = post.await;
        match &result {
            Ok(_) => debug!(pod = %format!("{}/{}", pod.namespace, pod.name), reason, "event posted"),
            Err(e) => warn!(
                pod = %format!("{}/{}", pod.namespace, pod.name),
                reason,
                error = %e,
                "cannot post the Kubernetes Event (the log line is the record)"
            ),
        }
        result
    }
}

/// The Event object, as client-go's recorder would make it, annotated
/// with the pod's workload and `notes`.
pub fn build_event(
    pod: &PodRef,
    reason: &str,
    message: &str,
    warning: bool,
    node: &str,
    now: Timestamp,
    notes: &[(&'static str, String)],
) -> Event {
    let workload = pod.workload.iter().map(|w| (EVENT_WORKLOAD, w.clone()));
    let annotations: BTreeMap<String, String> = workload
        .chain(notes.iter().cloned())
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(&pod.name, now)),
            namespace: Some(pod.namespace.clone()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: Some(pod.uid.clone()),
            ..Default::default()
        },
        reason: Some(reason.to_string()),
        message: Some(one_line(message)),
        type_: Some(if warning { "Warning" } else { "Normal" }.into()),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: Some(node.to_string()),
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        count: Some(1),
        action: Some("Drain".into()),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(truncate(node, 128).to_string()),
        ..Default::default()
    }
}

/// `<pod>.<unix nanos, hex>`, as client-go names Events; the pod part is
/// cut so the whole stays a valid name (253 characters).
fn event_name(pod: &str, now: Timestamp) -> String {
    let suffix = format!(".{:x}", now.as_nanosecond().max(0));
    let room = 253 - suffix.len();
    format!("{}{suffix}", truncate(pod, room).trim_end_matches(['.', '-']))
}

/// Newlines and control characters become spaces; at most 1 KiB.
fn one_line(s: &str) -> String {
    let line: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    truncate(line.trim(), MESSAGE_LIMIT).to_string()
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests;
