//! The drain the demo shows: the clients closed a few at a time while the
//! pod's INBOUND count falls.

use std::{
    io::{IsTerminal, Write},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};

use super::session::{Counts, Demo};
use super::{
    procs::{self},
    section, POLL,
};

impl Demo {
    pub(super) fn drain(&mut self, pod: &str, n: usize, batch: usize) -> anyhow::Result<()> {
        section(&format!(
            "4/4  drain: close the clients {batch} at a time, watch the pod's INBOUND count"
        ));
        println!("    (what a load balancer does once the pod is removed from its endpoints;");
        println!("    graceful is built around this count: a pod's SIGTERM can wait for it to reach 0");
        println!("    instead of a fixed `preStop: sleep 15`)");
        println!(
            "    polling `graceful cgroups -o json --path <pod>` every {} ms\n",
            POLL.as_millis()
        );
        let tty = std::io::stdout().is_terminal();
        let start = Instant::now();
        let mut shown: Option<(usize, i64)> = None;
        let mut open = n;
        // On a terminal, one line per step, updated in place at each poll;
        // in a log, one line per change.
        let mut show = |open: usize, c: &Counts| {
            let line = format!(
                "    {:>5.1} s   clients open {open:>3}/{n}   pod INBOUND {:>3}  {}",
                start.elapsed().as_secs_f64(),
                c.inbound,
                "█".repeat(c.inbound.clamp(0, 60) as usize)
            );
            if tty {
                if shown.is_some_and(|(o, _)| o != open) {
                    println!();
                }
                print!("\r\x1b[K{line}");
                let _ = std::io::stdout().flush();
            } else if shown != Some((open, c.inbound)) {
                println!("{line}");
            }
            shown = Some((open, c.inbound));
        };
        let first = self.counts(pod)?;
        show(open, &first);
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
                show(open, &c);
                if open == 0 && c.inbound == 0 {
                    let (closed_at, at_ns) = last_close.context("no close")?;
                    let seen = closed_at.elapsed();
                    println!("{}", if tty { "\n" } else { "" });
                    println!(
                        "    The last client closed at {:.1} s; the pod's INBOUND count was 0 at the first poll after it, {} ms later.",
                        (closed_at - start).as_secs_f64(),
                        seen.as_millis()
                    );
                    if c.last_inbound_close_ns >= at_ns {
                        println!(
                            "    The kernel stamped the server's last close {:.2} ms after the client's (last_inbound_close_ns).",
                            (c.last_inbound_close_ns - at_ns) as f64 / 1e6
                        );
                    }
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
}
