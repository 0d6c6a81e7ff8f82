//! Ctrl-C for `graceful-rollout`: SIGINT, SIGTERM or SIGHUP set a flag that
//! every wait of the simulation checks. The wait then fails, the run unwinds
//! through its guards, and they remove what it made. Tests never set it.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use crate::monotonic_ns;
use anyhow::bail;

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn request(_: libc::c_int) {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Installs the handler (the command does; a test does not).
pub fn on_signals() {
    let handler = request as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { libc::signal(sig, handler) };
    }
}

/// Fails once a stop was asked for.
pub fn check() -> anyhow::Result<()> {
    if REQUESTED.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}

/// Waits until CLOCK_MONOTONIC reaches `at_ns`, in steps of at most 10 ms.
pub fn until(at_ns: u64) -> anyhow::Result<()> {
    loop {
        check()?;
        let left = at_ns.saturating_sub(monotonic_ns());
        if left == 0 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_nanos(left.min(10_000_000)));
    }
}

/// Sleeps for `d`, failing early on a stop.
pub fn sleep(d: Duration) -> anyhow::Result<()> {
    until(monotonic_ns() + d.as_nanos() as u64)
}

/// Polls `done` every `step` until it returns Some, for at most `limit`.
pub fn poll<T>(
    limit: Duration,
    step: Duration,
    what: &str,
    mut done: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = monotonic_ns() + limit.as_nanos() as u64;
    loop {
        if let Some(v) = done()? {
            return Ok(v);
        }
        if monotonic_ns() >= deadline {
            bail!("{what}: not done after {limit:?}");
        }
        check()?;
        std::thread::sleep(step);
    }
}
