//! The demo's background processes, and Ctrl-C.
//!
//! Children run in their own process group, so a Ctrl-C in the terminal
//! reaches only xtask, which then stops them in order and cleans up.

use std::{
    process::Child,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::bail;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// SIGINT, SIGTERM and SIGHUP set a flag that [`sleep`] turns into an error,
/// so the demo unwinds through its guard and removes what it made.
pub fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

pub fn check_interrupted() -> anyhow::Result<()> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}

/// Sleeps, but returns an error as soon as the user hits Ctrl-C.
pub fn sleep(d: Duration) -> anyhow::Result<()> {
    let end = Instant::now() + d;
    loop {
        check_interrupted()?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

/// A process the demo started: our child, or (for `--cleanup`) a pid from
/// the state file of an earlier `--keep` run.
pub struct Proc {
    pub name: &'static str,
    pub pid: i32,
    child: Option<Child>,
}

impl Proc {
    pub fn child(name: &'static str, child: Child) -> Self {
        Self {
            name,
            pid: child.id() as i32,
            child: Some(child),
        }
    }

    /// An earlier run's process, if `pid` still runs a command line
    /// containing `marker` (a pid may have been reused since).
    pub fn adopt(name: &'static str, pid: i32, marker: &str) -> Option<Self> {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        cmdline.contains(marker).then_some(Self {
            name,
            pid,
            child: None,
        })
    }

    /// `None` while running; the exit description once it has exited.
    pub fn exited(&mut self) -> Option<String> {
        match &mut self.child {
            Some(c) => match c.try_wait() {
                Ok(Some(st)) => Some(st.to_string()),
                Ok(None) => None,
                Err(e) => Some(e.to_string()),
            },
            // Not our child: gone, or a zombie waiting for its new parent.
            None => match std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
                Ok(stat) => {
                    let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
                    (state == Some('Z')).then(|| "exited".to_string())
                }
                Err(_) => Some("exited".to_string()),
            },
        }
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: plain kill(2) on a pid we started.
        unsafe { libc::kill(self.pid, sig) };
    }

    /// Sends `sig`, waits up to `grace` for the exit, then SIGKILLs.
    /// Returns a short description for the cleanup log.
    pub fn stop(&mut self, sig: libc::c_int, grace: Duration) -> String {
        if let Some(how) = self.exited() {
            return format!("had already exited ({how})");
        }
        let start = Instant::now();
        self.signal(sig);
        while start.elapsed() < grace {
            if self.exited().is_some() {
                let name = if sig == libc::SIGTERM { "SIGTERM" } else { "signal" };
                return format!("stopped by {name} in {} ms", start.elapsed().as_millis());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.signal(libc::SIGKILL);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) && self.exited().is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
        format!("did not stop within {} s: killed", grace.as_secs())
    }
}
