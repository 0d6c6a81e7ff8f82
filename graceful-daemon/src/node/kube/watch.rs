//! The pods of this node from the Kubernetes API: list, then watch from
//! the list's resourceVersion, with `spec.nodeName=<node>`.
//!
//! Hand-rolled on `Api<Pod>`, not on kube-runtime's watcher: built on
//! kube-runtime 5.0.0, the recorded-payload test of bookmarks and 410s
//! fails (the watcher swallows BOOKMARK events and keeps the list's
//! resourceVersion to itself, so neither can be counted or shown), and a
//! re-watch after an outage emits nothing, so on a quiet node the API
//! would stay "lost" until some pod changed. Its stock backoff also resets
//! on the `Init` it emits before every list, so a failing list is retried
//! about every 0.8 s instead of backing off. Every case here is explicit:
//! - bookmarks are asked for and move the resourceVersion on, so a re-watch
//!   after the server's timeout resumes where it stopped;
//! - `410 Gone` (an ERROR event, or the watch request itself) relists at
//!   once; a relist removes the pods that went while the watch was away;
//! - any other failure (no config yet, connection refused, a stalled
//!   stream, 5xx) is retried with exponential backoff (jittered), re-watching
//!   from the last resourceVersion as client-go's reflector does;
//! - the API's state is logged once per change (connected / lost), never per
//!   retry.
//!
//! Each pod is fed to [`PodIndex::set_meta`] (names for the cgroup tree) and
//! kept as a [`PodInfo`] in the [`PodStore`], whose changes are broadcast.
//! While the API is away the names last seen stay: they are still right far
//! more often than a blank.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, RwLock,
    },
    time::Duration,
};

use futures_util::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::{ListParams, WatchEvent, WatchParams},
    Api, Client,
};
use tokio::sync::{broadcast, watch};
use tracing::{debug, info, warn};

use super::{config::Source, error::chain, events::EventPoster, pod::PodInfo};
use crate::{node::resolver::index::PodIndex, sync};

#[derive(Clone, Debug)]
pub struct WatchOptions {
    pub source: Source,
    pub node: String,
    /// First retry delay, doubled on each failure up to `backoff_max`.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Server-side watch timeout (`timeoutSeconds`); the watch is then
    /// resumed from the last resourceVersion.
    pub watch_timeout_secs: u32,
    /// A watch that says nothing (no event, no bookmark) for this long is
    /// taken as dead (a connection lost without a reset) and restarted.
    pub idle_timeout: Duration,
    /// How long an Event POST may take before it is given up.
    pub event_timeout: Duration,
}

impl WatchOptions {
    pub fn new(source: Source, node: String) -> Self {
        Self {
            source,
            node,
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            watch_timeout_secs: 290,
            idle_timeout: Duration::from_secs(330),
            event_timeout: Duration::from_secs(3),
        }
    }
}

/// Whether the API answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiState {
    /// Not answered yet since the agent started.
    Connecting,
    Connected,
    /// Answered before, or never; retrying.
    Lost,
}

/// A pod added or changed, or gone.
#[derive(Clone, Debug)]
pub enum PodEvent {
    Applied(Arc<PodInfo>),
    Deleted(Arc<PodInfo>),
}

/// The watch's own figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchStats {
    /// Lists done, the first one included.
    pub lists: u64,
    /// Of those, forced by 410 Gone.
    pub relists_gone: u64,
    /// Watch requests that got a stream.
    pub watches: u64,
    pub bookmarks: u64,
    /// ADDED, MODIFIED and DELETED events applied.
    pub events: u64,
    /// Where the next watch starts.
    pub resource_version: Option<String>,
}

#[derive(Default)]
struct Stats {
    lists: AtomicU64,
    relists_gone: AtomicU64,
    watches: AtomicU64,
    bookmarks: AtomicU64,
    events: AtomicU64,
}

