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
use tracing::{debug, error, info, warn};

use super::{
    api::{DrainRequest, ErrorBody, Line, SelfView, MAX_BODY},
    identity::{identify, Caller, IdentityError},
    listener::{self, Look, Socket},
};
use crate::{
    adopt::netns::NetNs,
    drain::{
        drainer::Drainer,
        scope::{Refusal, Subject},
    },
    handover::{
        held::{Admission, Registry},
        wire::{ExecHook, Record},
    },
    http_conn,
    reply::{error, json, line_bytes, ndjson, Body},
    share::Shares,
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
pub async fn serve(
    mut listener: UnixListener,
    socket: Arc<Socket>,
    drainer: Arc<Drainer>,
    shares: Arc<Shares>,
    registry: Arc<Registry>,
) {
    let mut ours = listener::inode(&socket.path);
    let mut look = tokio::time::interval(LOOK_EVERY);
    let mut accepting = registry.accepting();
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
                if let Some(l) = keep_bound(&socket, &mut ours) {
                    listener = l;
                }
                continue;
            }
        };
        take(stream, None, &drainer, &shares, &registry);
    }
}

/// Serves one pod's socket gate (`graceful.dev/gate: socket`): the
/// abstract socket bound in its network namespace, which only its own
/// processes can reach. Its callers are identified and served as on the
/// node's gate socket (SO_PEERCRED, then the pod's cgroups), and a caller
/// that is not pod `uid`'s own process is refused; like it, it accepts
/// nothing while a handover runs.
pub async fn serve_pod(
    listener: UnixListener,
    uid: String,
    drainer: Arc<Drainer>,
    shares: Arc<Shares>,
    registry: Arc<Registry>,
) {
    let mut accepting = registry.accepting();
    loop {
        let on = *accepting.borrow_and_update();
        tokio::select! {
            _ = accepting.changed() => {}
            accepted = listener.accept(), if on => match accepted {
                Ok((s, _)) => take(s, Some(&uid), &drainer, &shares, &registry),
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
fn take(
    stream: UnixStream,
    only: Option<&str>,
    drainer: &Arc<Drainer>,
    shares: &Arc<Shares>,
    registry: &Arc<Registry>,
) {
    let pid = stream.peer_cred().ok().and_then(|c| c.pid());
    let who = match (identify(pid), only) {
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
    let ticket = match shares.connect(&key) {
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
    let admission = registry.admit();
    let conn = match stream.as_fd().try_clone_to_owned() {
        Ok(fd) => Some(Arc::new(fd)),
        Err(e) => {
            warn!(error = %e, "gate: cannot keep a descriptor of a connection; its drain cannot be handed over");
            None
        }
    };
    let (drainer, shares, registry) = (drainer.clone(), shares.clone(), registry.clone());
    tokio::spawn(async move {
        let a = admission.clone();
        http_conn::serve(stream, "gate", move |req| {
            let conn = Conn {
                fd: conn.clone(),
                registry: registry.clone(),
                admission: a.clone(),
            };
            handle(drainer.clone(), shares.clone(), who.clone(), conn, req)
        })
        .await;
        drop(admission);
        drop(ticket);
    });
}

/// How often the gate looks at its socket's path.
pub const LOOK_EVERY: Duration = Duration::from_secs(2);

/// Binds the gate socket again if its file was removed (or is a dead
/// listener's), and says so; leaves another live listener be, and counts
/// the gate as not listening while it is there.
fn keep_bound(socket: &Socket, ours: &mut u64) -> Option<UnixListener> {
    match socket.look(*ours) {
        Look::Ours => {
            socket.set_listening(true);
            None
        }
        Look::Taken(pid) => {
            if socket.listening() {
                error!(gate = %socket.path.display(), holder = ?pid, "another process listens on the gate socket: pods' hooks reach it, not this agent");
            }
            socket.set_listening(false);
            None
        }
        Look::Rebind => match listener::bind(&socket.path) {
            Ok(l) => {
                *ours = listener::inode(&socket.path);
                warn!(gate = %socket.path.display(), "the gate socket was removed under the agent: bound it again");
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
    registry: Arc<Registry>,
    admission: Arc<Admission>,
}

async fn handle(
    drainer: Arc<Drainer>,
    shares: Arc<Shares>,
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
        (&Method::POST, "/v1/drain") => drain(drainer, shares, caller, conn, req).await,
        (&Method::GET, "/v1/self") => self_view(&drainer, caller),
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

/// The drain's subject: the caller's pod and container, and (for a drain)
/// its network namespace, open now: the hook runs in the pod's, and waits
/// for the answer.
pub(crate) fn subject(caller: Caller, netns: bool) -> Subject {
    Subject {
        netns: netns
            .then(|| NetNs::open(format!("/proc/{}/ns/net", caller.pid)).ok())
            .flatten(),
        pod: caller.pod,
        container: caller.container,
    }
}

pub(crate) fn refused(r: Refusal) -> Response<Body> {
    let status = match r {
        Refusal::NotFound(_) => StatusCode::NOT_FOUND,
        Refusal::Invalid(_) => StatusCode::BAD_REQUEST,
    };
    error(status, r.to_string())
}

fn self_view(drainer: &Drainer, caller: Caller) -> Response<Body> {
    let who = subject(caller, false);
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
        Err(r) => refused(r),
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
    drainer: Arc<Drainer>,
    shares: Arc<Shares>,
    caller: Caller,
    conn: Conn,
    req: Request<hyper::body::Incoming>,
) -> Response<Body> {
    // What bounds the start the request claims (see `bounded_start`).
    let arrived_ns = graceful_common::clock::monotonic_ns();
    let ticket = match shares.drain(&caller.pod, caller.container.as_deref()) {
        Ok(t) => t,
        Err(busy) => return error(StatusCode::TOO_MANY_REQUESTS, busy.to_string()),
    };
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let r = match DrainRequest::parse(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let pod = caller.pod.clone();
    let hook = ExecHook {
        pod: caller.pod.clone(),
        container: caller.container.clone(),
        pid: caller.pid as u32,
        request: String::from_utf8_lossy(&body).into_owned(),
        arrived_ns,
        // A reconnect's earlier attempts, carried on from the start.
        progress: r.resumed.clone(),
    };
    let prepared = match drainer.prepare(subject(caller, true), &r, arrived_ns) {
        Ok(p) => p,
        Err(r) => return refused(r),
    };
    // Held from here: a handover carries it, and only the agent that
    // releases it answers.
    let hold = conn.fd.as_ref().and_then(|fd| {
        conn.registry
            .hold(Record::ExecHook(hook), fd.as_fd(), &conn.admission)
            .map_err(|e| warn!(pod = %pod, error = %e, "gate: cannot register a held hook; a handover would not carry it"))
            .ok()
    });
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let _ = tx.try_send(line_bytes(&Line::Accepted(Box::new(prepared.accepted.clone()))));
    tokio::spawn(async move {
        let _ticket = ticket;
        let progress_tx = tx.clone();
        let open = conn.registry.clone();
        let so_far = hold.as_ref().map(|h| h.progress());
        let run = drainer.run(prepared, move |p| {
            // Frozen for a handover: the successor writes from here.
            if !open.answering() {
                return;
            }
            if let Some(s) = &so_far {
                s.point(p);
            }
            let line = Line::Progress {
                ms: p.ms,
                inbound: p.inbound,
            };
            let _ = progress_tx.try_send(line_bytes(&line));
        });
        let result = tokio::select! {
            r = run => r,
            _ = tx.closed() => {
                info!(pod = %pod, "drain abandoned: the client went away");
                return;
            }
        };
        if let Some(h) = hold {
            h.release().await;
        }
        match result {
            // The hook first: its release is what the pod waits for.
            Ok(released) => {
                let _ = tx
                    .send(line_bytes(&Line::Report(Box::new(released.report.clone()))))
                    .await;
                released.publish();
            }
            Err(e) => {
                let _ = tx.send(line_bytes(&ErrorBody { error: e.to_string() })).await;
            }
        }
    });
    ndjson(rx)
}
