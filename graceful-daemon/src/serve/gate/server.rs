//! The gate socket's HTTP server: one task per connection, each request
//! answered as the caller it comes from. Bad requests get a 4xx and one
//! line of JSON; nothing a client sends can stop others' drains.

use std::{
    os::fd::{AsFd as _, OwnedFd},
    sync::Arc,
    time::Duration,
};

use bytes::Bytes;
use graceful_api::{clip, MAX_ECHO};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use tokio::net::{UnixListener, UnixStream};
use tracing::{debug, error, warn};

use super::{
    identity::{identify, Caller, IdentityError},
    listener::{self, Look, Socket},
    protocol::{DrainRequest, ErrorBody, Line, SelfView, MAX_BODY},
};
use crate::{
    continuity::handover::held::Admission,
    drain::{
        drainer::Drainer,
        hook::{Ending, Hook, Hooks, Refused},
        scope::Subject,
    },
    kernel::adopt::netns::NetNs,
    serve::http_conn,
    serve::reply::{error, json, line_bytes, ndjson, Body},
};

/// How long a client may take to send its body (its head:
/// [`http_conn::HEAD_TIMEOUT`], answered with a 408 too).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves the gate on `listener` until the task is dropped. Each
/// connection is identified once, as it arrives, and admitted within its
/// caller's share ([`share`](super::share)); past it, or while the agent
/// cannot tell who is calling, the caller is told so at once and the
/// connection closes, so a flood holds no descriptor for long.
/// While a handover runs, it accepts nothing (the connections wait in the
/// listener's queue, which the successor takes over).
pub async fn serve(mut listener: UnixListener, socket: Arc<Socket>, hooks: Arc<Hooks>) {
    let mut ours = listener::inode(&socket.path);
    let mut look = tokio::time::interval(LOOK_EVERY);
    let mut accepting = hooks.registry.accepting();
    loop {
        let on = *accepting.borrow_and_update();
        let stream = tokio::select! {
            _ = accepting.changed() => continue,
            accepted = listener.accept(), if on => match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    warn!(error = %e, "gate accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = look.tick() => {
                if let Some(l) = keep_bound(&socket, &mut ours, &hooks.drainer.metrics) {
                    listener = l;
                }
                continue;
            }
        };
        take(stream, None, &hooks);
    }
}