/// The pods of this node as the API last told them, by uid.
pub struct PodStore {
    pods: RwLock<HashMap<String, Arc<PodInfo>>>,
    index: Arc<RwLock<PodIndex>>,
    tx: broadcast::Sender<PodEvent>,
    state: watch::Sender<ApiState>,
    stats: Stats,
    resource_version: Mutex<Option<String>>,
    ever_connected: std::sync::atomic::AtomicBool,
}

impl PodStore {
    fn new(index: Arc<RwLock<PodIndex>>) -> Self {
        Self {
            pods: RwLock::default(),
            index,
            tx: broadcast::channel(1024).0,
            state: watch::channel(ApiState::Connecting).0,
            stats: Stats::default(),
            resource_version: Mutex::default(),
            ever_connected: Default::default(),
        }
    }

    pub fn get(&self, uid: &str) -> Option<Arc<PodInfo>> {
        self.read().get(uid).cloned()
    }

    /// Every pod known, in no order.
    pub fn all(&self) -> Vec<Arc<PodInfo>> {
        self.read().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Pods added, changed and removed from now on. A receiver that lags
    /// should re-read [`all`](Self::all).
    pub fn subscribe(&self) -> broadcast::Receiver<PodEvent> {
        self.tx.subscribe()
    }

    pub fn state(&self) -> ApiState {
        *self.state.borrow()
    }

    /// Whether a list has filled the store once: until then a pod missing
    /// from it may simply not be listed yet.
    pub fn listed(&self) -> bool {
        self.ever_connected.load(Ordering::Relaxed)
    }

    /// Follows [`state`](Self::state).
    pub fn watch_state(&self) -> watch::Receiver<ApiState> {
        self.state.subscribe()
    }

    pub fn stats(&self) -> WatchStats {
        let s = &self.stats;
        WatchStats {
            lists: s.lists.load(Ordering::Relaxed),
            relists_gone: s.relists_gone.load(Ordering::Relaxed),
            watches: s.watches.load(Ordering::Relaxed),
            bookmarks: s.bookmarks.load(Ordering::Relaxed),
            events: s.events.load(Ordering::Relaxed),
            resource_version: sync::lock(&self.resource_version).clone(),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<PodInfo>>> {
        sync::read(&self.pods)
    }

    fn set_rv(&self, rv: &str) {
        *sync::lock(&self.resource_version) = Some(rv.to_string());
    }

    /// A pod added or modified.
    fn apply(&self, pod: &Pod) {
        let Some(info) = PodInfo::from_pod(pod) else {
            debug!("pod without uid or name in the watch: ignored");
            return;
        };
        let info = Arc::new(info);
        let unchanged = {
            let mut pods = sync::write(&self.pods);
            let old = pods.insert(info.uid.clone(), info.clone());
            old.is_some_and(|o| *o == *info)
        };
        if unchanged {
            return;
        }
        sync::write(&self.index).set_meta(&info.uid, Some(info.meta()));
        let _ = self.tx.send(PodEvent::Applied(info));
    }

    fn delete(&self, pod: &Pod) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        self.remove(uid, PodInfo::from_pod(pod).map(Arc::new));
    }

    fn remove(&self, uid: &str, last: Option<Arc<PodInfo>>) {
        let old = sync::write(&self.pods).remove(uid);
        sync::write(&self.index).set_meta(uid, None);
        if let Some(info) = last.or(old) {
            let _ = self.tx.send(PodEvent::Deleted(info));
        }
    }

    /// A full list: what is not in it any more went while nobody watched.
    fn replace(&self, items: &[Pod]) {
        let listed: std::collections::HashSet<&str> =
            items.iter().filter_map(|p| p.metadata.uid.as_deref()).collect();
        let gone: Vec<String> = self
            .read()
            .keys()
            .filter(|uid| !listed.contains(uid.as_str()))
            .cloned()
            .collect();
        for uid in gone {
            self.remove(&uid, None);
        }
        for p in items {
            self.apply(p);
        }
    }

    /// Logs only when the state changes.
    fn set_state(&self, new: ApiState, why: Option<&str>, source: &Source, node: &str) {
        let old = self.state.send_replace(new);
        if old == new {
            if let Some(why) = why {
                debug!(error = why, "Kubernetes API still unreachable");
            }
            return;
        }
        let why = why.unwrap_or_default();
        let before = self.ever_connected.load(Ordering::Relaxed);
        match new {
            ApiState::Connected if before => {
                info!(%source, node, pods = self.len(), "Kubernetes API answers again: pod names are current")
            }
            ApiState::Connected => {
                self.ever_connected.store(true, Ordering::Relaxed);
                info!(%source, node, pods = self.len(), "Kubernetes API connected: watching this node's pods")
            }
            _ if before => {
                warn!(%source, error = why, "Kubernetes API lost: keeping the pod names last seen; retrying with backoff")
            }
            _ => {
                warn!(%source, error = why, "Kubernetes API unreachable: pods are shown by uid until it answers; retrying with backoff")
            }
        }
    }
}

/// Exponential backoff with jitter (±25%).
struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
    seed: u64,
}

impl Backoff {
    fn new(min: Duration, max: Duration) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1;
        Self {
            min,
            max,
            next: min,
            seed,
        }
    }

