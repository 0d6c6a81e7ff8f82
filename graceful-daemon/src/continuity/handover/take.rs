//! The taker: an agent that starts on a node whose agent still runs (the
//! DaemonSet's surge pod, a restart beside the old process) asks it for
//! everything it holds, checks what it gets, and says whether it took it.
//! Whatever is wrong (another format, a bad frame, a giver that is not
//! the pins' holder) is refused in one line: the giver serves on, and
//! this agent waits for the node as an agent did before handovers.

use std::{os::fd::OwnedFd, path::Path, time::Duration};

use tracing::info;

use super::{
    fds::{self, Channel},
    peer,
    wire::{self, Done, Endpoint, ExecHook, Hello, HttpHook, Offer, Record, Verdict, WireError, OLDEST},
};
use crate::{kernel::adopt::netns::NetNs, kernel::bpf::paths::PinDir};

/// What the giver held, now this agent's.
#[derive(Default)]
pub struct Inherited {
    pub gate: Option<OwnedFd>,
    /// Each pod's own gate: its httpGet listener or its socket gate.
    pub pod_gates: Vec<PodListener>,
    pub exec_hooks: Vec<(ExecHook, OwnedFd)>,
    pub http_hooks: Vec<(HttpHook, OwnedFd)>,
    /// Held hooks whose record this agent cannot read, with their
    /// connections: answered at once, so that their hooks fail open.
    pub unreadable: Vec<Unreadable>,
    /// When the giver stopped accepting (CLOCK_MONOTONIC ns).
    pub paused_ns: u64,
    pub giver: u32,
    /// The format the giver wrote (see [`wire`]).
    pub format: u32,
}

/// A held hook whose record this agent cannot read (a frame too large,
/// or not a record it knows): its connection, the pod its record names
/// if that much can be read, and why.
pub struct Unreadable {
    pub pod: Option<String>,
    pub why: String,
    pub conn: OwnedFd,
}

impl Inherited {
    /// How many listeners (the gate's, each pod's own) it holds.
    pub fn listeners(&self) -> usize {
        self.pod_gates.len() + usize::from(self.gate.is_some())
    }

    /// How many held hooks, exec and httpGet (readable or not).
    pub fn hooks(&self) -> usize {
        self.exec_hooks.len() + self.http_hooks.len() + self.unreadable.len()
    }
}

/// What a keeper kept and what a handover brought, as one: a crash of
/// the agent met by a successor's start. The handover's gate listener
/// is the one bound at the gate's path; the kept one's queue is cut
/// (its `graceful-wait`s reconnect).
pub fn merge(kept: Option<Inherited>, handed: Option<Inherited>) -> Option<Inherited> {
    match (kept, handed) {
        (Some(mut k), Some(h)) => {
            k.gate = h.gate.or(k.gate);
            k.pod_gates.extend(h.pod_gates);
            k.exec_hooks.extend(h.exec_hooks);
            k.http_hooks.extend(h.http_hooks);
            k.unreadable.extend(h.unreadable);
            k.paused_ns = k.paused_ns.min(h.paused_ns);
            k.giver = h.giver;
            Some(k)
        }
        (k, h) => k.or(h),
    }
}

/// A pod's own gate (its httpGet listener or its socket gate), with its
/// namespace.
pub struct PodListener {
    pub uid: String,
    pub pod: String,
    pub at: Endpoint,
    pub listener: OwnedFd,
    pub netns: NetNs,
}

impl PodListener {
    fn new(
        uid: String,
        pod: String,
        at: Endpoint,
        listener: OwnedFd,
        ns: OwnedFd,
    ) -> Result<PodListener, TakeError> {
        let netns = NetNs::open(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&ns)))
            .map_err(TakeError::Netns)?;
        Ok(PodListener {
            uid,
            pod,
            at,
            listener,
            netns,
        })
    }
}

