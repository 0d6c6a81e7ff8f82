//! The agent under test: `graceful daemon` started and stopped on demand
//! under a pin directory of the bench's own. Dropping the guard stops it and
//! runs `graceful uninstall`, so the programs never stay attached.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Stdio},
    sync::mpsc::{self, Receiver, RecvTimeoutError},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use graceful_test_support::{agent::Graceful, process};
use serde_json::Value;

/// How long the agent may take to become ready (adopting 200k sockets included).
const READY_TIMEOUT: Duration = Duration::from_secs(300);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Agent {
    graceful: Graceful,
    child: Option<Child>,
    /// `graceful daemon --repair-interval`, when set.
    repair_interval: Option<String>,
    /// Durations of the running agent's repair passes, in ms, as it logs them.
    repairs: Option<Receiver<f64>>,
    /// A cgroup (the bench's memory cgroup) to start the agent in.
    cgroup: Option<PathBuf>,
    /// Its own local API socket (and no TCP API): beside the pins' name in
    /// the temporary directory unless the caller gives one, so a bench
    /// never claims a node agent's socket or port.
    api_socket: Option<PathBuf>,
    /// The socket this guard chose, removed (with its lock) on drop.
    own_socket: Option<PathBuf>,
    /// More `graceful daemon` flags (`--counting tracepoint`).
    pub extra_args: Vec<String>,
}

/// What one start-up took.
#[derive(Debug, Clone, Default)]
pub struct Started {
    /// From spawn to the `ready` log line.
    pub ready_after: Duration,
    /// `elapsed_ms` of the "adopted pre-existing sockets" log line.
    pub adopt_ms: Option<u64>,
    /// Sockets offered to the adoption iterator (both passes).
    pub offered: Option<u64>,
    pub reused_maps: Option<bool>,
    pub reused_link: Option<bool>,
}

/// One row of `graceful cgroups -o json`, the fields the benches use.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub path: Option<String>,
    pub inbound_live: u64,
    pub outbound_live: u64,
    pub listeners: u64,
    pub inbound_total: u64,
    pub outbound_total: u64,
    pub inbound_closed_total: u64,
}

impl Agent {
    /// Prepares an agent under `pins`, first removing what an interrupted
    /// earlier run may have left there.
    pub fn new(bin: &Path, pins: &Path) -> anyhow::Result<Self> {
        let mut agent = Self {
            graceful: Graceful::new(bin, pins),
            child: None,
            repair_interval: None,
            repairs: None,
            cgroup: None,
            api_socket: None,
            own_socket: None,
            extra_args: Vec::new(),
        };
        let name = pins.file_name().unwrap_or_default().to_string_lossy();
        let own = std::env::temp_dir().join(format!("{name}.api.sock"));
        agent.api_socket = Some(own.clone());
        agent.own_socket = Some(own);
        if pins.exists() {
            eprintln!(
                "removing stale pins under {} (an earlier run was interrupted)",
                pins.display()
            );
            agent.uninstall()?;
        }
        Ok(agent)
    }

    /// Starts the agent in `cgroup`, from before its first allocation
    /// (see `memcg.rs`).
    pub fn in_cgroup(&mut self, cgroup: &Path) {
        self.cgroup = Some(cgroup.to_path_buf());
    }

    /// Serves the local API on `socket` only (`--api-addr off`), so the
    /// agent claims neither the node's socket nor a TCP port. Its lock
    /// file (`<socket>.lock`) is the caller's to remove with the directory.
    pub fn api_socket(&mut self, socket: &Path) {
        self.api_socket = Some(socket.to_path_buf());
    }

    /// `GET path` on the agent's own API socket (see [`Agent::api_socket`]):
    /// the body's lines.
    pub fn api_get(&self, path: &str) -> anyhow::Result<Vec<String>> {
        let sock = self
            .api_socket
            .as_ref()
            .context("the agent has no API socket of the bench's")?;
        let stream = std::os::unix::net::UnixStream::connect(sock)
            .with_context(|| format!("connect to {}", sock.display()))?;
        let mut r = graceful_api::client::get(stream, path, Some(Duration::from_secs(10)))
            .with_context(|| format!("GET {path}"))?;
        let mut lines = Vec::new();
        while let Some(l) = r.next_line().with_context(|| format!("read GET {path}"))? {
            lines.push(l);
        }
        Ok(lines)
    }

    /// Runs the agent's repair pass every `interval` (a duration such as
    /// `1s`), so that [`Agent::next_repair_ms`] can time it.
    pub fn repair_every(&mut self, interval: &str) {
        self.repair_interval = Some(interval.to_string());
    }

