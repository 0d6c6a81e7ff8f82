//! The listeners, opened and closed with their pods. A pod's listener
//! opens once the API shows it opted in and its cgroups hold a process
//! (whose network namespace it enters); it closes when the pod is gone
//! from the API, has finished, or has no process left, and moves when the
//! pod's sandbox is made anew (a new namespace). The pod watch and the
//! cgroup tree wake it for the pod they name; a sweep every second covers
//! what no event says (a process placed in a cgroup, a namespace
//! replaced, events lost to a lagging receiver).

use std::{
    collections::{HashMap, HashSet},
    os::fd::AsFd as _,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, RwLock,
    },
    time::Duration,
};

use tokio::{
    sync::broadcast::{self, error::RecvError},
    task::JoinHandle,
};
use tracing::{info, warn};

use super::{
    bind::{self, BindError},
    optin::{self, Want},
    sandbox,
    server::{self, Ctx, Gate},
    ANNOTATION, REFUSED_REASON,
};
use crate::{
    continuity::handover::{take::PodListener, wire::Endpoint},
    kernel::cgroupfs::Hierarchy,
    node::kube::{EventPoster, PodEvent, PodInfo, PodStore},
    node::resolver::index::{Change, PodIndex},
    sync,
};

/// How often every opted-in pod is looked at, whatever the events said.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

pub struct Gates {
    store: Arc<PodStore>,
    index: Arc<RwLock<PodIndex>>,
    hier: Hierarchy,
    events: EventPoster,
    ctx: Arc<Ctx>,
    state: Mutex<State>,
    listening: Arc<AtomicUsize>,
    /// Listeners the previous agent handed over, by pod uid, until each
    /// pod's first pass takes its own (or drops it: the pod is gone).
    inherited: Mutex<HashMap<String, PodListener>>,
}

#[derive(Default)]
struct State {
    open: HashMap<String, Open>,
    /// The last refusal reported for a pod: reported again only if it changes.
    refused: HashMap<String, String>,
    /// The last bind failure logged for a pod (retried every sweep).
    failing: HashMap<String, String>,
    /// The mesh warning last reported for a pod: reported again only if it
    /// changes.
    meshed: HashMap<String, String>,
}

/// An open listener; its task (and every connection of it) ends on drop.
struct Open {
    at: Endpoint,
    netns: (u64, u64),
    task: JoinHandle<()>,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Which pods a pass looks at.
enum Pass {
    One(String),
    All,
}

impl Gates {
    pub fn new(
        store: Arc<PodStore>,
        index: Arc<RwLock<PodIndex>>,
        hier: Hierarchy,
        events: EventPoster,
        ctx: Arc<Ctx>,
    ) -> Arc<Gates> {
        Arc::new(Gates {
            store,
            index,
            hier,
            events,
            ctx,
            state: Mutex::default(),
            listening: Arc::default(),
            inherited: Mutex::default(),
        })
    }

    /// The listeners a handover brought: each pod's connections keep
    /// waiting in it until its pass serves it, so no hook is refused.
    /// Each is registered at once (a handover or a keeper carries it on
    /// before its pass), and let go of in the registry if it is not served.
    pub fn inherit(&self, listeners: Vec<PodListener>) {
        let mut inh = sync::lock(&self.inherited);
        for l in listeners {
            if let Err(e) = self.ctx.hooks.registry.pod_listener(
                &l.uid,
                &l.pod,
                l.at,
                l.listener.as_fd(),
                l.netns.fd.as_fd(),
            ) {
                warn!(pod = %l.pod, error = %e, "{}: a handover would not carry this listener", gate_name(l.at));
            }
            inh.insert(l.uid.clone(), l);
        }
    }

    /// Drops pod `uid`'s handed-over listener, if it waits unserved.
    fn drop_inherited(&self, uid: &str) {
        if sync::lock(&self.inherited).remove(uid).is_some() {
            self.ctx.hooks.registry.pod_listener_closed(uid);
        }
    }

    /// How many listeners are open now.
    pub fn listening(&self) -> Arc<AtomicUsize> {
        self.listening.clone()
    }

    /// Runs until dropped: every listener closes with it.
    pub async fn run(
        self: Arc<Self>,
        mut pods: broadcast::Receiver<PodEvent>,
        mut changes: broadcast::Receiver<Change>,
    ) {
        let mut sweep = tokio::time::interval(SWEEP_EVERY);
        loop {
            let pass = tokio::select! {
                ev = pods.recv() => match ev {
                    Ok(PodEvent::Applied(p) | PodEvent::Deleted(p)) => Pass::One(p.uid.clone()),
                    Err(RecvError::Lagged(_)) => Pass::All,
                    Err(RecvError::Closed) => return,
                },
                ch = changes.recv() => match ch {
                    Ok(Change::PodAdded { uid } | Change::PodRemoved { uid }
                        | Change::ContainerAdded { uid, .. } | Change::ContainerRemoved { uid, .. }) => Pass::One(uid),
                    Err(RecvError::Lagged(_)) => Pass::All,
                    Err(RecvError::Closed) => return,
                },
                _ = sweep.tick() => Pass::All,
            };
            // Files, namespaces and a thread per bind: off the async workers.
            let me = self.clone();
            if tokio::task::spawn_blocking(move || me.pass(pass)).await.is_err() {
                warn!("an httpGet gate pass panicked; the next sweep tries again");
            }
        }
    }

