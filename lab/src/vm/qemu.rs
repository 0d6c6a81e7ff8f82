//! One guest under qemu (TCG): its serial console streamed to the terminal
//! and a log file, a watchdog, and the verdict read from the sentinel line.

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use super::console::{Console, Next};

pub struct Guest<'a> {
    /// qemu's `-accel`, e.g. `tcg,thread=single`.
    pub accel: &'a str,
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    pub memory: &'a str,
    pub smp: u32,
    pub timeout: Duration,
    pub log: &'a Path,
    /// Prefix of the streamed lines.
    pub label: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `init: success`: the tests passed.
    Success,
    /// `init: failure`: the tests (or the guest's setup) failed.
    Failure,
    /// The watchdog saw a kernel panic and killed the guest.
    Panic(String),
    /// The watchdog saw a soft lockup and killed the guest.
    SoftLockup(String),
    /// No verdict within the time limit: the watchdog killed the guest.
    Timeout,
    /// qemu exited without a verdict line.
    Silent(String),
}

impl Verdict {
    pub fn passed(&self) -> bool {
        *self == Verdict::Success
    }

    pub fn describe(&self) -> String {
        match self {
            Verdict::Success => "passed".into(),
            Verdict::Failure => "FAILED".into(),
            Verdict::Panic(_) => "KERNEL PANIC".into(),
            Verdict::SoftLockup(_) => "SOFT LOCKUP".into(),
            Verdict::Timeout => "TIMEOUT".into(),
            Verdict::Silent(_) => "NO VERDICT".into(),
        }
    }
}

#[derive(Debug)]
pub struct Outcome {
    pub verdict: Verdict,
    /// From starting qemu to the verdict (or the kill).
    pub duration: Duration,
    /// From starting qemu to `/init` starting the tests.
    pub boot: Option<Duration>,
    /// `init: kernel …`: the release and version the guest reports.
    pub uname: Option<String>,
    /// `init: btf …`.
    pub btf: Option<String>,
    /// Lines worth repeating in the summary (see [`is_note`]).
    pub notes: Vec<String>,
}

/// Lines the summary repeats: skipped tests, libtest's result, failures,
/// kernel warnings.
pub fn is_note(line: &str) -> bool {
    line.contains("SKIPPED")
        || line.starts_with("test result:")
        || line.contains("panicked at")
        || line.contains("BUG:")
        || line.contains("Oops")
        || line.contains("WARNING: CPU")
}

/// What a console line decides, if anything. The sentinel may share its
/// line with the tail of a kernel message, so it is matched at the end.
fn verdict_of(line: &str) -> Option<Verdict> {
    if line.ends_with("init: success") {
        Some(Verdict::Success)
    } else if line.ends_with("init: failure") {
        Some(Verdict::Failure)
    } else if line.contains("Kernel panic") {
        Some(Verdict::Panic(line.to_string()))
    } else if line.contains("soft lockup") {
        Some(Verdict::SoftLockup(line.to_string()))
    } else {
        None
    }
}

pub fn run(g: &Guest) -> anyhow::Result<Outcome> {
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-accel", g.accel, "-m", g.memory, "-smp", &g.smp.to_string()])
        .arg("-kernel")
        .arg(g.kernel)
        .arg("-initrd")
        .arg(g.initrd)
        .args([
            "-append",
            "console=ttyS0 panic=-1 quiet",
            "-nographic",
            "-no-reboot",
        ]);
    let mut con = Console::spawn(&mut cmd, g.label, g.log)
        .map_err(|e| e.context("install qemu-system-x86 (`cargo xtask setup` does)"))?;
    let deadline = con.start + g.timeout;
    let mut out = Outcome {
        verdict: Verdict::Timeout,
        duration: Duration::ZERO,
        boot: None,
        uname: None,
        btf: None,
        notes: Vec::new(),
    };
    let mut verdict = None;
    // With one test at a time, libtest names each test as it starts: the
    // one a watchdog kill interrupted.
    let mut last_test = None;
    loop {
        // After the verdict the guest powers off: a little time for that.
        let limit = match verdict {
            Some(_) => Instant::now() + Duration::from_secs(30),
            None => deadline,
        };
        let line = match con.next(limit) {
            Next::Line(l) => l,
            Next::Closed => break,
            Next::TimedOut => {
                if verdict.is_none() {
                    con.note(&format!(
                        "watchdog: no verdict after {}s, killing the guest",
                        g.timeout.as_secs()
                    ));
                    out.duration = con.elapsed();
                    verdict = Some(Verdict::Timeout);
                }
                break;
            }
        };
        if verdict.is_some() {
            continue;
        }
        let t = line.trim_end();
        // init's lines may follow the firmware's last words on one line.
        let after = |marker: &str| t.find(marker).map(|i| t[i + marker.len()..].to_string());
        if let Some(rest) = after("init: kernel ") {
            out.uname = Some(rest);
        } else if let Some(rest) = after("init: btf ") {
            out.btf = Some(rest);
        } else if after("init: running ").is_some() {
            out.boot = Some(con.elapsed());
        } else if is_note(t) {
            out.notes.push(t.to_string());
        }
        if t.starts_with("test ") {
            last_test = Some(t.to_string());
        }
        if let Some(v) = verdict_of(t) {
            out.duration = con.elapsed();
            let fatal = matches!(v, Verdict::Panic(_) | Verdict::SoftLockup(_));
            if fatal {
                con.note(&format!(
                    "watchdog: {}, killing the guest",
                    v.describe().to_lowercase()
                ));
            }
            verdict = Some(v);
            if fatal {
                break;
            }
        }
    }
    // Our own qemu: gone already after a power-off, killed otherwise.
    let status = match con.child.try_wait()? {
        Some(s) => s,
        None => {
            let _ = con.child.kill();
            con.child.wait()?
        }
    };
    // What was still in the pipes, such as the unfinished `test NAME ... `
    // line of the test that was running.
    while let Next::Line(l) = con.next(Instant::now() + Duration::from_secs(2)) {
        if l.starts_with("test ") {
            last_test = Some(l);
        }
    }
    if !matches!(verdict, Some(Verdict::Success | Verdict::Failure)) {
        if let Some(t) = last_test {
            out.notes.push(format!("the last test started: {t}"));
        }
    }
    out.verdict = verdict.unwrap_or_else(|| {
        out.duration = con.elapsed();
        Verdict::Silent(format!("qemu exited ({status}) without printing a verdict"))
    });
    con.note(&format!(
        "verdict: {} after {:.0?}",
        out.verdict.describe(),
        out.duration
    ));
    Ok(out)
}

#[cfg(test)]
mod tests;
