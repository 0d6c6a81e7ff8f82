//! One held hook's life, whatever transport carries it: admitted,
//! prepared, held, run with its progress, released, published; and the
//! same for a hook an earlier agent held ([`Hooks::resume`]). A transport
//! only decodes its request into a [`Hook`] and encodes what comes back:
//! the settings in effect, progress points, and the [`Ending`].
//!
//! The rules every hook obeys are here, once:
//! - **pace**: a pod starts at most so many drains a minute ([`pace`]),
//!   whatever it does with them;
//! - **slots**: a container holds one exec drain at a time, and the pod's
//!   termination gets slots of its own: a drain started before the
//!   deletion never stands in the way of the termination's hook. The
//!   kubelet's httpGet hooks hold no slot: each runs a drain of its own
//!   (who may send one is the httpGet gate's to check, per request);
//! - **the record**: what a handover or a keeper carries of a held hook is
//!   built here, from the parsed request, and is bounded whatever the
//!   request was ([`record`]).

use std::{
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use graceful_api::{Accepted, DrainRequest, Point, Resumed};
use tracing::{info, warn};

use super::{
    drainer::{Drainer, Prepared},
    publish::Released,
    scope::{Refusal, Subject},
};
use crate::{
    continuity::handover::held::{Admission, Hold, Registry},
    kernel::adopt::netns::NetNs,
    share::{Busy, DrainTicket, Shares},
};

pub mod pace;
pub mod record;

/// A hook, decoded by its transport: whose drain, what it asks, and how
/// it came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hook {
    /// The pod's uid, and the container id of the caller (exec) or the
    /// one the query names (httpGet).
    pub pod: String,
    pub container: Option<String>,
    /// The request, without the timeline a reconnecting client sent (that
    /// is [`Hook::progress`]); a marker says there was one.
    pub request: DrainRequest,
    /// When it reached the agent (CLOCK_MONOTONIC ns).
    pub arrived_ns: u64,
    pub origin: Origin,
    /// What the drain's report has so far: the client's own earlier
    /// attempts, then each point the drain sees, carried to a successor.
    pub progress: Option<Resumed>,
}

/// How a hook came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// `graceful-wait` on the gate socket or a pod's socket gate: the
    /// caller's host pid. It reconnects if its connection is cut.
    Exec { pid: u32 },
    /// The kubelet's httpGet hook: its query as sent, and when it came
    /// (what the query's times count from). It never reconnects.
    Http { query: String, started_unix_ms: u64 },
}

impl Hook {
    /// An exec hook's request as `graceful-wait` sent it.
    pub fn exec(
        pod: String,
        container: Option<String>,
        pid: u32,
        mut request: DrainRequest,
        arrived_ns: u64,
    ) -> Hook {
        let progress = request.resumed.take();
        if progress.is_some() {
            // The drain's start is bounded as a reconnect's (see the
            // drainer's `bounded_start`); the timeline itself travels once.
            request.resumed = Some(Resumed::default());
        }
        Hook {
            pod,
            container,
            request,
            arrived_ns,
            origin: Origin::Exec { pid },
            progress,
        }
    }

    /// Whether its transport reconnects when cut (an exec hook does).
    pub fn reconnects(&self) -> bool {
        matches!(self.origin, Origin::Exec { .. })
    }

    fn subject(&self, netns: Option<NetNs>) -> Subject {
        Subject {
            pod: self.pod.clone(),
            container: self.container.clone(),
            netns,
        }
    }
}

