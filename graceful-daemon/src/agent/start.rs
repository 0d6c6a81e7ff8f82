//! The agent's start before its runtime exists, in the order it runs:
//!
//! 1. [`check`]: the kernel's floor, the node's cgroup namespace and
//!    hierarchy, the pin directory; or, in a pod that handed the node
//!    over and was started again, nothing more (it retires);
//! 2. [`inherit`]: what a keeper kept of an agent that crashed;
//! 3. [`claim`]: the node's claim, or the node taken over from a running
//!    agent (the programs loaded beside it first, when it is this very
//!    build, so the gates pause less);
//! 4. [`attach`]: the programs, attached and pinned;
//! 5. [`adopt`]: the sockets older than the agent (or, taken over from a
//!    live agent whose maps and links it reuses, a repair pass once
//!    serving instead).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use tracing::{error, info, warn};

use super::{claim::Claim, gate_dir, takeover::claim_or_take, Settings};
use crate::{
    continuity::{
        handover::{self, take},
        keeper::link::Link,
    },
    kernel::adopt::{self, pass::adopt_all},
    kernel::bpf::{
        loader::{self, AttachOptions, Attached},
        paths::PinDir,
        pinned::Pinned,
        state_programs::StatePrograms,
    },
    kernel::cgroupfs::Hierarchy,
    kernel::version,
};

/// What `check` found.
pub struct Checked {
    /// The kernel's release.
    pub release: String,
    pub hier: Hierarchy,
}

/// The kernel's floor, the node's cgroups and the pin directory. `None`:
/// this pod handed the node over, and its container was started again:
/// it retires instead of starting.
pub fn check(pins: &PinDir, api_socket: &Path, settings: &Settings) -> anyhow::Result<Option<Checked>> {
    let release = version::check_floor().map_err(anyhow::Error::msg)?;
    // Before any thread: every thread made after reads cgroup paths from the
    // top of the hierarchy, where the pod roots are.
    if let Err(e) = crate::kernel::cgroupfs::enter_nodes_namespace() {
        warn!(error = %e, "cannot enter the node's cgroup namespace (pid 1's; the agent needs hostPID): callers of the gate seen as /../.. paths are not taken for pods, and their hooks fail open");
    }
    let hier = Hierarchy::discover()?;
    // Before anything is attached or bound: a second agent changes nothing.
    loader::prepare_pin_dir(pins)?;
    let pins_held = matches!(super::claim::pins_held(pins), Ok(Some(_)));
    if settings.handover && handover::retire::handed_over(api_socket, pins_held) {
        return Ok(None);
    }
    Ok(Some(Checked { release, hier }))
}

/// What `inherit` took from a keeper.
pub struct Kept {
    /// The keeper this agent runs under, if any (see `keeper`).
    pub keeper: Option<Arc<Link>>,
    /// What it kept of an agent that crashed.
    pub inherited: Option<take::Inherited>,
    /// What could not be taken, as logged: said on this agent's own pod
    /// once the API is reached.
    pub unread: Vec<String>,
}

/// Under a keeper (see `keeper`): what it kept of an agent that crashed.
pub fn inherit() -> anyhow::Result<Kept> {
    let keeper = Link::from_env()?.map(Arc::new);
    let mut unread = Vec::new();
    let inherited = keeper.as_ref().and_then(|k| match k.take() {
        Ok(kept) => kept,
        Err(e) => {
            let why =
                format!("keeper: cannot take what it kept: {e}; starting with nothing (its hooks are cut)");
            error!("{why}");
            unread.push(why);
            None
        }
    });
    if let Some(k) = &inherited {
        info!(
            keeper = k.giver,
            listeners = k.listeners(),
            hooks = k.hooks(),
            "keeper: the previous agent died; taking the listeners and held hooks it kept"
        );
    }
    Ok(Kept {
        keeper,
        inherited,
        unread,
    })
}

/// What `claim` brought.
pub struct Claimed {
    pub claim: Claim,
    /// The programs, if they were attached before a handover.
    pub prepared: Option<Attached>,
}

