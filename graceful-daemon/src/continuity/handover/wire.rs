//! The handover's wire format: frames of JSON, each with the descriptors
//! it names passed beside it (SCM_RIGHTS, see [`super::fds`]).
//!
//! A frame is a 4-byte big-endian length, then that many bytes of JSON.
//! The taker speaks first ([`Hello`], with the proof of [`super::peer`] as
//! its one descriptor); the giver answers with an [`Offer`] head, then one
//! [`Record`] frame per listener or held hook, then [`Done`]; the taker
//! answers [`Verdict`]. Every frame carries its format's version.
//!
//! Formats: 1 carried each held hook's request; 2 adds what its drain's
//! report has so far ([`ExecHook::progress`]); 3 adds a pod's socket gate
//! ([`Record::PodSocket`]), which a giver leaves out for an older taker
//! (that release has no socket gate: those pods' hooks fail open there). A taker reads every format
//! from [`OLDEST`] to [`VERSION`]: its hello is written in format 1 (the
//! only one an agent of format 1 reads) and says the newest it reads
//! ([`Hello::reads`]); the giver writes the newest both read, so either
//! side may be the older release. A side that reads no format of the
//! other's says so in one line, and the giver keeps serving.
//!
//! Frames are bounded: this agent writes none over [`MAX_FRAME`] (a held
//! hook's record is built to fit: `crate::drain::hook::record`), and reads
//! none over [`MAX_READ_FRAME`] (an agent of 0.1.0 wrote a hook's request
//! as the pod sent it, which could take more). A frame over it, a
//! truncated one, bad JSON, an unknown kind or a record whose descriptors
//! do not match what it names is an error that says which, never a panic;
//! a taker serves on past a record it cannot read ([`super::take`]).

use graceful_api::{Point, Resumed};
use serde::{Deserialize, Serialize};

/// The newest format this agent writes and reads.
pub const VERSION: u32 = 3;
/// The oldest format it still reads (and writes, to a taker that reads
/// no newer).
pub const OLDEST: u32 = 1;
/// The largest frame this agent writes.
pub const MAX_FRAME: usize = 64 * 1024;
/// The largest frame it reads: an agent of 0.1.0 carried a hook's request
/// body as sent (up to 64 KiB, escaped in JSON).
pub const MAX_READ_FRAME: usize = 512 * 1024;
/// The most descriptors one frame carries (the kernel's SCM_MAX_FD is 253).
pub const MAX_FDS: usize = 4;

/// The taker's first frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    /// The taker's pid, for the giver's log (the kernel's SO_PEERCRED is
    /// what is checked).
    pub pid: u32,
    /// The taker's version string (`graceful --version`), for the log.
    pub agent: String,
    /// The newest format the taker reads; absent: only `version` (an
    /// agent of format 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<u32>,
}

impl Hello {
    /// The hello this agent sends: in the oldest format it reads, saying
    /// the newest.
    pub fn ours(pid: u32, agent: &str) -> Hello {
        Hello {
            version: OLDEST,
            pid,
            agent: agent.into(),
            reads: Some(VERSION),
        }
    }

    /// The format a giver of this build answers in: the newest both read;
    /// `None` when they share none.
    pub fn format(&self) -> Option<u32> {
        let f = self.reads.unwrap_or(self.version).min(VERSION);
        (f >= self.version && f >= OLDEST).then_some(f)
    }
}

/// The giver's answer to [`Hello`]: what follows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub version: u32,
    /// The giver's pid and version string, for the taker's log.
    pub pid: u32,
    pub agent: String,
    /// When the giver stopped accepting (CLOCK_MONOTONIC ns, the same
    /// clock in every process of the node): the gate's pause starts here.
    pub paused_ns: u64,
    /// How many [`Record`] frames follow.
    pub records: u32,
}