    fn pass(&self, pass: Pass) {
        match pass {
            Pass::One(uid) => self.reconcile(&uid),
            Pass::All => {
                let mut uids: HashSet<String> = self
                    .store
                    .all()
                    .into_iter()
                    .filter(|p| p.annotations.contains_key(ANNOTATION))
                    .map(|p| p.uid.clone())
                    .collect();
                {
                    let st = sync::lock(&self.state);
                    uids.extend(st.open.keys().cloned());
                    uids.extend(st.refused.keys().cloned());
                    uids.extend(st.failing.keys().cloned());
                    uids.extend(st.meshed.keys().cloned());
                }
                uids.extend(sync::lock(&self.inherited).keys().cloned());
                for uid in uids {
                    self.reconcile(&uid);
                }
            }
        }
    }

    /// Brings pod `uid`'s listener to what its spec and processes say.
    fn reconcile(&self, uid: &str) {
        let pod = self.store.get(uid);
        let want = pod.as_deref().map(optin::want).unwrap_or(Want::Nothing);
        let at = match (want, &pod) {
            (Want::Listen(at), Some(_)) => at,
            (Want::Refused(why), Some(pod)) => {
                self.close(uid, "refused");
                self.drop_inherited(uid);
                self.refuse(pod, why);
                return;
            }
            _ => {
                self.close(uid, "the pod is gone, finished or not opted in");
                // A handed-over listener waits for the store's first list:
                // its pod may only be missing because nothing is listed yet.
                if self.store.listed() {
                    self.drop_inherited(uid);
                }
                let mut st = sync::lock(&self.state);
                st.refused.remove(uid);
                st.failing.remove(uid);
                st.meshed.remove(uid);
                return;
            }
        };
        let pod = pod.expect("matched above");
        self.warn_meshed(&pod);
        let Some(ns) = sandbox::netns_of(&self.index, &self.hier, uid) else {
            self.close(uid, "the pod has no process left");
            return;
        };
        // Not yet the pod's: a container's first process (runc's init)
        // is in its cgroup a moment before it enters the pod's namespace.
        // (A hostNetwork pod was refused from its spec above.)
        let node = &self.ctx.node.netns;
        if (ns.dev, ns.inode) == (node.dev, node.inode) {
            return;
        }
        {
            let st = sync::lock(&self.state);
            if let Some(o) = st.open.get(uid) {
                if o.at == at && o.netns == (ns.dev, ns.inode) {
                    return;
                }
            }
        }
        self.close(uid, "its endpoint or network namespace changed");
        let inherited = sync::lock(&self.inherited).remove(uid);
        let inherited = match inherited {
            Some(h) if h.at == at && (h.netns.dev, h.netns.inode) == (ns.dev, ns.inode) => Some(h),
            Some(_) => {
                // Bound anew below, and registered again then.
                self.ctx.hooks.registry.pod_listener_closed(uid);
                None
            }
            None => None,
        };
        let listener = match inherited {
            Some(h) => {
                info!(pod = %pod.key(), uid, at = %at, "{}: serving the listener handed over", gate_name(at));
                Listener::inherited(at, h.listener).map_err(|source| BindError::Other {
                    at,
                    origin: "handover".into(),
                    source,
                })
            }
            None => Listener::bind(&ns, at),
        };
        let listener = match listener {
            Ok(l) => l,
            Err(e @ (BindError::Taken(_) | BindError::NameTaken)) => return self.refuse(&pod, e.to_string()),
            Err(e) => {
                let msg = e.to_string();
                let mut st = sync::lock(&self.state);
                if st.failing.get(uid) != Some(&msg) {
                    warn!(pod = %pod.key(), "{}: {msg}; trying again every {}s", gate_name(at), SWEEP_EVERY.as_secs());
                    self.ctx.hooks.drainer.metrics.error("http_gate_bind");
                    st.failing.insert(uid.to_string(), msg);
                }
                return;
            }
        };
        if let Err(e) =
            self.ctx
                .hooks
                .registry
                .pod_listener(uid, &pod.key(), at, listener.as_fd(), ns.fd.as_fd())
        {
            warn!(pod = %pod.key(), error = %e, "{}: a handover would not carry this listener", gate_name(at));
        }
        info!(pod = %pod.key(), uid, at = %at, netns = ns.inode, "{} listening", gate_name(at));
        let netns = (ns.dev, ns.inode);
        let task = match listener.serve(uid, &pod.key(), ns, &self.ctx) {
            Ok(t) => t,
            Err(e) => {
                self.ctx.hooks.registry.pod_listener_closed(uid);
                warn!(pod = %pod.key(), error = %e, "{}: cannot register its listener", gate_name(at));
                return;
            }
        };
        let mut st = sync::lock(&self.state);
        st.refused.remove(uid);
        st.failing.remove(uid);
        st.open.insert(uid.to_string(), Open { at, netns, task });
        self.listening.store(st.open.len(), Ordering::Relaxed);
    }