/// Why a hook was not held: what its transport answers.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Past its pod's share, or its pace (429); the agent full (503).
    #[error("{0}")]
    Busy(#[from] Busy),
    #[error("{0}")]
    Pace(#[from] pace::TooFast),
    /// The request names what the pod has not (400), or the pod has no
    /// cgroups here (404).
    #[error("{0}")]
    Refusal(#[from] Refusal),
    /// What a handover would carry of it does not fit (400).
    #[error("{0}")]
    Record(#[from] record::TooLarge),
}

/// A hook an earlier agent held, held again on its connection (or why
/// not), for its transport to run and answer.
pub struct Reheld<S> {
    pub stream: S,
    pub started: Result<Started, Unresumed>,
}

/// Why a hook an earlier agent held is not held again: what its
/// transport answers it with.
#[derive(Debug, thiserror::Error)]
pub enum Unresumed {
    /// Its record could not be read.
    #[error("{0}")]
    Unreadable(String),
    #[error(transparent)]
    Refused(#[from] Refused),
}

impl Refused {
    pub fn status(&self) -> http::StatusCode {
        use http::StatusCode;
        match self {
            Refused::Busy(b) => b.status(),
            Refused::Pace(_) => StatusCode::TOO_MANY_REQUESTS,
            Refused::Refusal(Refusal::NotFound(_)) => StatusCode::NOT_FOUND,
            Refused::Refusal(Refusal::Invalid(_)) | Refused::Record(_) => StatusCode::BAD_REQUEST,
        }
    }
}

/// What every hook shares.
pub struct Hooks {
    pub drainer: Arc<Drainer>,
    pub shares: Arc<Shares>,
    /// What a handover carries, and the keeper keeps.
    pub registry: Arc<Registry>,
    pace: pace::Pace,
    /// Held hooks that cannot reconnect (the kubelet's): a stopping agent
    /// serves on until they end.
    held_for_good: AtomicUsize,
}

/// How a held hook ended.
pub enum Ending {
    /// Released: the transport answers with the report, then publishes it.
    Released(Box<Released>),
    /// The drain failed (a map read): the transport answers with this.
    Failed(String),
    /// The client went away; nothing to answer.
    Abandoned,
}

/// A hook held, its drain ready to run.
pub struct Started {
    hooks: Arc<Hooks>,
    prepared: Prepared,
    hold: Option<Hold>,
    _slot: Option<DrainTicket>,
    _held: Option<HeldForGood>,
    pod: String,
}

/// One hook counted in [`Hooks::held_for_good`] while it is held.
struct HeldForGood(Arc<Hooks>);

impl Drop for HeldForGood {
    fn drop(&mut self) {
        self.0.held_for_good.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Hooks {
    pub fn new(drainer: Arc<Drainer>, shares: Arc<Shares>, registry: Arc<Registry>) -> Arc<Hooks> {
        Arc::new(Hooks {
            drainer,
            shares,
            registry,
            pace: pace::Pace::default(),
            held_for_good: AtomicUsize::new(0),
        })
    }

    /// Held hooks that cannot reconnect, now.
    pub fn held_for_good(&self) -> usize {
        self.held_for_good.load(Ordering::Acquire)
    }

    /// Admits a new hook, prepares its drain and holds it on `conn` (its
    /// connection, for a handover to carry; `admission` settles). `netns`:
    /// the pod's network namespace, for the repair pass before the first look.
    pub fn start(
        self: &Arc<Self>,
        hook: Hook,
        netns: Option<NetNs>,
        conn: Option<BorrowedFd<'_>>,
        admission: &Admission,
    ) -> Result<Started, Refused> {
        self.pace.take(&hook.pod)?;
        let slot = self.slot(&hook)?;
        let record = record::of(&hook)?;
        let prepared = self.prepare(&hook, netns)?;
        let hold = conn.and_then(|fd| {
            self.registry
                .hold(record, fd, admission)
                .map_err(|e| warn!(pod = %hook.pod, error = %e, "cannot register a held hook; a handover would not carry it"))
                .ok()
        });
        Ok(self.started(&hook, prepared, hold, slot))
    }

    /// A hook an earlier agent held (handed over or kept), with its
    /// connection: registered at once, so that a handover or the keeper
    /// carries it on, then prepared as it was asked, from its original
    /// start. No pace and no namespace walk: it was admitted and walked
    /// when it began.
    pub fn resume(self: &Arc<Self>, hook: &Hook, conn: BorrowedFd<'_>) -> Result<Started, Refused> {
        let hold = match record::of(hook) {
            Ok(r) => self.registry.resume(r, conn),
            Err(e) => {
                warn!(pod = %hook.pod, error = %e, "a handed-over hook is too large to carry on again");
                None
            }
        };
        // Its slot if free: a hook carried over is never refused for it.
        let slot = self.slot(hook).ok().flatten();
        let prepared = self.prepare(hook, None)?;
        Ok(self.started(hook, prepared, hold, slot))
    }

    /// A hook an earlier agent held, on its connection `fd`, which its
    /// transport opens (`open`): held again from its record `hook` (or why
    /// it is not), with its stream. `None`, logged, if the connection
    /// cannot be served at all.
    pub fn resume_on<S: AsFd>(
        self: &Arc<Self>,
        pod: &str,
        hook: Result<Hook, String>,
        fd: OwnedFd,
        open: impl FnOnce(OwnedFd) -> std::io::Result<S>,
    ) -> Option<Reheld<S>> {
        let stream = match open(fd) {
            Ok(s) => s,
            Err(e) => {
                warn!(pod, error = %e, "handover: cannot serve a held hook's connection");
                return None;
            }
        };
        let started = match hook {
            Ok(h) => self.resume(&h, stream.as_fd()).map_err(Unresumed::from),
            Err(why) => Err(Unresumed::Unreadable(why)),
        };
        Some(Reheld { stream, started })
    }

    /// The container's exec slot in this epoch of its pod (before its
    /// deletion, or during it); httpGet hooks take none.
    fn slot(&self, hook: &Hook) -> Result<Option<DrainTicket>, Busy> {
        if !hook.reconnects() {
            return Ok(None);
        }
        let epoch = self
            .drainer
            .pod_kube
            .as_ref()
            .and_then(|api| api.store.get(&hook.pod))
            .and_then(|p| p.deletion_timestamp)
            .map(|t| t.as_millisecond().to_string());
        self.shares
            .drain(&hook.pod, hook.container.as_deref(), epoch.as_deref())
            .map(Some)
    }

    fn prepare(&self, hook: &Hook, netns: Option<NetNs>) -> Result<Prepared, Refusal> {
        Ok(self
            .drainer
            .prepare(hook.subject(netns), &hook.request, hook.arrived_ns)?
            // The report carries on from what was seen before.
            .carrying_on(hook.progress.clone()))
    }

    fn started(
        self: &Arc<Self>,
        hook: &Hook,
        prepared: Prepared,
        hold: Option<Hold>,
        slot: Option<DrainTicket>,
    ) -> Started {
        let held = (!hook.reconnects()).then(|| {
            self.held_for_good.fetch_add(1, Ordering::AcqRel);
            HeldForGood(self.clone())
        });
        Started {
            hooks: self.clone(),
            prepared,
            hold,
            _slot: slot,
            _held: held,
            pod: hook.pod.clone(),
        }
    }
}

impl Started {
    /// The settings in effect: an exec hook's first line.
    pub fn accepted(&self) -> &Accepted {
        &self.prepared.accepted
    }

    /// Runs the drain to its release, calling `progress` with each point
    /// (none while a handover freezes this agent: the successor writes
    /// from there), until `gone` says the client went away. Released, the
    /// hook leaves the registry (once this agent may answer it) before the
    /// transport writes its answer.
    pub async fn run(
        self,
        mut progress: impl FnMut(&Point) + Send,
        gone: impl std::future::Future<Output = ()>,
    ) -> Ending {
        let Started {
            hooks,
            prepared,
            hold,
            _slot,
            _held,
            pod,
        } = self;
        let so_far = hold.as_ref().map(|h| h.progress());
        let open = hooks.registry.clone();
        let run = hooks.drainer.clone().run(prepared, move |p| {
            if !open.answering() {
                return;
            }
            if let Some(s) = &so_far {
                s.point(p);
            }
            progress(p);
        });
        let result = tokio::select! {
            r = run => r,
            _ = gone => {
                info!(pod = %pod, "drain abandoned: the client went away");
                return Ending::Abandoned;
            }
        };
        if let Some(h) = hold {
            h.release().await;
        }
        match result {
            Ok(released) => Ending::Released(Box::new(released)),
            Err(e) => Ending::Failed(e.to_string()),
        }
    }
}
