//! Stand-ins for the programs of `deploy/examples`, for the local cluster
//! test: Envoy ([`mesh_proxy`]), coraza-spoa ([`waf_agent`]), and an
//! [`app`] (the benchmarks', and the OPA examples' app that asks OPA, built
//! here, about every request: [`authz`]). None of those programs can be
//! had where the test runs, and the test only relies on two things about
//! each: how it holds connections, and what it does on SIGTERM. Each role
//! here does those two things the way its program does, and nothing else.
//! They run as `graceful-stand-in ROLE` (src/bin/graceful-stand-in.rs) in
//! images named for what they are (`stand-in/mesh-proxy`, ...).
//!
//! Each runs as PID 1 of its container. The kernel gives PID 1 no default
//! signal actions, so a SIGTERM it doesn't handle is dropped. [`Signals`]
//! blocks SIGTERM and SIGINT before any thread starts (every thread inherits
//! the mask, and a blocked signal is never dropped), and the main thread
//! then takes them with sigwait(2): each role's shutdown runs in normal
//! thread context, not in a signal handler.

pub mod app;
pub mod authz;
pub mod http;
pub mod mesh_proxy;
pub mod server;
pub mod spop;
pub mod waf_agent;

use crate::monotonic_ns;
use anyhow::{bail, Result};
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
