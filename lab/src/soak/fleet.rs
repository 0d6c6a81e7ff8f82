//! The coordinator's side of the workers: one per cgroup, started inside
//! it, driven a line at a time, all at once (each command is sent to every
//! worker before any answer is read). Dropping the fleet ends them, and
//! whatever a worker left running in its cgroup (a peer about to be killed).

use std::{path::PathBuf, process::Command};

use anyhow::{bail, Context as _};
use graceful_test_support::{cgroup, process::LineChild};

use super::tally::{parse_csv, Truth};

pub struct Fleet {
    workers: Vec<LineChild>,
    dirs: Vec<PathBuf>,
}

/// What a round's `churn` did, summed over the workers.
#[derive(Debug, Default, Clone)]
pub struct Round {
    pub errors: u64,
    /// Established, by ending (in `Ending::ALL`'s order).
    pub endings: Vec<u64>,
}

impl Fleet {
    /// One worker in each of `dirs`, told where the others listen.
    pub fn start(dirs: &[PathBuf], seed: u64) -> anyhow::Result<Fleet> {
        let mut fleet = Fleet {
            workers: Vec::new(),
            dirs: dirs.to_vec(),
        };
        for (i, dir) in dirs.iter().enumerate() {
            // This very binary, even if a rebuild has replaced it on disk since.
            let mut cmd = Command::new("/proc/self/exe");
            cmd.args(["__soak-worker", "--index", &i.to_string()]).args([
                "--workers",
                &dirs.len().to_string(),
                "--seed",
                &seed.to_string(),
            ]);
            cgroup::start_in(&mut cmd, dir)?;
            let child =
                LineChild::spawn(&mut cmd).with_context(|| format!("start a worker in {}", dir.display()))?;
            fleet.workers.push(child);
        }
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for w in &mut fleet.workers {
            let line = w.read_line()?;
            let words: Vec<&str> = line.split_whitespace().collect();
            let ["ready", a4, a6] = words.as_slice() else {
                bail!("worker {} said {line:?}", w.id());
            };
            v4.push(a4.to_string());
            v6.push(a6.to_string());
        }
        fleet.all(|_| format!("peers {} {}", v4.join(","), v6.join(",")), "ok")?;
        Ok(fleet)
    }

    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// Sends `line(i)` to every worker i, then reads every answer, each
    /// of which must start with `want`; returns the rest of each.
    fn all(&mut self, line: impl Fn(usize) -> String, want: &str) -> anyhow::Result<Vec<String>> {
        for (i, w) in self.workers.iter_mut().enumerate() {
            w.send(&line(i))?;
        }
        self.answers(want)
    }

    fn answers(&mut self, want: &str) -> anyhow::Result<Vec<String>> {
        let mut out = Vec::new();
        for (i, w) in self.workers.iter_mut().enumerate() {
            let a = w.read_line().with_context(|| format!("worker {i}"))?;
            let Some(rest) = a.strip_prefix(want) else {
                bail!("worker {i} answered {a:?}, not {want}");
            };
            out.push(rest.trim().to_string());
        }
        Ok(out)
    }

    /// One round: every worker opens a queue listener, makes its `counts[i]`
    /// connections from `start` of its plan and kills `victims` peers'
    /// worth, running `during` while they do; then the queue listeners
    /// close and the connections left in them are released. Adds what was
    /// established to `truth`.
    pub fn round(
        &mut self,
        start: u64,
        count: u64,
        victims: u64,
        truth: &mut Truth,
        during: impl FnOnce() -> anyhow::Result<()>,
    ) -> anyhow::Result<Round> {
        let queues = self.all(|_| "open".into(), "queue ")?.join(",");
        for w in &mut self.workers {
            w.send(&format!("churn {start} {count} {victims} {queues}"))?;
        }
        let during = during();
        let done = self.answers("done ")?;
        during?;
        let mut round = Round::default();
        for (i, d) in done.iter().enumerate() {
            let words: Vec<&str> = d.split_whitespace().collect();
            let [errors, endings, targets] = words.as_slice() else {
                bail!("worker {i}: bad answer {d:?}");
            };
            round.errors += errors.parse::<u64>()?;
            let endings = parse_csv(endings)?;
            round.endings.resize(endings.len(), 0);
            for (s, n) in round.endings.iter_mut().zip(endings) {
                *s += n;
            }
            truth.add(i, &parse_csv(targets)?);
        }
        self.all(|_| "close".into(), "closed")?;
        self.all(|_| "release".into(), "released")?;
        Ok(round)
    }

    /// `count` connections from every worker, held open to the end.
    pub fn hold(&mut self, count: u64, truth: &mut Truth) -> anyhow::Result<()> {
        for (i, t) in self.all(|_| format!("hold {count}"), "held ")?.iter().enumerate() {
            truth.hold(i, &parse_csv(t)?);
        }
        Ok(())
    }

    /// Every worker's pid (each worker's cgroup may hold a peer too).
    pub fn pids(&self) -> Vec<u32> {
        self.workers.iter().map(LineChild::id).collect()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = w.child_mut().kill();
            let _ = w.child_mut().wait();
        }
        // A peer a worker had not killed yet, if the soak stopped mid-round.
        for dir in &self.dirs {
            cgroup::kill_all(dir);
        }
    }
}