/// Serves one pod's socket gate (`graceful.dev/gate: socket`): the
/// abstract socket bound in its network namespace, which only its own
/// processes can reach. Its callers are identified and served as on the
/// node's gate socket (SO_PEERCRED, then the pod's cgroups), and a caller
/// that is not pod `uid`'s own process is refused; like it, it accepts
/// nothing while a handover runs.
pub async fn serve_pod(listener: UnixListener, uid: String, hooks: Arc<Hooks>) {
    let mut accepting = hooks.registry.accepting();
    loop {
        let on = *accepting.borrow_and_update();
        tokio::select! {
            _ = accepting.changed() => {}
            accepted = listener.accept(), if on => match accepted {
                Ok((s, _)) => take(s, Some(&uid), &hooks),
                Err(e) => {
                    warn!(error = %e, "socket gate accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// One connection accepted: identified (on a pod's socket gate, as that
/// pod's: `only`), admitted within its caller's share, and served on a
/// task of its own.
fn take(stream: UnixStream, only: Option<&str>, hooks: &Arc<Hooks>) {
    let drainer = &hooks.drainer;
    let pid = stream.peer_cred().ok().and_then(|c| c.pid());
    let who = match (identify(pid, drainer.hier.pod_roots()), only) {
        (Ok(c), Some(uid)) if c.pod != uid => Err(IdentityError::OtherPod {
            pid: c.pid,
            pod: c.pod,
            gate: uid.to_string(),
        }),
        (who, _) => who,
    };
    let key = match &who {
        Ok(c) => c.pod.clone(),
        Err(e @ IdentityError::Internal { .. }) => {
            warn!(error = %e, "gate: cannot identify a caller");
            drainer.metrics.error("gate_identify");
            http_conn::answer_now(&stream, StatusCode::SERVICE_UNAVAILABLE, &e.to_string());
            return;
        }
        Err(e) => e.share_key(),
    };
    let ticket = match hooks.shares.connect(&key) {
        Ok(t) => t,
        Err(busy) => {
            let status = busy.status();
            debug!(error = %busy, "gate: refused a connection past its share");
            drainer.metrics.error(if status == StatusCode::TOO_MANY_REQUESTS {
                "gate_caller_limit"
            } else {
                "gate_full"
            });
            http_conn::answer_now(&stream, status, &busy.to_string());
            return;
        }
    };
    // Its place in a handover: admitted until its drain is held, and a
    // descriptor of its own to hand over while it is.
    let admission = hooks.registry.admit();
    let conn = match stream.as_fd().try_clone_to_owned() {
        Ok(fd) => Some(Arc::new(fd)),
        Err(e) => {
            warn!(error = %e, "gate: cannot keep a descriptor of a connection; its drain cannot be handed over");
            None
        }
    };
    let hooks = hooks.clone();
    tokio::spawn(async move {
        let a = admission.clone();
        http_conn::serve(stream, "gate", move |req| {
            let conn = Conn {
                fd: conn.clone(),
                admission: a.clone(),
            };
            handle(hooks.clone(), who.clone(), conn, req)
        })
        .await;
        drop(admission);
        drop(ticket);
    });
}

/// How often the gate looks at its socket's path.
pub const LOOK_EVERY: Duration = Duration::from_secs(2);

/// Binds the gate socket again if its file was removed, is a dead
/// listener's, or is another process's (this agent holds the node's pins:
/// whatever else listens there is no agent), and says so.
fn keep_bound(socket: &Socket, ours: &mut u64, metrics: &crate::metrics::Recorder) -> Option<UnixListener> {
    let look = socket.look(*ours);
    if let Look::Taken(pid) = &look {
        metrics.error("gate_squatted");
        error!(gate = %socket.path.display(), holder = ?pid, "another process listened on the gate socket (it holds no pins: not an agent); binding it again");
    }
    match look {
        Look::Ours => {
            socket.set_listening(true);
            None
        }
        Look::Taken(_) | Look::Rebind => match listener::bind(&socket.path) {
            Ok(l) => {
                *ours = listener::inode(&socket.path);
                warn!(gate = %socket.path.display(), "bound the gate socket again");
                socket.set_listening(true);
                Some(l)
            }
            Err(e) => {
                if socket.listening() {
                    error!(error = %e, "the gate socket was removed and cannot be bound again: pods' hooks fail open");
                }
                socket.set_listening(false);
                None
            }
        },
    }
}

/// A connection's place in a handover (see `handover::held`).
struct Conn {
    fd: Option<Arc<OwnedFd>>,
    admission: Arc<Admission>,
}

async fn handle(
    hooks: Arc<Hooks>,
    who: Result<Caller, IdentityError>,
    conn: Conn,
    req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    let caller = match who {
        Ok(c) => c,
        Err(e) => {
            warn!(error = %e, "gate: refused a caller");
            return error(StatusCode::FORBIDDEN, e.to_string());
        }
    };
    match (req.method(), req.uri().path()) {
        (&Method::POST, "/v1/drain") => drain(hooks, caller, conn, req).await,
        (&Method::GET, "/v1/self") => self_view(&hooks.drainer, caller),
        (_, "/v1/drain" | "/v1/self") => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "use POST /v1/drain or GET /v1/self",
        ),
        (_, path) => error(
            StatusCode::NOT_FOUND,
            format!(
                "no such endpoint {}: the gate has POST /v1/drain and GET /v1/self",
                clip(path, MAX_ECHO)
            ),
        ),
    }
}

fn self_view(drainer: &Drainer, caller: Caller) -> Response<Body> {
    let who = Subject {
        pod: caller.pod,
        container: caller.container,
        netns: None,
    };
    match drainer.pod_counts(&who) {
        Ok((cgroups, sum)) => json(
            StatusCode::OK,
            &SelfView {
                pod: who.pod,
                container: who.container,
                pod_cgroups: cgroups,
                inbound_live: sum.inbound_live,
                outbound_live: sum.outbound_live,
                listeners: sum.listeners,
            },
        ),
        Err(r) => refused_hook(Refused::from(r)),
    }
}

async fn read_body(req: Request<hyper::body::Incoming>) -> Result<Bytes, Response<Body>> {
    let limited = Limited::new(req.into_body(), MAX_BODY);
    match tokio::time::timeout(READ_TIMEOUT, limited.collect()).await {
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            "request body not received in time",
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body over {MAX_BODY} bytes"),
        )),
        Ok(Err(e)) => Err(error(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body: {e}"),
        )),
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

/// `POST /v1/drain`: the settings in effect first, then progress lines
/// while the drain runs, then its report (or its error). A client that
/// goes away abandons its drain.
async fn drain(
    hooks: Arc<Hooks>,
    caller: Caller,
    conn: Conn,
    req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    // What bounds the start the request claims (see `bounded_start`).
    let arrived_ns = graceful_common::clock::monotonic_ns();
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let r = match DrainRequest::parse(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let netns = NetNs::open(format!("/proc/{}/ns/net", caller.pid)).ok();
    let hook = Hook::exec(caller.pod, caller.container, caller.pid as u32, r, arrived_ns);
    let fd = conn.fd.as_ref().map(|f| f.as_fd());
    let started = match hooks.start(hook, netns, fd, &conn.admission) {
        Ok(s) => s,
        Err(e) => return refused_hook(e),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let _ = tx.try_send(line_bytes(&Line::Accepted(Box::new(started.accepted().clone()))));
    tokio::spawn(async move {
        let progress_tx = tx.clone();
        let progress = move |p: &graceful_api::Point| {
            let line = Line::Progress {
                ms: p.ms,
                inbound: p.inbound,
            };
            let _ = progress_tx.try_send(line_bytes(&line));
        };
        match started.run(progress, tx.closed()).await {
            // The hook first: its release is what the pod waits for.
            Ending::Released(released) => {
                let _ = tx
                    .send(line_bytes(&Line::Report(Box::new(released.report.clone()))))
                    .await;
                released.publish();
            }
            Ending::Failed(e) => {
                let _ = tx.send(line_bytes(&ErrorBody { error: e })).await;
            }
            Ending::Abandoned => {}
        }
    });
    ndjson(rx)
}

/// A hook the lifecycle would not hold, answered.
pub(crate) fn refused_hook(e: Refused) -> Response<Body> {
    error(e.status(), e.to_string())
}
