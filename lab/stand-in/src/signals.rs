//! SIGTERM and SIGINT for a process that runs as PID 1: see the crate's
//! map for why they are blocked and taken with sigwait(2).

use anyhow::{bail, Result};
use graceful_test_support::monotonic_ns;
use std::mem::MaybeUninit;

/// SIGTERM and SIGINT, blocked in every thread, taken with sigwait(2).
pub struct Signals {
    set: libc::sigset_t,
}

/// A signal taken by [`Signals::wait`].
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub signal: libc::c_int,
    /// CLOCK_MONOTONIC, read the moment sigwait(2) returned.
    pub monotonic_ns: u64,
}

impl Received {
    pub fn name(&self) -> &'static str {
        match self.signal {
            libc::SIGTERM => "SIGTERM",
            libc::SIGINT => "SIGINT",
            _ => "signal",
        }
    }
}

impl Signals {
    /// Blocks SIGTERM and SIGINT in the calling thread, and so in every
    /// thread started after it: call it first thing in `main`.
    pub fn block() -> Result<Signals> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initializes the set; sigaddset and
        // pthread_sigmask get a valid, initialized set.
        let rc = unsafe {
            libc::sigemptyset(set.as_mut_ptr());
            libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
            libc::sigaddset(set.as_mut_ptr(), libc::SIGINT);
            libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), std::ptr::null_mut())
        };
        if rc != 0 {
            bail!("pthread_sigmask: {}", std::io::Error::from_raw_os_error(rc));
        }
        // SAFETY: initialized by sigemptyset above.
        Ok(Signals {
            set: unsafe { set.assume_init() },
        })
    }

    /// Waits for SIGTERM or SIGINT.
    pub fn wait(&self) -> Result<Received> {
        let mut signal = 0;
        loop {
            // SAFETY: a valid set and a valid out pointer.
            let rc = unsafe { libc::sigwait(&self.set, &mut signal) };
            if rc == 0 {
                break;
            }
            if rc != libc::EINTR {
                bail!("sigwait: {}", std::io::Error::from_raw_os_error(rc));
            }
        }
        Ok(Received {
            signal,
            monotonic_ns: monotonic_ns(),
        })
    }
}
