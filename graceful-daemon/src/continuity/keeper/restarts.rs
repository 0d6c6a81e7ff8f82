//! When the keeper starts its agent again, and when it gives up.
//!
//! An agent that dies of a signal (SIGKILL from the OOM killer or
//! `kill -9`, SIGSEGV, SIGABRT) or of a panic is started again: at once
//! the first time, then after 1, 2, 4 and 8 s while it keeps dying within
//! [`STABLE`] of its start. A sixth such death in a row ends the keeper,
//! and with it the container: the kubelet's own back-off takes over and
//! the held hooks fail open, as they did before there was a keeper. An
//! agent that exits with a code of its own (a flag it refuses, a node it
//! cannot run on: it said why in one line) or after it was told to stop
//! ends the keeper with that code.

use std::time::Duration;

/// An agent that ran this long before it died starts again at once.
pub const STABLE: Duration = Duration::from_secs(30);
/// Deaths in a row, each within [`STABLE`] of its start, that the keeper
/// starts again.
pub const MAX_QUICK: u32 = 5;
/// The exit code of a Rust panic.
pub const PANIC: i32 = 101;

/// How the agent ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Death {
    /// Not of its own will: start it again.
    Crashed(String),
    /// It exited, or was told to: the keeper exits with this code.
    Ended(i32),
}

/// `code` or `signal` as the kernel reported them; `told` whether the
/// keeper had passed it a SIGTERM or SIGINT, or the agent handed over.
pub fn death(code: Option<i32>, signal: Option<i32>, told: bool) -> Death {
    match (code, signal) {
        (Some(c), _) if told || c != PANIC => Death::Ended(c),
        (Some(_), _) => Death::Crashed("panicked".into()),
        (None, Some(s)) if told => Death::Ended(128 + s),
        (None, Some(s)) => Death::Crashed(format!("was killed by {}", signal_name(s))),
        (None, None) => Death::Ended(1),
    }
}

fn signal_name(s: i32) -> String {
    match s {
        libc::SIGKILL => "SIGKILL (kill -9, or the OOM killer)".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGBUS => "SIGBUS".into(),
        libc::SIGTERM => "SIGTERM from another process".into(),
        s => format!("signal {s}"),
    }
}

/// What to do after a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Now,
    After(Duration),
    GiveUp,
}

/// The crashes in a row so far.
#[derive(Debug, Default)]
pub struct Restarts {
    quick: u32,
}

impl Restarts {
    /// The agent crashed after running `lived`.
    pub fn after(&mut self, lived: Duration) -> Next {
        if lived >= STABLE {
            self.quick = 0;
        }
        self.quick += 1;
        match self.quick {
            1 => Next::Now,
            n if n > MAX_QUICK => Next::GiveUp,
            n => Next::After(Duration::from_secs(1 << (n - 2))),
        }
    }

    /// Crashes in a row.
    pub fn count(&self) -> u32 {
        self.quick
    }
}

#[cfg(test)]
mod tests;