/// Why nothing was taken.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    #[error("no agent offers a handover at {0}")]
    NoGiver(String),
    #[error("the handover socket's {what}: {error}")]
    Io {
        what: &'static str,
        error: std::io::Error,
    },
    #[error("{0}")]
    Peer(#[from] peer::PeerError),
    #[error("the giver's {what} cannot be read: {error}")]
    Wire { what: &'static str, error: WireError },
    #[error("the giver closed before its {0}")]
    Closed(&'static str),
    #[error("the giver announced {announced} records and sent {sent}")]
    Count { announced: u32, sent: u32 },
    #[error("a pod's network namespace came unreadable: {0}")]
    Netns(std::io::Error),
}

impl TakeError {
    /// Whether the giver is simply not there (an agent of a release
    /// without handovers, or no agent at all).
    pub fn no_giver(&self) -> bool {
        matches!(self, TakeError::NoGiver(_))
    }
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> TakeError {
    move |error| TakeError::Io { what, error }
}

fn wire_err(what: &'static str) -> impl FnOnce(WireError) -> TakeError {
    move |error| TakeError::Wire { what, error }
}

/// Takes everything from the agent listening at `socket`; `holder`: who
/// holds the pin directory's lock, as the caller found it.
pub fn take(socket: &Path, pins: &PinDir, holder: Option<Option<u32>>) -> Result<Inherited, TakeError> {
    let chan = match fds::connect(socket) {
        Ok(c) => c,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Err(TakeError::NoGiver(socket.display().to_string()))
        }
        Err(e) => return Err(io("connect")(e)),
    };
    chan.set_timeout(Duration::from_secs(10)).map_err(io("timeout"))?;
    let (uid, pid) = chan.peer().map_err(io("credentials"))?;
    peer::check_uid(uid)?;
    peer::check_giver(holder, pid)?;
    let proof = peer::proof(pins)?;
    let hello = Hello::ours(std::process::id(), env!("CARGO_PKG_VERSION"));
    chan.send(&wire::encode(&hello), &[std::os::fd::AsFd::as_fd(&proof)])
        .map_err(io("hello"))?;
    match receive(&chan) {
        Ok(mut got) => {
            info!(giver = pid, format = got.format, "handover: taking over");
            got.giver = pid;
            // In the giver's format: it may be the older release.
            let v = Verdict {
                version: got.format,
                taken: true,
                why: None,
            };
            chan.send(&wire::encode(&v), &[]).map_err(io("verdict"))?;
            Ok(got)
        }
        Err(e) => {
            // Said to the giver too, which then serves on (in the oldest
            // format: the giver reads it whatever its release).
            let v = Verdict {
                version: OLDEST,
                taken: false,
                why: Some(e.to_string()),
            };
            let _ = chan.send(&wire::encode(&v), &[]);
            Err(e)
        }
    }
}

/// Reads an offer, its records and its end (from a giver, or from this
/// agent's keeper, which speaks the same frames).
pub fn receive(chan: &Channel) -> Result<Inherited, TakeError> {
    let head = chan
        .recv()
        .map_err(io("offer"))?
        .ok_or(TakeError::Closed("offer"))?;
    let offer: Offer = wire::decode(&head.bytes).map_err(wire_err("offer"))?;
    let mut got = Inherited {
        paused_ns: offer.paused_ns,
        giver: offer.pid,
        format: offer.version,
        ..Inherited::default()
    };
    let mut sent = 0u32;
    loop {
        let f = chan
            .recv()
            .map_err(io("record"))?
            .ok_or(TakeError::Closed("done"))?;
        if let Ok(done) = wire::decode::<Done>(&f.bytes) {
            if done.records != offer.records || sent != offer.records {
                return Err(TakeError::Count {
                    announced: offer.records,
                    sent,
                });
            }
            return Ok(got);
        }
        let record = match wire::decode_record(&f.bytes, f.fds.len()) {
            Ok(r) => r,
            // A held hook's connection whose record cannot be read: taken,
            // and answered, rather than the whole handover refused (the
            // rollout would wait on it).
            Err(e) if f.fds.len() == 1 && !listening(&f.fds[0]) => {
                sent += 1;
                got.unreadable.push(Unreadable {
                    pod: pod_named(&f.bytes),
                    why: e.to_string(),
                    conn: f.fds.into_iter().next().expect("one descriptor"),
                });
                continue;
            }
            Err(e) => return Err(wire_err("record")(e)),
        };
        sent += 1;
        let mut fds = f.fds.into_iter();
        let mut next = || fds.next().expect("decode_record checked the count");
        match record {
            Record::GateListener { .. } => got.gate = Some(next()),
            Record::HttpListener { uid, pod, port } => {
                let (listener, ns) = (next(), next());
                got.pod_gates
                    .push(PodListener::new(uid, pod, Endpoint::Port(port), listener, ns)?);
            }
            Record::PodSocket { uid, pod } => {
                let (listener, ns) = (next(), next());
                got.pod_gates
                    .push(PodListener::new(uid, pod, Endpoint::Socket, listener, ns)?);
            }
            Record::ExecHook(h) => got.exec_hooks.push((h, next())),
            Record::HttpHook(h) => got.http_hooks.push((h, next())),
        }
    }
}

/// Whether `fd` is a listening socket (a gate's listener, which has no
/// hook to answer).
fn listening(fd: &OwnedFd) -> bool {
    rustix::net::sockopt::socket_acceptconn(fd).unwrap_or(true)
}

/// The pod uid a record's frame names near its start (`"pod":"<uid>"`),
/// when it is there whole.
fn pod_named(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let at = text.find("\"pod\":\"")? + 7;
    let uid: String = text[at..].chars().take_while(|c| *c != '"').collect();
    let ok = !uid.is_empty() && uid.len() <= 64 && uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    ok.then_some(uid)
}