/// One thing handed over, with the descriptors it names (in this order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// The gate's listening unix socket. Descriptors: the listener.
    GateListener { path: String },
    /// One pod's httpGet gate. Descriptors: the listener, then the pod's
    /// network namespace.
    HttpListener { uid: String, pod: String, port: u16 },
    /// One pod's socket gate: the abstract unix socket bound in its
    /// network namespace (format 3). Descriptors: the listener, then the
    /// pod's network namespace.
    PodSocket { uid: String, pod: String },
    /// An exec hook waiting on the gate (`graceful-wait`). The response's
    /// head and its first lines are written: what follows is chunks of
    /// NDJSON. Descriptors: the connection.
    ExecHook(ExecHook),
    /// A kubelet's httpGet hook waiting on a pod's gate; nothing is written
    /// yet. Descriptors: the connection.
    HttpHook(HttpHook),
}

/// A held exec hook: what its drain was asked, and by whom.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecHook {
    /// The caller's pod uid and container id, and its host pid.
    pub pod: String,
    pub container: Option<String>,
    pub pid: u32,
    /// The drain request's body, as the hook sent it.
    pub request: String,
    /// When the request arrived (CLOCK_MONOTONIC ns).
    pub arrived_ns: u64,
    /// What the drain's report has so far (format 2): its start's count,
    /// its peak, its timeline. Absent before the drain's first look.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Resumed>,
}

/// A held httpGet hook.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpHook {
    /// The pod's uid (its gate is the [`Record::HttpListener`] of the same
    /// uid) and the hook's container id, if it named one.
    pub pod: String,
    pub container: Option<String>,
    /// The request's query string, as the kubelet sent it.
    pub query: String,
    /// When the request arrived (CLOCK_MONOTONIC ns) and its wall-clock
    /// start (what the query's start is measured from).
    pub arrived_ns: u64,
    pub started_unix_ms: u64,
    /// As [`ExecHook::progress`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Resumed>,
}

impl Record {
    /// How many descriptors travel with this record.
    pub fn fds(&self) -> usize {
        match self {
            Record::HttpListener { .. } | Record::PodSocket { .. } => 2,
            _ => 1,
        }
    }

    /// The oldest format that has this record.
    pub fn since(&self) -> u32 {
        match self {
            Record::PodSocket { .. } => 3,
            _ => 1,
        }
    }

    /// Whether it is a listener (not a held hook).
    pub fn is_listener(&self) -> bool {
        matches!(
            self,
            Record::GateListener { .. } | Record::HttpListener { .. } | Record::PodSocket { .. }
        )
    }

    /// The record as format `format` writes it: format 1 has no progress.
    pub fn in_format(mut self, format: u32) -> Record {
        if format < 2 {
            self.set_progress(None);
        }
        self
    }

    /// A held hook's progress so far; `None` for a listener.
    pub fn progress_mut(&mut self) -> Option<&mut Option<Resumed>> {
        match self {
            Record::ExecHook(h) => Some(&mut h.progress),
            Record::HttpHook(h) => Some(&mut h.progress),
            _ => None,
        }
    }

    /// A held hook's drain saw `p`: its progress carries it on. Whether
    /// that changed anything (a listener has no progress).
    pub fn carry_on(&mut self, p: Point) -> bool {
        match self.progress_mut() {
            Some(Some(r)) => r.point(p),
            Some(slot) => {
                *slot = Some(Resumed::starting(p));
                true
            }
            None => false,
        }
    }

    fn set_progress(&mut self, p: Option<Resumed>) {
        if let Some(slot) = self.progress_mut() {
            *slot = p;
        }
    }

    /// For logs: what it is.
    pub fn what(&self) -> &'static str {
        match self {
            Record::GateListener { .. } => "gate listener",
            Record::HttpListener { .. } => "httpGet listener",
            Record::PodSocket { .. } => "pod socket gate",
            Record::ExecHook(_) => "exec hook",
            Record::HttpHook(_) => "httpGet hook",
        }
    }
}

