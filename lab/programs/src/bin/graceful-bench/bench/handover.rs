//! `cargo xtask bench handover`: successive agents take the node over
//! from each other (the DaemonSet's surge, a restart beside the old
//! process) while a thousand drains are held. Per swap: the gate's pause
//! as a client meets it (a probe that opens a connection and asks
//! `GET /v1/self` back to back throughout: its slowest answer during the
//! swap), the pause as the successor logs it (from the giver's freeze to
//! serving the hooks), hooks cut (a held connection that saw its end or
//! an error: must be 0), and both agents' peak RSS.
//!
//! With `--crash`, the agent runs under its keeper instead and each round
//! is a `kill -9` of the agent: the keeper starts another, which serves
//! the hooks it kept. The pause is then the node's time without an agent,
//! and the RSS figures are the keeper's and the new agent's. Rounds come
//! 31 s apart: the keeper backs off an agent that crashes within 30 s of
//! its start, and that back-off is not what is measured.
//!
//! The drains are held by one process ([`hold`], `graceful-bench
//! hold-drains`) that enters each simulated container's cgroup in turn,
//! asks the gate for a drain there (min = max = 10 minutes: held until the
//! bench ends), and moves on once it is accepted: the gate knows its
//! caller by the cgroup it was in when it connected.

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use super::stats::summary;
use graceful_tests::{agent::Agent, pod::SimPod};

/// Containers per simulated pod: a pod's connections stay within the
/// gate's share (32).
const PER_POD: usize = 25;

pub struct Config {
    pub swaps: usize,
    pub drains: usize,
    /// Crashes under a keeper instead of handovers.
    pub crash: bool,
}

fn vm_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn cmdline(pid: u32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()).into_owned()
}

