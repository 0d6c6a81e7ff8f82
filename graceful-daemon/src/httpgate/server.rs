//! One pod's httpGet gate: its listener's connections and `GET /drain`.
//! A peer the gate does not answer ([`super::peers`]: not the node, nor
//! the pod's mesh relaying the kubelet's hook) is answered 403 at once and
//! the connection closes, so strangers hold nothing; the others are admitted
//! within the pod's share of the gate ([`crate::share`]). A drain's
//! response is held until it releases, then is the report, as JSON.

use std::{
    net::SocketAddr,
    os::fd::{AsFd as _, OwnedFd},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use graceful_api::{clip, hook_query, Scope, MAX_ECHO};
use http::{Method, Request, Response, StatusCode};
use tokio::{net::TcpListener, task::JoinSet};
use tracing::{debug, warn};

use super::{
    peers::{self, Verdict},
    MESH_REASON,
};
use crate::node_addrs::NodeAddrs;
use crate::{
    adopt::netns::NetNs,
    drain::{drainer::Drainer, scope::Subject},
    gate::server::refused,
    handover::{
        held::{Admission, Registry},
        wire::{HttpHook, Record},
    },
    http_conn,
    kube::{EventPoster, PodStore},
    reply::{error, json, Body},
    share::Shares,
    sync,
};

/// What every pod's gate shares.
pub struct Ctx {
    pub drainer: Arc<Drainer>,
    pub shares: Arc<Shares>,
    pub node: Arc<NodeAddrs>,
    /// Drains whose hook waits now: a stopping agent finishes them first.
    pub in_flight: AtomicUsize,
    /// What a handover carries: the listeners and held hooks.
    pub registry: Arc<Registry>,
    /// The pods as the API shows them: their mesh, their termination.
    pub pods: Arc<PodStore>,
    /// Where a refusal that names a mesh is posted.
    pub events: EventPoster,
}

/// One drain counted in [`Ctx::in_flight`] while it runs.
pub(super) struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    pub(super) fn new(n: &'a AtomicUsize) -> InFlight<'a> {
        n.fetch_add(1, Ordering::AcqRel);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One pod's listener: whose it is, and the namespace it listens in.
pub struct Gate {
    pub uid: String,
    /// `namespace/name`, for logs.
    pub pod: String,
    pub port: u16,
    pub netns: NetNs,
    strangers: Mutex<Strangers>,
    strangers_reading: AtomicUsize,
    /// Whether a refusal naming the pod's mesh was posted (once a gate).
    mesh_posted: std::sync::atomic::AtomicBool,
}

/// Peers refused since the last one logged: a flood is one line a second.
#[derive(Default)]
struct Strangers {
    logged_at: Option<Instant>,
    unlogged: u64,
}

impl Gate {
    pub fn new(uid: String, pod: String, port: u16, netns: NetNs) -> Gate {
        Gate {
            uid,
            pod,
            port,
            netns,
            strangers: Mutex::default(),
            strangers_reading: AtomicUsize::new(0),
            mesh_posted: Default::default(),
        }
    }

    /// A refusal in a meshed pod during its termination: the hook of a
    /// pod whose mesh is in the way fails open. Posted on the pod once.
    fn mesh_refusal(&self, ctx: &Ctx, why: &str) {
        let Some(pod) = ctx.pods.get(&self.uid) else {
            return;
        };
        if !pod.terminating() || self.mesh_posted.swap(true, Ordering::AcqRel) {
            return;
        }
        let (poster, why, pod) = (ctx.events.clone(), why.to_string(), pod.pod_ref());
        tokio::spawn(async move {
            let _ = poster.post_event(&pod, MESH_REASON, &why, true).await;
        });
    }

    fn stranger(&self, peer: SocketAddr) {
        let mut s = sync::lock(&self.strangers);
        if s.logged_at.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            s.unlogged += 1;
            return;
        }
        let more = std::mem::take(&mut s.unlogged);
        s.logged_at = Some(Instant::now());
        warn!(pod = %self.pod, port = self.port, peer = %peer, more_since_last = more, "httpGet gate: refused a peer that is not the node (403)");
    }
}

/// Strangers whose request is read before their 403, at once per gate.
const STRANGERS_READ: usize = 4;

/// A stranger's place among those [`STRANGERS_READ`].
struct Stranger(Arc<Gate>);

impl Stranger {
    fn admit(gate: &Arc<Gate>) -> Option<Stranger> {
        let n = &gate.strangers_reading;
        n.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
            (v < STRANGERS_READ).then_some(v + 1)
        })
        .ok()
        .map(|_| Stranger(gate.clone()))
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        self.0.strangers_reading.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves `gate` on `listener` until the task is dropped; its connections
/// go with it, so nothing of the agent's stays in the pod's namespace
/// once the gate is closed.
pub async fn serve(listener: TcpListener, gate: Arc<Gate>, ctx: Arc<Ctx>) {
    let mut conns = JoinSet::new();
    let mut accepting = ctx.registry.accepting();
    loop {
        let on = *accepting.borrow_and_update();
        let (stream, peer) = tokio::select! {
            _ = accepting.changed() => continue,
            accepted = listener.accept(), if on => match accepted {
                Ok(a) => a,
                Err(e) => {
                    warn!(pod = %gate.pod, error = %e, "httpGet gate accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let pod = ctx.pods.get(&gate.uid);
        let mesh = pod.as_deref().and_then(|p| crate::kube::mesh::of(p, gate.port));
        let local = stream.local_addr().ok().map(|a| a.ip());
        let terminating = pod.as_deref().is_some_and(|p| p.terminating());
        let wait = match peers::judge(
            &ctx.node,
            mesh.as_ref(),
            gate.port,
            (peer.ip(), local),
            terminating,
        ) {
            Verdict::Admit => None,
            Verdict::OnceTerminating => mesh.clone(),
            Verdict::Refuse(msg) => {
                gate.stranger(peer);
                ctx.drainer.metrics.error("http_gate_peer");
                if mesh.is_some() {
                    gate.mesh_refusal(&ctx, &msg);
                }
                refuse(&gate, &mut conns, stream, msg);
                continue;
            }
        };
        let ticket = match ctx.shares.connect(&gate.uid) {
            Ok(t) => t,
            Err(busy) => {
                let status = busy.status();
                debug!(pod = %gate.pod, error = %busy, "httpGet gate: refused a connection past its share");
                ctx.drainer.metrics.error("http_gate_busy");
                http_conn::answer_now(&stream, status, &busy.to_string());
                continue;
            }
        };
        let admission = ctx.registry.admit();
        let conn = stream.as_fd().try_clone_to_owned().ok().map(Arc::new);
        let (gate, ctx) = (gate.clone(), ctx.clone());
        conns.spawn(async move {
            // A relayed hook, once the API shows the pod's deletion.
            if let Some(m) = wait {
                if !terminates(&ctx.pods, &gate.uid).await {
                    let msg = peers::not_terminating(peer.ip(), &m, gate.port);
                    warn!(pod = %gate.pod, peer = %peer, "httpGet gate: {msg}");
                    ctx.drainer.metrics.error("http_gate_peer");
                    gate.mesh_refusal(&ctx, &msg);
                    http_conn::serve(stream, "http gate", move |_| {
                        let msg = msg.clone();
                        async move { error(StatusCode::FORBIDDEN, msg) }
                    })
                    .await;
                    return;
                }
                debug!(pod = %gate.pod, peer = %peer, mesh = m.name(), "httpGet gate: a hook relayed by the pod's mesh proxy");
            }
            let a = admission.clone();
            http_conn::serve(stream, "http gate", move |req| {
                handle(gate.clone(), ctx.clone(), (conn.clone(), a.clone()), req)
            })
            .await;
            drop(admission);
            drop(ticket);
        });
    }
}

/// Answers a refused peer `403` with `msg`: its request read first, so
/// the answer is not lost to the reset that closing over unread bytes
/// sends; a few at a time, so a flood of strangers is answered at once
/// and holds nothing.
fn refuse(gate: &Arc<Gate>, conns: &mut JoinSet<()>, stream: tokio::net::TcpStream, msg: String) {
    match Stranger::admit(gate) {
        Some(slot) => {
            conns.spawn(async move {
                http_conn::serve(stream, "http gate", move |_| {
                    let msg = msg.clone();
                    async move { error(StatusCode::FORBIDDEN, msg) }
                })
                .await;
                drop(slot);
            });
        }
        None => http_conn::answer_now(&stream, StatusCode::FORBIDDEN, &msg),
    }
}

/// Whether pod `uid` is (or, within [`peers::TERMINATING_WAIT`], becomes)
/// terminating as the API shows it.
async fn terminates(pods: &PodStore, uid: &str) -> bool {
    let deadline = Instant::now() + peers::TERMINATING_WAIT;
    loop {
        if pods.get(uid).is_some_and(|p| p.terminating()) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const USAGE: &str = "GET /drain?policy=drained&max=25s (a preStop httpGet hook)";

async fn handle(
    gate: Arc<Gate>,
    ctx: Arc<Ctx>,
    (conn, admission): (Option<Arc<OwnedFd>>, Arc<Admission>),
    req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    // What bounds the drain's start (see the drainer's `bounded_start`).
    let arrived_ns = graceful_common::clock::monotonic_ns();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    // Some kubelets join the port and the hook's path with a slash of
    // their own (`http://ip:port//drain`): the path is the same.
    let path = format!("/{}", req.uri().path().trim_start_matches('/'));
    if path != hook_query::PATH {
        let why = format!(
            "no such endpoint {}: the httpGet gate has {USAGE}",
            clip(&path, MAX_ECHO)
        );
        return bad(&gate, req.uri(), StatusCode::NOT_FOUND, why);
    }
    if req.method() != Method::GET {
        return bad(
            &gate,
            req.uri(),
            StatusCode::METHOD_NOT_ALLOWED,
            format!("use {USAGE}"),
        );
    }
    let q = match hook_query::parse(req.uri().query().unwrap_or(""), started_unix_ms) {
        Ok(q) => q,
        Err(e) => return bad(&gate, req.uri(), StatusCode::BAD_REQUEST, e),
    };
    if q.request.scope == Some(Scope::Container) && q.container.is_none() {
        return bad(
            &gate,
            req.uri(),
            StatusCode::BAD_REQUEST,
            "scope=container needs container=<name>: the kubelet does not say whose hook it runs".into(),
        );
    }
    let container = match &q.container {
        None => None,
        Some(name) => match container_id(&ctx.drainer, &gate.uid, name) {
            Some(id) => Some(id),
            None => {
                let why = format!("container={name}: no such container in pod {}", gate.pod);
                return bad(&gate, req.uri(), StatusCode::BAD_REQUEST, why);
            }
        },
    };
    let ticket = match ctx.shares.drain(&gate.uid, q.container.as_deref()) {
        Ok(t) => t,
        Err(busy) => return error(StatusCode::TOO_MANY_REQUESTS, busy.to_string()),
    };
    let hook = HttpHook {
        pod: gate.uid.clone(),
        container: container.clone(),
        query: req.uri().query().unwrap_or("").to_string(),
        arrived_ns,
        started_unix_ms,
        progress: None,
    };
    let who = Subject {
        pod: gate.uid.clone(),
        container,
        netns: gate.netns.try_clone().ok(),
    };
    let prepared = match ctx.drainer.prepare(who, &q.request, arrived_ns) {
        Ok(p) => p,
        Err(r) => return refused(r),
    };
    // Held from here: a handover carries it, and only the agent that
    // releases it answers.
    let hold = conn.as_ref().and_then(|fd| {
        ctx.registry
            .hold(Record::HttpHook(hook), fd.as_fd(), &admission)
            .map_err(|e| warn!(pod = %gate.pod, error = %e, "httpGet gate: cannot register a held hook; a handover would not carry it"))
            .ok()
    });
    // Dropped with the connection (the kubelet gave up): the drain is
    // abandoned, as a hook that goes away abandons it on the socket.
    let counted = InFlight::new(&ctx.in_flight);
    let so_far = hold.as_ref().map(|h| h.progress());
    let result = ctx
        .drainer
        .clone()
        .run(prepared, |p| {
            if let Some(s) = &so_far {
                s.point(p);
            }
        })
        .await;
    if let Some(h) = hold {
        h.release().await;
    }
    drop(counted);
    drop(ticket);
    respond(result)
}

/// A held hook's answer: the report, or the drain's error.
pub(crate) fn respond(
    result: Result<crate::drain::publish::Released, crate::bpf::MapError>,
) -> Response<Body> {
    match result {
        Ok(released) => {
            let resp = json(StatusCode::OK, &released.report);
            released.publish();
            resp
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// A request that is no drain, answered and logged: a kubelet may take
/// any answer for the hook's success (v1.20 looks at none), so the
/// agent's log is where the pod's mistake shows.
fn bad(gate: &Gate, uri: &http::Uri, status: StatusCode, why: String) -> Response<Body> {
    let uri = clip(&uri.to_string(), MAX_ECHO);
    warn!(pod = %gate.pod, status = status.as_u16(), uri, "httpGet gate: bad request: {why}");
    error(status, why)
}

/// The current id of the container named `name` in pod `uid`, from the API.
fn container_id(drainer: &Drainer, uid: &str, name: &str) -> Option<String> {
    let pod = drainer.pod_api.as_ref()?.store.get(uid)?;
    pod.containers.iter().find(|c| c.name == name)?.id.clone()
}
