//! The agent's side: the socket its keeper passed it (by number, in
//! [`super::ENV`]). At the start the agent takes what the keeper holds
//! (nothing on a first start; the listeners and held hooks of an agent
//! that died, after a crash); from then on its registry
//! ([`crate::continuity::handover::held::Registry`], through [`Mirror`]) deposits each listener and held
//! hook as it comes and withdraws it as it goes.

use std::{
    os::fd::{BorrowedFd, FromRawFd as _, OwnedFd},
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use tracing::error;

use graceful_api::Point;

use super::frames::{self, Op};
use crate::continuity::handover::{
    fds::Channel,
    held::{key_of, Key, Mirror},
    take::{self, Inherited, TakeError},
    wire::Record,
};

/// How long one frame to the keeper may take. The keeper reads at once;
/// a keeper this slow is gone, and the agent goes on without it.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// The connection to this agent's keeper.
pub struct Link {
    chan: Channel,
    /// A send failed: said once.
    broken: AtomicBool,
}

/// Why the keeper's socket is refused.
#[derive(Debug, thiserror::Error)]
#[error("{var}={value:?} does not name a keeper's socket ({why}); unset it, or run `graceful daemon --keeper on` as the container's command")]
pub struct LinkError {
    var: &'static str,
    value: String,
    why: String,
}

impl Link {
    /// The keeper's socket, if this agent has a keeper.
    pub fn from_env() -> Result<Option<Link>, LinkError> {
        let Some(value) = std::env::var_os(super::ENV) else {
            return Ok(None);
        };
        let value = value.to_string_lossy().into_owned();
        let err = |why: String| LinkError {
            var: super::ENV,
            value: value.clone(),
            why,
        };
        let n: i32 = value
            .parse()
            .ok()
            .filter(|n| *n > 2)
            .ok_or_else(|| err("not a descriptor number above 2".into()))?;
        // SAFETY: F_GETFD only reads the descriptor's flags; on a number
        // that is not open it answers EBADF.
        let open = unsafe { libc::fcntl(n, libc::F_GETFD) } >= 0;
        if !open {
            return Err(err("it is not open".into()));
        }
        // SAFETY: n is open, and nothing else in this process owns it: the
        // keeper left it open across the exec for this process alone, and
        // it is taken here once, at the agent's start.
        let fd = unsafe { OwnedFd::from_raw_fd(n) };
        rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC).map_err(|e| err(e.to_string()))?;
        let chan = Channel::from_fd(fd).map_err(|e| err(e.to_string()))?;
        chan.set_timeout(SEND_TIMEOUT).map_err(|e| err(e.to_string()))?;
        Ok(Some(Link {
            chan,
            broken: AtomicBool::new(false),
        }))
    }

    /// Takes everything the keeper holds; `None` when it holds nothing.
    pub fn take(&self) -> Result<Option<Inherited>, TakeError> {
        self.chan
            .send(&frames::encode(Op::Take), &[])
            .map_err(|error| TakeError::Io {
                what: "request to the keeper",
                error,
            })?;
        let got = take::receive(&self.chan)?;
        Ok((got.listeners() + got.hooks() > 0).then_some(got))
    }

    fn send(&self, op: Op, fds: &[BorrowedFd<'_>]) {
        if let Err(e) = self.chan.send(&frames::encode(op), fds) {
            if !self.broken.swap(true, Ordering::AcqRel) {
                error!(error = %e, "keeper: cannot reach it; a crash of this agent would now cut the hooks it holds");
            }
        }
    }
}

impl Mirror for Link {
    fn deposit(&self, record: &Record, fds: &[BorrowedFd<'_>]) -> Option<Key> {
        let key = key_of(*fds.first()?).ok()?;
        self.send(
            Op::Deposit {
                record: record.clone(),
            },
            fds,
        );
        Some(key)
    }

    fn withdraw(&self, key: Key) {
        self.send(
            Op::Withdraw {
                dev: key.0,
                ino: key.1,
            },
            &[],
        );
    }

    fn point(&self, key: Key, point: Point) {
        self.send(
            Op::Point {
                dev: key.0,
                ino: key.1,
                point,
            },
            &[],
        );
    }

    fn settled(&self) {
        self.send(Op::Settled, &[]);
    }

    fn given(&self) {
        self.send(Op::Given, &[]);
    }
}