/// The probe: a new connection and `GET /v1/self` back to back; the
/// latencies of those answered within the window it is asked for.
struct Probe {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<(Instant, f64)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Probe {
    fn start(gate: PathBuf) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (s2, samples2) = (stop.clone(), samples.clone());
        let thread = std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                let t = Instant::now();
                let ok = (|| {
                    let mut c = UnixStream::connect(&gate).ok()?;
                    c.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
                    c.write_all(b"GET /v1/self HTTP/1.1\r\nhost: gate\r\nconnection: close\r\n\r\n")
                        .ok()?;
                    let mut buf = [0u8; 64];
                    let n = c.read(&mut buf).ok()?;
                    (n > 0).then_some(())
                })();
                if ok.is_some() {
                    samples2
                        .lock()
                        .unwrap()
                        .push((t, t.elapsed().as_secs_f64() * 1e3));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Probe {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    /// The slowest answer to a request made within `[from, to]`.
    fn slowest(&self, from: Instant, to: Instant) -> f64 {
        self.samples
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| *t >= from && *t <= to)
            .map(|(_, ms)| *ms)
            .fold(0.0, f64::max)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The holder process, driven a line at a time.
struct Holder {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Holder {
    fn start(gate: &Path, cgroups: &[PathBuf]) -> anyhow::Result<Holder> {
        let list = std::env::temp_dir().join(graceful_tests::unique("holder-cgroups"));
        std::fs::write(
            &list,
            cgroups
                .iter()
                .map(|c| format!("{}\n", c.display()))
                .collect::<String>(),
        )?;
        let mut child = Command::new(std::env::current_exe()?)
            .arg("hold-drains")
            .arg("--socket")
            .arg(gate)
            .arg("--cgroups")
            .arg(&list)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let out = BufReader::new(child.stdout.take().expect("piped"));
        let mut h = Holder { child, out };
        let line = h.line()?;
        let _ = std::fs::remove_file(&list);
        anyhow::ensure!(line.starts_with("held "), "the holder: {line}");
        Ok(h)
    }

    fn line(&mut self) -> anyhow::Result<String> {
        let mut l = String::new();
        self.out.read_line(&mut l)?;
        anyhow::ensure!(!l.is_empty(), "the holder ended");
        Ok(l.trim().to_string())
    }

    /// How many held connections have seen their end or an error.
    fn cut(&mut self) -> anyhow::Result<usize> {
        writeln!(self.child.stdin.as_mut().expect("piped"), "check")?;
        let l = self.line()?;
        Ok(l.strip_prefix("cut ").unwrap_or(&l).parse()?)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

pub fn run(c: &Config) -> anyhow::Result<()> {
    let pods: Vec<SimPod> = (0..c.drains.div_ceil(PER_POD))
        .map(|_| SimPod::create(PER_POD))
        .collect();
    let cgroups: Vec<PathBuf> = pods
        .iter()
        .flat_map(|p| p.containers.iter().map(|(_, cg)| cg.dir().to_path_buf()))
        .take(c.drains)
        .collect();
    let mut current = if c.crash {
        Agent::with_gate().kept()
    } else {
        Agent::with_gate()
    };
    current.start();
    let gate = current.gate_sock();
    let t = Instant::now();
    let mut holder = Holder::start(&gate, &cgroups)?;
    println!(
        "{} drains held through the gate in {:.1} s ({} simulated pods)",
        cgroups.len(),
        t.elapsed().as_secs_f64(),
        pods.len()
    );
    let probe = Probe::start(gate.clone());
    std::thread::sleep(Duration::from_millis(200));
    let (mut client_ms, mut logged_ms, mut old_rss, mut new_rss) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut cut = 0;
    let what = if c.crash { "crash" } else { "swap" };
    // The keeper backs off an agent that crashes soon after its start:
    // each crash comes once the agent has run that long.
    let mut agent_since = Instant::now();
    for round in 0..c.swaps {
        if c.crash {
            let stable = graceful::continuity::keeper::restarts::STABLE + Duration::from_secs(1);
            std::thread::sleep(stable.saturating_sub(agent_since.elapsed()));
        }
        let from = Instant::now();
        let (old, new, log) = if c.crash {
            let r = crash(&current);
            agent_since = Instant::now();
            r
        } else {
            let (next, old) = swap(&current);
            let new = vm_kib(next.pid().expect("running"), "VmHWM:") as f64 / 1024.0;
            let log = next.log_text();
            current.handed_over();
            drop(std::mem::replace(&mut current, next));
            (old, new, log)
        };
        std::thread::sleep(Duration::from_millis(100));
        let to = Instant::now();
        old_rss.push(old);
        new_rss.push(new);
        client_ms.push(probe.slowest(from, to));
        let held = log
            .lines()
            .rev()
            .find(|l| l.contains("serving the hooks the previous agent held"))
            .unwrap_or_default()
            .to_string();
        let field = |k: &str| -> Option<f64> {
            held.split(&format!("{k}="))
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        };
        logged_ms.push(field("since_pause_ms").unwrap_or(f64::NAN));
        let hooks = field("exec_hooks").unwrap_or(0.0) as usize;
        cut = holder.cut()?;
        println!(
            "{what} {:>2}: {hooks} hooks served on, client pause {:.1} ms, logged {:.1} ms, cut so far {cut}",
            round + 1,
            client_ms[round],
            logged_ms[round]
        );
    }
    drop(probe);
    println!();
    summary("gate pause, client (ms)", client_ms);
    summary("gate pause, logged (ms)", logged_ms);
    let names = if c.crash {
        [("keeper", &old_rss), ("agent", &new_rss)]
    } else {
        [("giver", &old_rss), ("taker", &new_rss)]
    };
    for (what, mib) in names {
        let max = mib.iter().copied().fold(0.0, f64::max);
        let mean = mib.iter().sum::<f64>() / mib.len().max(1) as f64;
        println!("{what} peak RSS               mean={mean:>6.1} MiB  max={max:>6.1} MiB");
    }
    let whats = if c.crash { "crashes" } else { "swaps" };
    println!("hooks cut over {} {whats}: {cut} of {}", c.swaps, cgroups.len());
    drop(holder);
    drop(current);
    drop(pods);
    anyhow::ensure!(cut == 0, "{cut} held hooks were cut");
    Ok(())
}

/// One handover to a successor: the successor, and the giver's peak RSS
/// (sampled until it retires: the exec resets it).
fn swap(current: &Agent) -> (Agent, f64) {
    let old_pid = current.pid().expect("running");
    let mut next = current.successor();
    let sampling = Arc::new(AtomicBool::new(true));
    let peak = {
        let s = sampling.clone();
        std::thread::spawn(move || {
            let mut peak = vm_kib(old_pid, "VmRSS:");
            while s.load(Ordering::Relaxed) && !cmdline(old_pid).contains("__retired") {
                peak = peak.max(vm_kib(old_pid, "VmRSS:"));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    next.start();
    graceful_tests::wait_for(30, "the old agent to retire", || {
        cmdline(old_pid).contains("__retired").then_some(())
    });
    sampling.store(false, Ordering::Relaxed);
    (next, peak.join().unwrap_or(0) as f64 / 1024.0)
}

/// One `kill -9` of the agent under its keeper, until the next is ready:
/// the keeper's and the new agent's peak RSS (MiB), and the log.
fn crash(current: &Agent) -> (f64, f64, String) {
    let agent = current.crash();
    let keeper = vm_kib(current.pid().expect("running"), "VmHWM:") as f64 / 1024.0;
    let new = vm_kib(agent, "VmHWM:") as f64 / 1024.0;
    (keeper, new, current.log_text())
}

/// `graceful-bench hold-drains`: asks the gate at `socket` for a drain
/// from each cgroup listed in `cgroups` (entering each in turn), prints
/// `held N`, then answers `check` on stdin with `cut N` until stdin ends.
pub fn hold(socket: &Path, cgroups: &Path) -> anyhow::Result<()> {
    // The cgroup v2 line (a hybrid host lists the v1 hierarchies too).
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")?;
    let home = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| anyhow::anyhow!("no cgroup v2 line in /proc/self/cgroup"))?
        .to_string();
    let root = graceful_tests::cgroup::mount();
    let enter = |dir: &Path| std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string());
    let mut held = Vec::new();
    for dir in std::fs::read_to_string(cgroups)?.lines().map(PathBuf::from) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis();
        let body =
            format!(r#"{{"policy":"drained","min_ms":600000,"max_ms":600000,"started_unix_ms":{now_ms}}}"#);
        enter(&dir)?;
        let mut c = UnixStream::connect(socket)?;
        write!(
            c,
            "POST /v1/drain HTTP/1.1\r\nhost: gate\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )?;
        // The head, then the accepted line: the drain is the gate's now.
        c.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&got).contains("\"accepted\"") {
            let n = c.read(&mut buf)?;
            anyhow::ensure!(
                n > 0,
                "the gate closed a drain of {}: {}",
                dir.display(),
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
        anyhow::ensure!(
            got.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&got)
        );
        c.set_nonblocking(true)?;
        held.push((c, false));
    }
    enter(&root.join(home.trim_start_matches('/')))?;
    println!("held {}", held.len());
    for line in std::io::stdin().lock().lines() {
        if line? != "check" {
            continue;
        }
        for (c, cut) in held.iter_mut().filter(|(_, cut)| !*cut) {
            let mut buf = [0u8; 4096];
            loop {
                match c.read(&mut buf) {
                    Ok(0) => break *cut = true,
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(_) => break *cut = true,
                }
            }
        }
        println!("cut {}", held.iter().filter(|(_, cut)| *cut).count());
    }
    Ok(())
}