    fn reset(&mut self) {
        self.next = self.min;
    }

    fn delay(&mut self) -> Duration {
        // xorshift64: jitter only, no need for more.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let quarter = base.as_millis() as u64 / 4;
        let jitter = if quarter == 0 {
            0
        } else {
            self.seed % (2 * quarter + 1)
        };
        Duration::from_millis(base.as_millis() as u64 - quarter + jitter)
    }

    async fn wait(&mut self) {
        tokio::time::sleep(self.delay()).await;
    }
}

enum WatchEnd {
    /// The server closed the stream (its timeout): watch again now.
    Closed,
    /// 410 Gone: the resourceVersion is too old; relist.
    Gone,
    Failed(String),
}

/// The list+watch loop; [`run`](Self::run) it on a task.
pub struct PodWatch {
    opts: WatchOptions,
    store: Arc<PodStore>,
    events: EventPoster,
    selector: String,
}

impl PodWatch {
    pub fn new(opts: WatchOptions, index: Arc<RwLock<PodIndex>>) -> (PodWatch, Arc<PodStore>, EventPoster) {
        let store = Arc::new(PodStore::new(index));
        let events = EventPoster::new(opts.node.clone(), opts.event_timeout);
        let selector = format!("spec.nodeName={}", opts.node);
        let w = PodWatch {
            opts,
            store: store.clone(),
            events: events.clone(),
            selector,
        };
        (w, store, events)
    }

    fn lost(&self, why: &str) {
        self.store
            .set_state(ApiState::Lost, Some(why), &self.opts.source, &self.opts.node);
    }

    fn connected(&self) {
        self.store
            .set_state(ApiState::Connected, None, &self.opts.source, &self.opts.node);
    }

    async fn client(&self) -> Result<Client, String> {
        let config = self.opts.source.load().await?;
        let https_without_ca = config.root_cert.is_none() && config.root_cert_file.is_none();
        Client::try_from(config).map_err(|e| {
            let hint = if https_without_ca {
                " (no CA for the API server: set certificate-authority in the kubeconfig, or give \
                 the agent a CA bundle via SSL_CERT_FILE)"
            } else {
                ""
            };
            format!("cannot build the API client: {}{hint}", chain(&e))
        })
    }