/// Where a pod's own gate listens, inside its network namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The httpGet gate, on this TCP port.
    Port(u16),
    /// The socket gate, [`graceful_api::POD_SOCKET`].
    Socket,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Port(p) => write!(f, "port {p}"),
            Endpoint::Socket => write!(f, "@{}", graceful_api::POD_SOCKET),
        }
    }
}

/// A record frame: the format's version with the record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordFrame {
    pub version: u32,
    pub record: Record,
}

/// The giver's last frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {
    pub version: u32,
    pub records: u32,
}

/// The taker's last frame: it took everything, or refuses (and why).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub version: u32,
    pub taken: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// What a frame's bytes did not hold.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    #[error("the frame ends before its {0}")]
    Truncated(&'static str),
    #[error("a frame of {0} bytes (at most {MAX_READ_FRAME})")]
    TooLarge(usize),
    #[error("{0} bytes after the frame")]
    Trailing(usize),
    #[error("not a handover frame: {0}")]
    Json(String),
    #[error("handover format {got}, this agent reads {OLDEST} to {VERSION}")]
    Version { got: u32 },
    #[error("a {what} came with {got} descriptors, not {want}")]
    Fds {
        what: &'static str,
        got: usize,
        want: usize,
    },
}

/// A frame's bytes: the length, then the JSON.
pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    let json = serde_json::to_vec(v).expect("handover frames serialize");
    let mut out = Vec::with_capacity(4 + json.len());
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    out
}

/// The length a frame's first 4 bytes announce, checked against
/// [`MAX_READ_FRAME`].
pub fn frame_len(head: &[u8]) -> Result<usize, WireError> {
    let b: [u8; 4] = head
        .get(..4)
        .and_then(|h| h.try_into().ok())
        .ok_or(WireError::Truncated("length"))?;
    let n = u32::from_be_bytes(b) as usize;
    if n > MAX_READ_FRAME {
        return Err(WireError::TooLarge(n));
    }
    Ok(n)
}

/// Decodes one whole frame (`bytes` holds exactly it) of type `T`.
pub fn decode<T: for<'de> Deserialize<'de> + Versioned>(bytes: &[u8]) -> Result<T, WireError> {
    let n = frame_len(bytes)?;
    let body = bytes.get(4..4 + n).ok_or(WireError::Truncated("body"))?;
    if bytes.len() > 4 + n {
        return Err(WireError::Trailing(bytes.len() - 4 - n));
    }
    // The version first, so another format is named as such, not as bad JSON.
    #[derive(Deserialize)]
    struct Head {
        version: u32,
    }
    let head: Head = serde_json::from_slice(body).map_err(|e| WireError::Json(e.to_string()))?;
    if !(OLDEST..=VERSION).contains(&head.version) {
        return Err(WireError::Version { got: head.version });
    }
    let v: T = serde_json::from_slice(body).map_err(|e| WireError::Json(e.to_string()))?;
    debug_assert_eq!(v.version(), head.version);
    Ok(v)
}

/// A record frame and its descriptors, checked to match.
pub fn decode_record(bytes: &[u8], fds: usize) -> Result<Record, WireError> {
    let f: RecordFrame = decode(bytes)?;
    if f.record.since() > f.version {
        return Err(WireError::Json(format!(
            "a {} in a frame of format {}: it came with format {}",
            f.record.what(),
            f.version,
            f.record.since()
        )));
    }
    if f.record.fds() != fds {
        return Err(WireError::Fds {
            what: f.record.what(),
            got: fds,
            want: f.record.fds(),
        });
    }
    Ok(f.record)
}

/// Frames that carry the format's version.
pub trait Versioned {
    fn version(&self) -> u32;
}

macro_rules! versioned {
    ($($t:ty),*) => {$(
        impl Versioned for $t {
            fn version(&self) -> u32 {
                self.version
            }
        }
    )*};
}
versioned!(Hello, Offer, RecordFrame, Done, Verdict);

#[cfg(test)]
mod tests;