    fn close(&self, uid: &str, why: &str) {
        let mut st = sync::lock(&self.state);
        if let Some(o) = st.open.remove(uid) {
            self.ctx.hooks.registry.pod_listener_closed(uid);
            info!(uid, at = %o.at, "{} closed: {why}", gate_name(o.at));
        }
        self.listening.store(st.open.len(), Ordering::Relaxed);
    }

    /// Logs and posts (once per cause) that `pod`'s mesh relays its hook
    /// through a proxy that will cut it: before any deletion, so that the
    /// pod can be mended while nothing is at stake.
    fn warn_meshed(&self, pod: &PodInfo) {
        let mut st = sync::lock(&self.state);
        let Some(why) = super::optin::mesh_warning(pod) else {
            st.meshed.remove(&pod.uid);
            return;
        };
        if st.meshed.get(&pod.uid) == Some(&why) {
            return;
        }
        warn!(pod = %pod.key(), "httpGet gate: {why}");
        st.meshed.insert(pod.uid.clone(), why.clone());
        self.post(pod, super::MESH_REASON, why);
    }

    /// Posts a Warning Event on `pod`, off this (blocking) pass.
    fn post(&self, pod: &PodInfo, reason: &'static str, why: String) {
        let (poster, pod) = (self.events.clone(), pod.pod_ref());
        tokio::spawn(async move {
            let _ = poster.post_event(&pod, reason, &why, true).await;
        });
    }

    /// Logs and posts (once per cause) why `pod` gets no listener.
    fn refuse(&self, pod: &PodInfo, why: String) {
        let mut st = sync::lock(&self.state);
        if st.refused.get(&pod.uid) == Some(&why) {
            return;
        }
        warn!(pod = %pod.key(), "pod gate refused: {why}");
        self.ctx.hooks.drainer.metrics.error("http_gate_refused");
        st.refused.insert(pod.uid.clone(), why.clone());
        self.post(pod, REFUSED_REASON, why);
    }
}

/// For logs: which of a pod's gates.
fn gate_name(at: Endpoint) -> &'static str {
    match at {
        Endpoint::Port(_) => "httpGet gate",
        Endpoint::Socket => "socket gate",
    }
}

/// A pod's listener, bound or handed over, before it is served.
enum Listener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

impl Listener {
    fn bind(ns: &crate::kernel::adopt::netns::NetNs, at: Endpoint) -> Result<Listener, BindError> {
        match at {
            Endpoint::Port(port) => bind::listen_in(ns, port).map(Listener::Tcp),
            Endpoint::Socket => bind::socket_in(ns).map(Listener::Unix),
        }
    }

    fn inherited(at: Endpoint, fd: std::os::fd::OwnedFd) -> std::io::Result<Listener> {
        let l = match at {
            Endpoint::Port(_) => Listener::Tcp(fd.into()),
            Endpoint::Socket => Listener::Unix(fd.into()),
        };
        match &l {
            Listener::Tcp(t) => t.set_nonblocking(true)?,
            Listener::Unix(u) => u.set_nonblocking(true)?,
        }
        Ok(l)
    }

    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Listener::Tcp(t) => t.as_fd(),
            Listener::Unix(u) => u.as_fd(),
        }
    }

    /// Its server, on a task of its own.
    fn serve(
        self,
        uid: &str,
        pod: &str,
        ns: crate::kernel::adopt::netns::NetNs,
        ctx: &Arc<Ctx>,
    ) -> std::io::Result<JoinHandle<()>> {
        Ok(match self {
            Listener::Tcp(l) => {
                let port = l.local_addr()?.port();
                let l = tokio::net::TcpListener::from_std(l)?;
                let gate = Arc::new(Gate::new(uid.to_string(), pod.to_string(), port, ns));
                tokio::spawn(server::serve(l, gate, ctx.clone()))
            }
            Listener::Unix(l) => {
                let l = tokio::net::UnixListener::from_std(l)?;
                tokio::spawn(crate::serve::gate::server::serve_pod(
                    l,
                    uid.to_string(),
                    ctx.hooks.clone(),
                ))
            }
        })
    }
}
