//! Who may take part. The handover socket sits in the gate directory,
//! which pods mount, so neither side trusts the path alone:
//! - the giver hands over only to a process of its own uid that proves it
//!   holds this node's pins: it sends a descriptor of the pinned meta map,
//!   and the kernel says whether that is the very map the giver uses. Only
//!   a process with the node's bpffs and the rights to open its pins can;
//!   a pod that merely mounts the gate directory cannot.
//! - the taker takes only from the process that holds the pin directory's
//!   lock (SO_PEERCRED's pid against `/proc/locks`), of its own uid.

use std::os::fd::{AsFd, OwnedFd};

use aya::maps::{MapData, MapInfo};
use graceful_common::names;

use crate::kernel::bpf::paths::PinDir;

/// Why a peer is not let in.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("the peer runs as uid {got}, not this agent's {want}")]
    Uid { got: u32, want: u32 },
    #[error("the peer sent no proof that it holds this node's pins")]
    NoProof,
    #[error("the peer's proof is not this node's pinned map: {0}")]
    WrongProof(String),
    #[error("pid {got} offers the handover, but pid {holder} holds the pins")]
    NotHolder { got: u32, holder: u32 },
    #[error("no agent holds the pins, yet something offers a handover")]
    NoHolder,
    #[error("cannot read this agent's pins: {0}")]
    Own(String),
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// The uid the peer must have.
pub fn check_uid(uid: u32) -> Result<(), PeerError> {
    let want = euid();
    if uid != want {
        return Err(PeerError::Uid { got: uid, want });
    }
    Ok(())
}

/// The taker's proof: a descriptor of the pinned meta map.
pub fn proof(pins: &PinDir) -> Result<OwnedFd, PeerError> {
    let info = MapInfo::from_pin(pins.map(names::META)).map_err(|e| PeerError::Own(e.to_string()))?;
    let fd = info.fd().map_err(|e| PeerError::Own(e.to_string()))?;
    fd.as_fd()
        .try_clone_to_owned()
        .map_err(|e| PeerError::Own(e.to_string()))
}

/// Checks the taker's proof against this agent's pins.
pub fn check_proof(pins: &PinDir, proof: Option<OwnedFd>) -> Result<(), PeerError> {
    let fd = proof.ok_or(PeerError::NoProof)?;
    let theirs = MapData::from_fd(fd)
        .and_then(|m| m.info())
        .map_err(|e| PeerError::WrongProof(e.to_string()))?;
    let ours = MapInfo::from_pin(pins.map(names::META)).map_err(|e| PeerError::Own(e.to_string()))?;
    if theirs.id() != ours.id() {
        return Err(PeerError::WrongProof(format!(
            "map {} is not the pinned meta map {}",
            theirs.id(),
            ours.id()
        )));
    }
    Ok(())
}

/// Checks that `pid` is `holder`, the pin directory's lock holder as the
/// taker found it (`Some(None)`: held, by a pid not visible from here).
pub fn check_giver(holder: Option<Option<u32>>, pid: u32) -> Result<(), PeerError> {
    match holder {
        Some(Some(h)) if h != pid => Err(PeerError::NotHolder { got: pid, holder: h }),
        Some(_) => Ok(()),
        None => Err(PeerError::NoHolder),
    }
}