    /// Runs until the task is aborted.
    pub async fn run(self) {
        let mut backoff = Backoff::new(self.opts.backoff_min, self.opts.backoff_max);
        let mut client = None;
        let mut gone = false;
        loop {
            let c = match &client {
                Some(c) => Clone::clone(c),
                None => match self.client().await {
                    Ok(c) => {
                        self.events.set_client(c.clone());
                        client = Some(c.clone());
                        c
                    }
                    Err(e) => {
                        self.lost(&e);
                        backoff.wait().await;
                        continue;
                    }
                },
            };
            let api: Api<Pod> = Api::all(c);
            let mut rv = match self.list(&api, gone).await {
                Ok(rv) => rv,
                Err(e) => {
                    self.lost(&e);
                    backoff.wait().await;
                    continue;
                }
            };
            backoff.reset();
            gone = false;
            while !gone {
                match self.watch(&api, &mut rv).await {
                    WatchEnd::Closed => {}
                    WatchEnd::Gone => {
                        info!(resource_version = %rv, "watch expired (410 Gone): relisting");
                        gone = true;
                    }
                    WatchEnd::Failed(e) => {
                        self.lost(&e);
                        backoff.wait().await;
                    }
                }
            }
        }
    }

    /// Lists the node's pods into the store; returns the list's resourceVersion.
    async fn list(&self, api: &Api<Pod>, after_gone: bool) -> Result<String, String> {
        let lp = ListParams::default().fields(&self.selector);
        let list = api
            .list(&lp)
            .await
            .map_err(|e| format!("list pods: {}", chain(&e)))?;
        let rv = list.metadata.resource_version.clone().unwrap_or_default();
        self.store.stats.lists.fetch_add(1, Ordering::Relaxed);
        if after_gone {
            self.store.stats.relists_gone.fetch_add(1, Ordering::Relaxed);
        }
        self.store.replace(&list.items);
        self.store.set_rv(&rv);
        self.connected();
        debug!(pods = list.items.len(), resource_version = %rv, "listed this node's pods");
        Ok(rv)
    }

    /// One watch request, applied until it ends.
    async fn watch(&self, api: &Api<Pod>, rv: &mut String) -> WatchEnd {
        let wp = WatchParams::default()
            .fields(&self.selector)
            .timeout(self.opts.watch_timeout_secs);
        let stream = match api.watch(&wp, rv).await {
            Ok(s) => s,
            Err(kube::Error::Api(s)) if s.code == 410 => return WatchEnd::Gone,
            Err(e) => return WatchEnd::Failed(format!("watch pods: {}", chain(&e))),
        };
        self.store.stats.watches.fetch_add(1, Ordering::Relaxed);
        self.connected();
        let mut stream = std::pin::pin!(stream);
        loop {
            let next = match tokio::time::timeout(self.opts.idle_timeout, stream.next()).await {
                Ok(n) => n,
                Err(_) => {
                    debug!("pod watch silent for too long: restarting it");
                    return WatchEnd::Closed;
                }
            };
            let ev = match next {
                None => return WatchEnd::Closed,
                Some(Ok(ev)) => ev,
                Some(Err(kube::Error::Api(s))) if s.code == 410 => return WatchEnd::Gone,
                Some(Err(e)) => return WatchEnd::Failed(format!("pod watch stream: {}", chain(&e))),
            };
            let stats = &self.store.stats;
            match ev {
                WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                    stats.events.fetch_add(1, Ordering::Relaxed);
                    self.store.apply(&p);
                    self.advance(rv, p.metadata.resource_version.as_deref());
                }
                WatchEvent::Deleted(p) => {
                    stats.events.fetch_add(1, Ordering::Relaxed);
                    self.store.delete(&p);
                    self.advance(rv, p.metadata.resource_version.as_deref());
                }
                WatchEvent::Bookmark(b) => {
                    stats.bookmarks.fetch_add(1, Ordering::Relaxed);
                    self.advance(rv, Some(&b.metadata.resource_version));
                }
                WatchEvent::Error(s) if s.code == 410 => return WatchEnd::Gone,
                WatchEvent::Error(s) => {
                    return WatchEnd::Failed(format!(
                        "pod watch error {}: {} {}",
                        s.code, s.reason, s.message
                    ))
                }
            }
        }
    }

    fn advance(&self, rv: &mut String, to: Option<&str>) {
        if let Some(to) = to.filter(|v| !v.is_empty()) {
            *rv = to.to_string();
            self.store.set_rv(to);
        }
    }
}

#[cfg(test)]
mod tests;