    /// The duration of the running agent's next repair pass, in ms (one
    /// already logged is skipped: it may have run before the caller's
    /// conditions were set up). None if none comes within `limit`.
    pub fn next_repair_ms(&self, limit: Duration) -> Option<f64> {
        let rx = self.repairs.as_ref()?;
        while rx.try_recv().is_ok() {}
        rx.recv_timeout(limit).ok()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts `graceful daemon` and waits for it to be ready: the `ready`
    /// log line, then `graceful cgroups` reading the pinned maps.
    pub fn start(&mut self) -> anyhow::Result<Started> {
        if self.child.is_some() {
            bail!("the agent is already running");
        }
        let t0 = Instant::now();
        let mut cmd = self.graceful.command(&["--log-format", "json", "daemon"]);
        cmd.env("RUST_LOG", "info");
        if let Some(every) = &self.repair_interval {
            // The pass logs its duration at debug level.
            cmd.args(["--repair-interval", every])
                .env("RUST_LOG", "info,graceful::kernel::adopt::repair=debug");
        }
        if let Some(sock) = &self.api_socket {
            cmd.env("GRACEFUL_API_SOCKET", sock).args(["--api-addr", "off"]);
        }
        cmd.args(&self.extra_args);
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = self.graceful.spawn_daemon(cmd, self.cgroup.as_deref())?;
        let lines = log_reader(child.stderr.take().expect("piped"));
        self.child = Some(child);
        let mut started = Started::default();
        let mut tail: Vec<String> = Vec::new();
        loop {
            super::check_interrupted()?;
            let line = match lines.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => {
                    if t0.elapsed() > READY_TIMEOUT {
                        bail!(
                            "the agent was not ready after {READY_TIMEOUT:?}; log:\n{}",
                            tail.join("\n")
                        );
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.as_mut().and_then(|c| c.wait().ok());
                    self.child = None;
                    bail!(
                        "the agent exited before it was ready ({status:?}); log:\n{}",
                        tail.join("\n")
                    );
                }
            };
            tail.push(line.clone());
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            match v["message"].as_str() {
                Some("programs attached") => {
                    started.reused_maps = v["reused_maps"].as_bool();
                    started.reused_link = v["reused_link"].as_bool();
                }
                Some("adopted pre-existing sockets") => {
                    started.adopt_ms = v["elapsed_ms"].as_u64();
                    started.offered = v["offered"].as_u64();
                }
                Some("ready") => break,
                _ => {}
            }
        }
        started.ready_after = t0.elapsed();
        // Later log lines are read, so the pipe never fills; repair
        // passes' durations are passed on, the rest dropped.
        let (tx, rx) = mpsc::channel();
        self.repairs = Some(rx);
        std::thread::spawn(move || {
            for line in lines {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let pass = v["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("repair pass") || m.starts_with("repaired the counts"));
                if let (true, Some(ms)) = (pass, v["elapsed_ms"].as_f64()) {
                    let _ = tx.send(ms);
                }
            }
        });
        self.cgroups()
            .context("the agent is ready but `graceful cgroups` fails")?;
        Ok(started)
    }

    /// SIGTERM, and SIGKILL if it does not stop in time. The programs stay
    /// attached (that is the agent's contract) until [`Agent::uninstall`].
    pub fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let status = process::terminate(&mut child, STOP_TIMEOUT)?;
        if !status.success() {
            eprintln!("warning: the agent exited with {status}");
        }
        Ok(())
    }

    /// SIGKILL, as a crash or the OOM killer would: nothing of the agent's
    /// own shutdown runs. The programs stay attached.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        child.kill().context("SIGKILL the agent")?;
        child.wait().context("reap the agent")?;
        Ok(())
    }

    /// `graceful uninstall`: detaches the programs and removes the pins.
    pub fn uninstall(&mut self) -> anyhow::Result<()> {
        self.graceful.uninstall()?;
        Ok(())
    }

    /// The link pins under the agent's pin directory.
    pub fn link_pins(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.graceful.pin_dir.join("links"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    }

    /// Whether the pinned link of the state program exists.
    pub fn link_pinned(&self) -> bool {
        std::fs::read_dir(self.graceful.pin_dir.join("links")).is_ok_and(|mut d| d.next().is_some())
    }

    /// `graceful cgroups -o json -a`.
    pub fn cgroups(&self) -> anyhow::Result<Vec<Row>> {
        let out = self.graceful.cgroups_json()?;
        let v: Value = serde_json::from_slice(&out).context("parse graceful cgroups -o json")?;
        let rows = v.as_array().context("graceful cgroups -o json: not an array")?;
        Ok(rows
            .iter()
            .map(|r| Row {
                path: r["path"].as_str().map(str::to_owned),
                inbound_live: r["inbound_live"].as_u64().unwrap_or(0),
                outbound_live: r["outbound_live"].as_u64().unwrap_or(0),
                listeners: r["listeners"].as_u64().unwrap_or(0),
                inbound_total: r["inbound_total"].as_u64().unwrap_or(0),
                outbound_total: r["outbound_total"].as_u64().unwrap_or(0),
                inbound_closed_total: r["inbound_closed_total"].as_u64().unwrap_or(0),
            })
            .collect())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("cleanup: {e:#}");
        }
        if self.graceful.pin_dir.exists() {
            if let Err(e) = self.uninstall() {
                eprintln!("cleanup: {e:#}");
            }
        }
        if let Some(sock) = &self.own_socket {
            let mut lock = sock.as_os_str().to_os_string();
            lock.push(".lock");
            let _ = std::fs::remove_file(sock);
            let _ = std::fs::remove_file(lock);
        }
    }
}

/// Forwards the agent's log lines through a channel; it disconnects when
/// the agent closes stderr (it exited).
fn log_reader(stderr: std::process::ChildStderr) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}