/// The node's claim, or the node taken over from a running agent; what
/// the handover brought joins what the keeper kept.
pub fn claim(
    pins: &PinDir,
    api_socket: &Path,
    settings: &Settings,
    opts: &AttachOptions,
    kept: &mut Kept,
) -> anyhow::Result<Claimed> {
    let gate_socket = settings.gate_dir.as_ref().map(|d| d.join(gate_dir::SOCKET));
    // The kept gate listener answers connections itself (they queue in
    // it): no need to ask who serves the gate's socket.
    let claim_gate = gate_socket
        .as_deref()
        .filter(|_| kept.inherited.as_ref().is_none_or(|k| k.gate.is_none()));
    // A successor of this very build loads (and, reusing every pinned
    // link, attaches) before it asks for the node: the gates pause less.
    let taken = claim_or_take(pins, api_socket, claim_gate, settings, || {
        Ok(loader::attach(pins, opts)?)
    })?;
    kept.unread.extend(taken.failed);
    kept.inherited = take::merge(kept.inherited.take(), taken.inherited);
    Ok(Claimed {
        claim: taken.claim,
        prepared: taken.prepared,
    })
}

/// The programs, attached (now, or before a handover) and held by their
/// pins.
pub fn attach(
    pins: &PinDir,
    opts: &AttachOptions,
    prepared: Option<Attached>,
    checked: &Checked,
) -> anyhow::Result<(Attached, Arc<Pinned>)> {
    let attached = match prepared {
        Some(mut a) => {
            // Attached beside the old agent, which may have detached the
            // state programs meanwhile (a pass found no socket for them):
            // what it let go is not this agent's to hold.
            let gone: Vec<PathBuf> = a
                .links
                .iter()
                .filter(|l| !l.exists() && a.state_links.contains(l))
                .cloned()
                .collect();
            a.links.retain(|l| !gone.contains(l));
            if !gone.is_empty() {
                info!(
                    links = gone.len(),
                    "the previous agent detached the state programs during the handover"
                );
            }
            a
        }
        None => loader::attach(pins, opts)?,
    };
    info!(
        kernel = %checked.release,
        cgroup2 = %checked.hier.mount().display(),
        pod_cgroup_roots = %checked.hier.pod_roots(),
        pins = %pins.root().display(),
        counting = ?attached.design,
        reused_maps = attached.reused_maps,
        reused_link = attached.reused_link,
        "programs attached"
    );
    let pinned = Arc::new(Pinned::hold(pins, &attached.links)?);
    Ok((attached, pinned))
}

/// What `adopt` did.
pub struct Adopted {
    pub report: adopt::pass::Report,
    pub state_programs: StatePrograms,
    /// The adoption pass was deferred: a repair pass runs as soon as the
    /// agent serves.
    pub repair_now: bool,
}

/// The sockets older than the agent, counted. Taking over from a live
/// agent whose maps and links this one reuses, the programs counted
/// throughout: nothing is left to adopt, only to check, and the held hooks
/// wait while this runs. The check runs as a repair pass right after the
/// start instead.
pub fn adopt(
    pins: &PinDir,
    attached: &mut Attached,
    pinned: &Arc<Pinned>,
    handed_over: bool,
) -> anyhow::Result<Adopted> {
    let deferred = handed_over && attached.reused_maps && attached.reused_link;
    let report = if deferred {
        info!(
            "handover: the programs counted throughout; the adoption pass runs as a repair pass once serving"
        );
        adopt::pass::Report::default()
    } else {
        let a = adopt_all(&mut attached.ebpf)?;
        info!(offered = a.offered, namespaces = a.namespaces, "adoption done");
        a
    };
    let state_programs = StatePrograms::new(pins, attached.state_links.clone(), pinned.clone());
    if !deferred {
        state_programs.after_pass(report.storage, report.namespaces_failed == 0);
    }
    if state_programs.attached() && report.storage > 0 {
        info!(
            sockets = report.storage,
            "sockets older than the sock_ops program carry storage (adopted on a kernel before 6.12, or tracked by an agent of the tracepoint design): the state programs count them until they end, and are detached once none is left"
        );
    }
    Ok(Adopted {
        report,
        state_programs,
        repair_now: deferred,
    })
}
