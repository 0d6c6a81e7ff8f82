//! The node's claim, or the node taken over: an agent that finds the pins
//! held by a live agent asks it for a handover ([`crate::continuity::handover`]); once
//! it has everything, the old agent retires and its locks come free.

use std::{path::Path, time::Duration};

use tracing::{error, info, warn};

use super::{
    claim::{self, Claim, ClaimError},
    Settings,
};
use crate::{
    continuity::handover::{give, take},
    kernel::bpf::paths::PinDir,
};

/// How long the retiring agent may take to let its locks go.
const RELEASE_LIMIT: Duration = Duration::from_secs(10);
/// After a handover failed, how often this agent asks again, and for how
/// long in all before it gives up and exits (the running agent serves on;
/// the kubelet starts this one again, and it asks again then).
const RETRY_EVERY: Duration = Duration::from_secs(5);
const RETRY_FOR: Duration = Duration::from_secs(60);

/// What the node's claim brought.
pub struct Taken<A> {
    pub claim: Claim,
    /// What a handover brought, if one happened.
    pub inherited: Option<take::Inherited>,
    /// What `prepare` made, if it ran.
    pub prepared: Option<A>,
    /// Why a handover offered by a running agent could not be taken, as
    /// logged.
    pub failed: Option<String>,
}

/// The claim, and what a handover brought, if one happened. `prepare` runs
/// before a handover when a running agent of this very build holds the
/// pins (see `loader::same_build_attached`): what it does then shortens
/// the pause of the gates, which starts with the handover.
pub fn claim_or_take<A>(
    pins: &PinDir,
    api_socket: &Path,
    gate_socket: Option<&Path>,
    settings: &Settings,
    prepare: impl FnOnce() -> anyhow::Result<A>,
) -> anyhow::Result<Taken<A>> {
    let held = match claim::take(pins, api_socket, gate_socket) {
        Ok(claim) => {
            return Ok(Taken {
                claim,
                inherited: None,
                prepared: None,
                failed: None,
            })
        }
        Err(e @ ClaimError::Held { .. }) if pins_are(&e, pins) => e,
        Err(e) => return Err(e.into()),
    };
    let Some(dir) = settings.gate_dir.as_ref().filter(|_| settings.handover) else {
        return Err(held.into());
    };
    let socket = give::socket_path(dir);
    if !socket.exists() {
        return Err(held.into());
    }
    let prepared = if crate::kernel::bpf::loader::same_build_attached(pins) {
        Some(prepare()?)
    } else {
        None
    };
    let deadline = std::time::Instant::now() + RETRY_FOR;
    let mut failed: Option<String> = None;
    loop {
        let holder = claim::pins_held(pins).ok().flatten();
        let e = match take::take(&socket, pins, holder) {
            Ok(inherited) => {
                info!(
                    giver = inherited.giver,
                    listeners = inherited.listeners(),
                    hooks = inherited.hooks(),
                    "handover: took the node's listeners and held hooks; waiting for the old agent to let its locks go"
                );
                // The gate's listener is ours now: no need to ask who answers.
                let gate = if inherited.gate.is_some() {
                    None
                } else {
                    gate_socket
                };
                let claim = wait_for_claim(pins, api_socket, gate, RELEASE_LIMIT)?;
                return Ok(Taken {
                    claim,
                    inherited: Some(inherited),
                    prepared,
                    failed,
                });
            }
            Err(e) if e.no_giver() && failed.is_none() => return Err(held.into()),
            Err(e) => e,
        };
        // The running agent thawed and serves on: nothing is cut while
        // this one asks again, within a bound.
        let why = format!("handover failed: {e}");
        if std::time::Instant::now() >= deadline {
            anyhow::bail!(
                "{why}; asked again for {} s: the running agent serves on, and this agent exits (the kubelet starts it again)",
                RETRY_FOR.as_secs()
            );
        }
        error!(
            "{why}; the running agent serves on; asking again in {} s",
            RETRY_EVERY.as_secs()
        );
        failed = Some(why);
        std::thread::sleep(RETRY_EVERY);
        // The old agent may have stopped meanwhile: the node is ours.
        if let Ok(claim) = claim::take(pins, api_socket, gate_socket) {
            return Ok(Taken {
                claim,
                inherited: None,
                prepared,
                failed,
            });
        }
    }
}

fn pins_are(e: &ClaimError, pins: &PinDir) -> bool {
    matches!(e, ClaimError::Held { path, .. } if path == pins.root())
}

/// Polls for the claim until `limit`.
fn wait_for_claim(pins: &PinDir, api: &Path, gate: Option<&Path>, limit: Duration) -> anyhow::Result<Claim> {
    let start = std::time::Instant::now();
    let mut said = start;
    loop {
        match claim::take(pins, api, gate) {
            Ok(c) => return Ok(c),
            Err(e @ (ClaimError::Held { .. } | ClaimError::Serving { .. })) => {
                if start.elapsed() >= limit {
                    return Err(e.into());
                }
                if said.elapsed() >= Duration::from_secs(30) {
                    warn!("{e}; still waiting");
                    said = std::time::Instant::now();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e.into()),
        }
    }
}
