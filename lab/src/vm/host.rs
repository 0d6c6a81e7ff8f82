//! The same static test binary on this machine's own kernel.

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use super::{
    binaries::Binaries,
    console::{Console, Next},
    qemu::is_note,
};
use xtask::util::output;

pub struct Outcome {
    /// `uname -r`.
    pub release: String,
    /// `uname -v`.
    pub version: String,
    pub btf: bool,
    pub passed: bool,
    pub result: String,
    pub duration: Duration,
    pub notes: Vec<String>,
}

/// Runs the tests with libtest's defaults and the full churn count.
pub fn run(bins: &Binaries, test_args: &[String], timeout: Duration, log: &Path) -> anyhow::Result<Outcome> {
    let uname = |flag: &str| output(Command::new("uname").arg(flag)).map(|s| s.trim().to_string());
    let (release, version) = (uname("-r")?, uname("-v")?);
    let mut cmd = Command::new(&bins.tests);
    cmd.args(test_args)
        .env("GRACEFUL_BIN", &bins.graceful)
        .env("GRACEFUL_PEER_BIN", &bins.peer)
        .env("RUST_BACKTRACE", "1")
        .env_remove("GRACEFUL_CHURN_SCALE");
    println!(
        "==> host kernel {release}: the tests with GRACEFUL_BIN={}",
        bins.graceful.display()
    );
    let mut con = Console::spawn(&mut cmd, "[host]", log)?;
    let deadline = Instant::now() + timeout;
    let mut notes = Vec::new();
    let mut timed_out = false;
    loop {
        match con.next(deadline) {
            Next::Line(l) if is_note(&l) => notes.push(l),
            Next::Line(_) => {}
            Next::Closed => break,
            Next::TimedOut => {
                con.note(&format!(
                    "watchdog: not done after {}s, killing the tests",
                    timeout.as_secs()
                ));
                let _ = con.child.kill();
                timed_out = true;
                break;
            }
        }
    }
    let status = con.child.wait()?;
    let duration = con.elapsed();
    let passed = status.success() && !timed_out;
    let result = match (timed_out, passed) {
        (true, _) => "TIMEOUT",
        (false, true) => "passed",
        (false, false) => "FAILED",
    };
    con.note(&format!("verdict: {result} after {duration:.0?} ({status})"));
    Ok(Outcome {
        release,
        version,
        btf: Path::new("/sys/kernel/btf/vmlinux").exists(),
        passed,
        result: result.into(),
        duration,
        notes,
    })
}
