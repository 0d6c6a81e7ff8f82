//! The client's side of the churn, inside a worker: each connection as
//! its [`plan`] says, the peer killed each round (see `peer.rs`), and the
//! connections held open to the end, each counted once it is established,
//! by the cgroup it went to.

use std::{
    io::{BufRead as _, BufReader},
    net::{SocketAddr, SocketAddrV4},
    process::{Command, Stdio},
};

use anyhow::{bail, Context as _};

use super::{
    conn::{abort, connect, drain, tell},
    ending::{plan, Ending, HOLD, KILLED},
    tally::parse_csv,
    worker::Client,
};

/// What one `churn` command did.
#[derive(Debug, Default)]
pub(super) struct Done {
    /// connect() calls that failed (nothing established: not counted).
    pub(super) errors: u64,
    /// Established connections by ending, in [`Ending::ALL`]'s order.
    pub(super) endings: Vec<u64>,
    /// Established connections by target worker.
    pub(super) targets: Vec<u64>,
}

impl Client {
    /// Connections `start..start + count` of this worker's plan; `queues`
    /// are the workers' queue listeners of this round, by index.
    pub(super) fn churn(&mut self, start: u64, count: u64, queues: &[SocketAddrV4]) -> Done {
        let mut done = Done {
            errors: 0,
            endings: vec![0; Ending::ALL.len()],
            targets: vec![0; self.workers],
        };
        for n in start..start + count {
            let p = plan(self.seed, self.index, self.workers, n);
            let dst = match (p.ending.queued(), p.ipv6) {
                (true, _) => SocketAddr::V4(queues[p.target]),
                (false, true) => self.v6[p.target],
                (false, false) => SocketAddr::V4(self.v4[p.target]),
            };
            let Ok(mut s) = connect(self.src, dst) else {
                done.errors += 1;
                continue;
            };
            done.endings[p.ending.index()] += 1;
            done.targets[p.target] += 1;
            if let Some(b) = p.ending.byte() {
                tell(&mut s, b);
            }
            match p.ending {
                Ending::ClientFin | Ending::QueuedClientCloses => drop(s),
                Ending::ServerFin | Ending::ServerRst => drain(&mut s),
                Ending::ClientRst => abort(s),
                Ending::QueuedListenerCloses => self.queued.push(s),
            }
        }
        done
    }

    /// `count` connections to the others (round robin, one in three over
    /// ::1), kept open by both sides to the end of the soak.
    pub(super) fn hold(&mut self, count: u64) -> anyhow::Result<Vec<u64>> {
        let mut targets = vec![0; self.workers];
        for n in 0..count as usize {
            let t = (self.index + 1 + n % (self.workers - 1)) % self.workers;
            let dst = if n % 3 == 2 {
                self.v6[t]
            } else {
                SocketAddr::V4(self.v4[t])
            };
            let mut s = connect(self.src, dst)?;
            tell(&mut s, HOLD);
            targets[t] += 1;
            self.kept.push(s);
        }
        Ok(targets)
    }

    /// Starts a peer in this worker's cgroup with `count` connections each
    /// way, kills it while it holds them, and adds what was established to
    /// `targets` (by target worker) and failures to `errors`.
    pub(super) fn kill_peer(&self, count: u64, targets: &mut [u64], errors: &mut u64) -> anyhow::Result<()> {
        if count == 0 {
            return Ok(());
        }
        let all: Vec<String> = self.v4.iter().map(ToString::to_string).collect();
        let mut child = Command::new("/proc/self/exe")
            .args([
                "__soak-peer",
                "--index",
                &self.index.to_string(),
                "--targets",
                &all.join(","),
            ])
            .args(["--count", &count.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("start a peer")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let ["ready", addr, counts] = words.as_slice() else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the peer said {line:?}");
        };
        for (t, n) in targets.iter_mut().zip(parse_csv(counts)?) {
            *t += n;
        }
        let addr: SocketAddr = addr.parse()?;
        let mut ours = Vec::new();
        for _ in 0..count {
            match connect(self.src, addr) {
                Ok(mut s) => {
                    tell(&mut s, KILLED);
                    targets[self.index] += 1;
                    ours.push(s);
                }
                Err(_) => *errors += 1,
            }
        }
        child.kill().context("SIGKILL the peer")?;
        child.wait()?;
        for mut s in ours {
            drain(&mut s);
        }
        Ok(())
    }
}
