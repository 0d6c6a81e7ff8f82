//! The drain the demo shows: the pod's preStop hook held by the agent while
//! its clients close a few at a time and its INBOUND count falls, then
//! released just after the last close, with the hook's report.

use std::{
    io::{IsTerminal, Write},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};

use super::hook::Hook;
use super::session::{Counts, Demo};
use super::{
    procs::{self},
    section, POLL,
};

impl Demo {
    pub(super) fn drain(&mut self, pod: &str, container: &str, n: usize, batch: usize) -> anyhow::Result<()> {
        section(&format!(
            "4/4  the pod is deleted: its preStop hook waits while the clients close {batch} at a time"
        ));
        println!("    (the kubelet runs the hook, and sends SIGTERM when it returns: instead of a fixed");
        println!("    `preStop: sleep 15`, graceful returns it when the pod's INBOUND count has drained;");
        println!("    the clients close as a load balancer's do once the pod leaves its endpoints)");
        let dir = self.mount.join(container.trim_start_matches('/'));
        let mut hook = Hook::start(&dir, |c| self.shown(c))?;
        println!(
            "    polling `graceful cgroups -o json --path <pod>` every {} ms\n",
            POLL.as_millis()
        );
        let tty = std::io::stdout().is_terminal();
        let start = Instant::now();
        let mut shown: Option<(usize, i64, bool)> = None;
        let mut open = n;
        // On a terminal, one line per step, updated in place at each poll;
        // in a log, one line per change.
        let mut show = |open: usize, c: &Counts, held: bool| {
            let line = format!(
                "    {:>5.1} s   clients open {open:>3}/{n}   pod INBOUND {:>3}   hook {}  {}",
                start.elapsed().as_secs_f64(),
                c.inbound,
                if held { "held    " } else { "returned" },
                "█".repeat(c.inbound.clamp(0, 60) as usize)
            );
            if tty {
                if shown.is_some_and(|(o, _, _)| o != open) {
                    println!();
                }
                print!("\r\x1b[K{line}");
                let _ = std::io::stdout().flush();
            } else if shown != Some((open, c.inbound, held)) {
                println!("{line}");
            }
            shown = Some((open, c.inbound, held));
        };
        // The agent lists the hook's drain once it holds it.
        let t0 = Instant::now();
        while !self.draining()? {
            if t0.elapsed() > Duration::from_secs(10) || !hook.held()? {
                bail!("the agent did not take the hook's drain within 10 s");
            }
            procs::sleep(Duration::from_millis(20))?;
        }
        println!("    `graceful drains` lists it: the agent holds the hook");
        if !hook.held()? {
            bail!(
                "the hook returned while {n} clients were connected: {}",
                hook.report()?
            );
        }
        let first = self.counts(pod)?;
        show(open, &first, true);
        procs::sleep(Duration::from_secs(1))?;

        let mut last_close = None;
        while open > 0 {
            let client = self.client.as_mut().context("no client")?;
            let (left, at_ns) = client.close(batch.min(open))?;
            let closed_at = Instant::now();
            open = left;
            if open == 0 {
                last_close = Some((closed_at, at_ns));
            }
            loop {
                let c = self.counts(pod)?;
                let held = hook.held()?;
                show(open, &c, held);
                if open > 0 && !held {
                    println!("{}", if tty { "\n" } else { "" });
                    bail!(
                        "the hook returned while {open} clients were connected: {}",
                        hook.report()?
                    );
                }
                if open == 0 && c.inbound == 0 {
                    let (closed_at, at_ns) = last_close.context("no close")?;
                    let report = hook.report()?;
                    show(open, &c, false);
                    println!("{}", if tty { "\n" } else { "" });
                    let returned = hook
                        .exited_at
                        .context("hook exit")?
                        .saturating_duration_since(closed_at);
                    println!(
                        "    The last client closed at {:.1} s; the hook returned {} ms later (its settle is 200 ms):",
                        (closed_at - start).as_secs_f64(),
                        returned.as_millis()
                    );
                    println!("    the kubelet would send SIGTERM now, with nothing left to cut off.");
                    if c.last_inbound_close_ns >= at_ns {
                        println!(
                            "    The kernel stamped the server's last close {:.2} ms after the client's (last_inbound_close_ns).",
                            (c.last_inbound_close_ns - at_ns) as f64 / 1e6
                        );
                    }
                    println!(
                        "    The hook's report: released {} after {} ms, {} ms after the last inbound close; {} inbound at start, peak {}.",
                        report["reason"].as_str().unwrap_or("?"),
                        report["waited_ms"],
                        report["after_last_close_ms"],
                        report["inbound_at_start"],
                        report["peak_inbound"]
                    );
                    println!("    {report}");
                    return Ok(());
                }
                if open > 0 && closed_at.elapsed() >= Duration::from_secs(1) {
                    break;
                }
                if open == 0 && closed_at.elapsed() > Duration::from_secs(10) {
                    println!("{}", if tty { "\n" } else { "" });
                    bail!(
                        "the pod's INBOUND count is still {} 10 s after the last client closed",
                        c.inbound
                    );
                }
                self.check_alive()?;
                procs::sleep(POLL)?;
            }
        }
        Ok(())
    }

    /// Whether the agent lists a drain in progress.
    fn draining(&self) -> anyhow::Result<bool> {
        let json = xtask::util::output(self.graceful().args(["drains", "-o", "json"]))?;
        let v: serde_json::Value =
            serde_json::from_str(&json).context("cannot parse `graceful drains -o json`")?;
        Ok(v["active"].as_array().is_some_and(|a| !a.is_empty()))
    }
}
