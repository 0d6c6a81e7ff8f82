//! The state programs under the sock_ops design. They count the sockets
//! that carry storage: those adopted at a start, and those an agent of the
//! tracepoint design started to track. The sock_ops program counts every
//! other socket, and takes a socket with storage over when it sees it
//! established or listening. So they are attached at each start, for the
//! adoption, and detached as soon as a whole pass over the node finds no
//! socket they count: from then on every TCP state change on the node
//! costs one program (sock_ops) instead of three.
//!
//! Order matters, and is the reverse of the loader's:
//! 1. the links go, so the state programs stop;
//! 2. then `control::STORAGE` is cleared, so the sock_ops program stops
//!    looking for storage. In between, a socket with storage left (one
//!    the iterator cannot reach: closed, not hashed, and so uncounted) is
//!    taken over by the sock_ops program if it connects again, which is
//!    exactly what it does once the bit is clear.
//!
//! The same complete pass ends a recount (`control::RECOUNT`, set by the
//! loader on maps it created): by then the iterator has counted every
//! flagged socket that an earlier install had counted in maps now gone,
//! so the sock_ops program stops looking for the mark.

use std::{path::PathBuf, sync::Arc};

use graceful_common::control;
use tracing::{info, warn};

use super::{maps::Control, paths::PinDir, pinned::Pinned, MapError};

/// The state programs' links of one object, the pins that hold them, and
/// the control map.
pub struct StatePrograms {
    pins: PinDir,
    links: Vec<PathBuf>,
    pinned: Arc<Pinned>,
}

impl StatePrograms {
    /// `links`: the state program's and its backstop's pins (none under the
    /// tracepoint design, where they stay).
    pub fn new(pins: &PinDir, links: Vec<PathBuf>, pinned: Arc<Pinned>) -> Self {
        Self {
            pins: pins.clone(),
            links,
            pinned,
        }
    }

    /// After a pass that found `counted` sockets with storage: detaches
    /// the state programs if none, and if the pass walked every network
    /// namespace (`complete`). A failure is a warning: they just stay.
    pub fn after_pass(&self, counted: u64, complete: bool) {
        if !complete {
            return;
        }
        if let Err(e) = self.end_recount() {
            warn!(error = %e, "cannot end the recount; the sock_ops program keeps looking for its marks, at a small cost");
        }
        if let Err(e) = self.retire_if_idle(counted) {
            warn!(error = %e, "cannot detach the state programs; they stay attached, at their cost");
        }
    }

    /// Clears `control::RECOUNT` if set: a complete pass has counted every
    /// flagged socket these maps lacked.
    fn end_recount(&self) -> Result<(), MapError> {
        let mut c = Control::open(&self.pins)?;
        if c.get()? & control::RECOUNT != 0 {
            c.set(control::RECOUNT, false)?;
            info!("recount done: every network namespace was walked, and every connection an earlier install counted is counted here");
        }
        Ok(())
    }

    /// Whether any of them is still attached.
    pub fn attached(&self) -> bool {
        self.links.iter().any(|p| p.exists())
    }

    /// Detaches them, given a pass that walked every network namespace
    /// and found `counted` sockets that they count.
    fn retire_if_idle(&self, counted: u64) -> Result<(), MapError> {
        if counted > 0 || !self.attached() {
            return Ok(());
        }
        for link in &self.links {
            self.pinned.release(link).map_err(|e| MapError::Unpin {
                path: link.clone(),
                source: e,
            })?;
        }
        Control::open(&self.pins)?.set(control::STORAGE, false)?;
        info!("no socket is counted by the state programs any more: detached them; sock_ops counts every connection");
        Ok(())
    }
}
