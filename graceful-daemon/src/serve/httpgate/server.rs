//! One pod's httpGet gate: its listener's connections and `GET /drain`.
//! Each connection's peer is judged as it arrives ([`super::peers`]): a
//! stranger is answered 403 at once and the connection closes, so it holds
//! nothing; the kubelet and relays are admitted within the pod's share of
//! the gate ([`crate::share`]). Each request is then judged on its own:
//! it must be the pod's own declared hook, and a relayed one must come
//! during the pod's termination. A drain's response is held until it
//! releases, then is the report, as JSON.

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
    peers::{self, Peer},
    MESH_REASON,
};
use crate::node::addrs::NodeAddrs;
use crate::{
    continuity::handover::held::Admission,
    drain::hook::{Ending, Hook, Hooks, Origin},
    kernel::adopt::netns::NetNs,
    node::kube::{EventPoster, PodStore},
    serve::gate::server::refused_hook,
    serve::http_conn,
    serve::reply::{error, json, Body},
    sync,
};

/// What every pod's gate shares.
pub struct Ctx {
    /// The hooks' lifecycle (the drainer, the shares, the registry).
    pub hooks: Arc<Hooks>,
    pub node: Arc<NodeAddrs>,
    /// The pods as the API shows them: their mesh, their termination,
    /// their declared hooks.
    pub pods: Arc<PodStore>,
    /// Where a refusal that names a mesh is posted.
    pub events: EventPoster,
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
    let mut accepting = ctx.hooks.registry.accepting();
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
        let mesh = pod
            .as_deref()
            .and_then(|p| crate::node::kube::mesh::of(p, gate.port));
        let local = stream.local_addr().ok();
        let caller = |from: std::net::IpAddr| {
            let index = &ctx.hooks.drainer.index;
            match local {
                Some(l) => ctx.node.caller(SocketAddr::new(from, peer.port()), l, |id| {
                    sync::read(index).owner(id)
                }),
                None => crate::node::addrs::NodeCaller::Unknown,
            }
        };
        let from = match peers::judge(
            &ctx.node,
            mesh.as_ref(),
            gate.port,
            (peer.ip(), local.map(|l| l.ip())),
            caller,
        ) {
            Ok(p) => p,
            Err(msg) => {
                gate.stranger(peer);
                ctx.hooks.drainer.metrics.error("http_gate_peer");
                if mesh.is_some() && pod.as_deref().is_some_and(|p| p.terminating()) {
                    gate.mesh_refusal(&ctx, &msg);
                }
                refuse(&gate, &mut conns, stream, msg);
                continue;
            }
        };
        let ticket = match ctx.hooks.shares.connect(&gate.uid) {
            Ok(t) => t,
            Err(busy) => {
                let status = busy.status();
                debug!(pod = %gate.pod, error = %busy, "httpGet gate: refused a connection past its share");
                ctx.hooks.drainer.metrics.error("http_gate_busy");
                http_conn::answer_now(&stream, status, &busy.to_string());
                continue;
            }
        };
        let admission = ctx.hooks.registry.admit();
        let conn = stream.as_fd().try_clone_to_owned().ok().map(Arc::new);
        let (gate, ctx) = (gate.clone(), ctx.clone());
        let from = Arc::new(from);
        conns.spawn(async move {
            let a = admission.clone();
            http_conn::serve(stream, "http gate", move |req| {
                handle(
                    gate.clone(),
                    ctx.clone(),
                    from.clone(),
                    (conn.clone(), a.clone()),
                    req,
                )
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
    from: Arc<Peer>,
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
    let query = req.uri().query().unwrap_or("").to_string();
    let q = match hook_query::parse(&query, started_unix_ms) {
        Ok(q) => q,
        Err(e) => return bad(&gate, req.uri(), StatusCode::BAD_REQUEST, e),
    };
    // Who may drain the pod, decided for this request.
    if let Err(why) = own_hook(&gate, &ctx, &from, &path, &query).await {
        ctx.hooks.drainer.metrics.error("http_gate_not_hook");
        return bad(&gate, req.uri(), StatusCode::FORBIDDEN, why);
    }
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
        Some(name) => match container_id(&ctx.pods, &gate.uid, name) {
            Some(id) => Some(id),
            None => {
                let why = format!("container={name}: no such container in pod {}", gate.pod);
                return bad(&gate, req.uri(), StatusCode::BAD_REQUEST, why);
            }
        },
    };
    let hook = Hook {
        pod: gate.uid.clone(),
        container,
        request: q.request,
        arrived_ns,
        origin: Origin::Http {
            query,
            started_unix_ms,
        },
        progress: None,
    };
    let netns = gate.netns.try_clone().ok();
    let fd = conn.as_ref().map(|f| f.as_fd());
    let started = match ctx.hooks.start(hook, netns, fd, &admission) {
        Ok(s) => s,
        Err(e) => return refused_hook(e),
    };
    // Dropped with the connection (the kubelet gave up): the drain is
    // abandoned, as a hook that goes away abandons it on the socket.
    respond(started.run(|_| {}, std::future::pending()).await)
        .unwrap_or_else(|| error(StatusCode::INTERNAL_SERVER_ERROR, "abandoned"))
}

/// Whether a request is the pod's own hook, as it may come from `from`:
/// its declared settings, and, relayed, during the pod's termination.
async fn own_hook(gate: &Gate, ctx: &Ctx, from: &Peer, path: &str, query: &str) -> Result<(), String> {
    if *from == Peer::Relayed && !terminates(&ctx.pods, &gate.uid).await {
        let pod = ctx.pods.get(&gate.uid);
        let mesh = pod
            .as_deref()
            .and_then(|p| crate::node::kube::mesh::of(p, gate.port));
        let msg = peers::not_terminating(mesh.as_ref(), gate.port);
        if mesh.is_some() {
            gate.mesh_refusal(ctx, &msg);
        }
        return Err(msg);
    }
    let pod = ctx
        .pods
        .get(&gate.uid)
        .ok_or("the pod is gone from the API's view")?;
    peers::spec_hook(&pod.http_hooks, gate.port, path, query)
}

/// A held hook's answer: the report, or the drain's error; `None` when
/// the client went away (nothing to answer).
pub(crate) fn respond(ending: Ending) -> Option<Response<Body>> {
    match ending {
        Ending::Released(released) => {
            let resp = json(StatusCode::OK, &released.report);
            released.publish();
            Some(resp)
        }
        Ending::Failed(e) => Some(error(StatusCode::INTERNAL_SERVER_ERROR, e)),
        Ending::Abandoned => None,
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
fn container_id(pods: &PodStore, uid: &str, name: &str) -> Option<String> {
    let pod = pods.get(uid)?;
    pod.containers.iter().find(|c| c.name == name)?.id.clone()
}
