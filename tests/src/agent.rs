//! The real agent (`graceful daemon`), in a pin directory of its own so
//! tests never touch a node's agent, or each other's. Dropping it stops the
//! daemon and runs `graceful uninstall`.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
};

use graceful_common::CgroupCounters;
use graceful_test_support::{agent::Graceful, process};

/// How long an agent may take to start. Under qemu's TCG the kernel
/// verifies and attaches five programs at a fraction of native speed: a
/// start took over 30 s there.
pub fn start_limit_secs() -> u64 {
    if std::env::var_os("GRACEFUL_VM").is_some() {
        120
    } else {
        30
    }
}

/// The `graceful` binary: `GRACEFUL_BIN`, or target/<profile>/graceful
/// (see [`crate::built`]).
pub fn graceful_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("GRACEFUL_BIN") {
        return p.into();
    }
    let p = crate::built("graceful");
    assert!(
        p.exists(),
        "{} not built: run `cargo xtask test` (it builds the agent first)",
        p.display()
    );
    p
}

pub struct Agent {
    pub pin_dir: PathBuf,
    pub log: PathBuf,
    /// The gate directory, when started with one (see [`Agent::with_gate`]).
    pub gate_dir: Option<PathBuf>,
    /// More arguments for `graceful daemon` (`--kubeconfig`, `--node-name`, ...).
    pub daemon_args: Vec<String>,
    /// A cgroup to start the daemon in (a memory cgroup, see [`crate::memcg`]).
    pub cgroup: Option<PathBuf>,
    /// Its open-file limit (soft and hard), where a test sets one.
    pub nofile: Option<u64>,
    child: Option<Child>,
    /// Handed the node over to a successor: dropped, it stops its retired
    /// process and leaves the pins, gate and API socket to the successor.
    handed_over: bool,
}

/// The local API socket of the agent of `pin_dir`: beside its log.
pub fn api_sock_for(pin_dir: &Path) -> PathBuf {
    let name = pin_dir.file_name().unwrap().to_string_lossy();
    std::env::temp_dir().join(format!("{name}.api.sock"))
}

/// Runs `graceful ARGS` with this pin dir (and its agent's API socket) and
/// returns its output.
pub fn graceful(pin_dir: &Path, args: &[&str]) -> Output {
    let child = Graceful::new(&graceful_bin(), pin_dir)
        .command(args)
        .env("GRACEFUL_API_SOCKET", api_sock_for(pin_dir))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run graceful");
    output_within(
        child,
        std::time::Duration::from_secs(60),
        &format!("graceful {args:?}"),
    )
}

/// The child's output once it exits; a child still running after `limit`
/// is killed and the test fails saying so, rather than hanging the suite.
pub fn output_within(child: Child, limit: std::time::Duration, what: &str) -> Output {
    process::output_within(child, limit).unwrap_or_else(|e| panic!("{what}: {e}"))
}

impl Agent {
    /// A pin directory for a new agent; nothing started yet.
    pub fn new() -> Agent {
        let name = crate::unique("pins");
        Agent {
            pin_dir: PathBuf::from("/sys/fs/bpf").join(&name),
            log: std::env::temp_dir().join(format!("{name}.log")),
            gate_dir: None,
            daemon_args: Vec::new(),
            cgroup: None,
            nofile: None,
            child: None,
            handed_over: false,
        }
    }

    /// An agent that will serve the drain gate in a directory of its own.
    pub fn with_gate() -> Agent {
        let mut a = Agent::new();
        a.gate_dir = Some(std::env::temp_dir().join(crate::unique("gate")));
        a
    }

    /// [`Agent::new`], started.
    pub fn started() -> Agent {
        let mut a = Agent::new();
        a.start();
        a
    }

    /// [`Agent::with_gate`], started.
    pub fn started_with_gate() -> Agent {
        let mut a = Agent::with_gate();
        a.start();
        a
    }

    /// A second agent for the same node: the same pins, gate directory,
    /// API socket and arguments, its own log; not started. Started while
    /// this one runs, it takes the node over (see `graceful::continuity::handover`).
    pub fn successor(&self) -> Agent {
        let name = crate::unique("successor");
        Agent {
            pin_dir: self.pin_dir.clone(),
            log: std::env::temp_dir().join(format!("{name}.log")),
            gate_dir: self.gate_dir.clone(),
            daemon_args: self.daemon_args.clone(),
            cgroup: None,
            nofile: None,
            child: None,
            handed_over: false,
        }
    }

    /// This agent handed the node over (see [`Agent::successor`]): what
    /// it leaves is its successor's (see [`Drop`]).
    pub fn handed_over(&mut self) {
        self.handed_over = true;
    }

    /// The gate socket.
    pub fn gate_sock(&self) -> PathBuf {
        self.gate_dir
            .as_ref()
            .expect("agent has no gate")
            .join("gate.sock")
    }

    /// The local API's unix socket.
    pub fn api_sock(&self) -> PathBuf {
        api_sock_for(&self.pin_dir)
    }

    /// The local API's TCP address, from the running agent's log.
    pub fn api_addr(&self) -> std::net::SocketAddr {
        let log = self.log_text();
        log_field(&log, "local API listening addr=", "addr")
            .unwrap_or_else(|| panic!("no API address in the agent's log: {log}"))
    }

    /// The metrics address (`--metrics-addr`), as the agent logged it.
    pub fn metrics_addr(&self) -> std::net::SocketAddr {
        let log = self.log_text();
        log_field(&log, "metrics and probes listening addr=", "addr")
            .unwrap_or_else(|| panic!("no metrics address in the agent's log: {log}"))
    }

    /// Starts the daemon and waits until it has adopted and is ready.
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "agent already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut args = vec!["daemon".to_string()];
        if let Some(g) = &self.gate_dir {
            args.extend(["--gate-dir".to_string(), g.display().to_string()]);
        }
        // The local API on a port of its own; the CLI finds the socket
        // through GRACEFUL_API_SOCKET (see [`graceful`]).
        if !self.daemon_args.iter().any(|a| a == "--api-addr") {
            args.extend(["--api-addr".to_string(), "127.0.0.1:0".to_string()]);
        }
        args.extend(self.daemon_args.iter().cloned());
        let mut cmd = Command::new(graceful_bin());
        if let Some(cg) = &self.cgroup {
            crate::cgroup::start_in(&mut cmd, cg);
        }
        if let Some(n) = self.nofile {
            limit_nofile(&mut cmd, n);
        }
        let child = cmd
            .args(&args)
            .env("GRACEFUL_PIN_DIR", &self.pin_dir)
            .env("GRACEFUL_API_SOCKET", self.api_sock())
            .env(
                "GRACEFUL_POD_CGROUP_ROOT",
                graceful_test_support::agent::SIM_POD_ROOTS,
            )
            .env("RUST_LOG", "info")
            // As in the agent's FROM scratch image: no system trust store.
            .env("SSL_CERT_FILE", "/nonexistent/graceful-test-ca.pem")
            .env("SSL_CERT_DIR", "/nonexistent/graceful-test-certs")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start graceful daemon");
        self.child = Some(child);
        let before = self.ready_lines();
        crate::wait_for(start_limit_secs(), "the agent to be ready", || {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!(
                        "agent exited with {status}: {}",
                        std::fs::read_to_string(&self.log).unwrap_or_default()
                    );
                }
            }
            (self.ready_lines() > before).then_some(())
        });
    }

    fn ready_lines(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" ready"))
            .count()
    }

    /// The running daemon's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `graceful daemon` with this agent's pin directory, gate and API
    /// socket, for a second agent that must refuse to start: its output
    /// once it exits (within a minute).
    pub fn second(&self, pin_dir: &Path) -> Output {
        let mut cmd = Command::new(graceful_bin());
        // Not a successor: one that would take the node over is
        // `handover.rs`'s.
        cmd.args(["daemon", "--api-addr", "127.0.0.1:0", "--handover", "off"]);
        if let Some(g) = &self.gate_dir {
            cmd.arg("--gate-dir").arg(g);
        }
        let child = cmd
            .env("GRACEFUL_PIN_DIR", pin_dir)
            .env("GRACEFUL_API_SOCKET", self.api_sock())
            .env(
                "GRACEFUL_POD_CGROUP_ROOT",
                graceful_test_support::agent::SIM_POD_ROOTS,
            )
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a second graceful daemon");
        output_within(child, std::time::Duration::from_secs(60), "a second agent")
    }

    /// Runs under a keeper (`--keeper on`): the process started is the
    /// keeper, and the agent its child.
    pub fn kept(mut self) -> Agent {
        if !self.daemon_args.iter().any(|a| a == "--keeper") {
            self.daemon_args.extend(["--keeper".into(), "on".into()]);
        }
        self
    }

    /// The agent's pid under its keeper: the keeper's one child that
    /// runs `graceful`.
    pub fn kept_agent(&self) -> Option<u32> {
        let keeper = self.pid()?;
        std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            (parent_of(pid)? == keeper).then_some(pid)
        })
    }

    /// kill -9 of the agent under its keeper, as the OOM killer would:
    /// the pid killed, and the count of "ready" lines before.
    pub fn kill_kept(&self) -> (u32, usize) {
        let before = self.ready_lines();
        let pid = self.kept_agent().expect("an agent under the keeper");
        // SAFETY: kill(2) with a pid this test's keeper started.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
        (pid, before)
    }

    /// Waits for the keeper's next agent to be ready (`before`: from
    /// [`Agent::kill_kept`]); its pid.
    pub fn wait_kept_ready(&self, before: usize) -> u32 {
        crate::wait_for(start_limit_secs(), "the keeper's new agent to be ready", || {
            (self.ready_lines() > before).then_some(())
        });
        self.kept_agent().expect("the keeper's new agent")
    }

    /// [`Agent::kill_kept`], then [`Agent::wait_kept_ready`].
    pub fn crash(&self) -> u32 {
        let (_, before) = self.kill_kept();
        self.wait_kept_ready(before)
    }

    /// kill -9: no chance to clean anything.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, and wait: a minute at most, then kill -9 and fail the test
    /// (an agent that ignores SIGTERM is a bug; a hung suite hides it).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            if let Err(e) = process::terminate(&mut c, std::time::Duration::from_secs(60)) {
                if !std::thread::panicking() {
                    panic!("the agent: {e}: {}", self.log_text());
                }
            }
        }
    }

    /// Stops the agent, then `graceful uninstall` on its pin directory, as
    /// an operator's reinstall does: the next [`Agent::start`] makes new
    /// maps in the same place.
    pub fn uninstall(&mut self) {
        self.stop();
        let out = graceful(&self.pin_dir, &["uninstall"]);
        assert!(
            out.status.success(),
            "graceful uninstall: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Counters of one cgroup, read from the pinned maps by `graceful cgroups -o json`.
    pub fn counters(&self, cgroup_id: u64) -> CgroupCounters {
        self.all_counters()
            .into_iter()
            .find(|(id, _)| *id == cgroup_id)
            .map(|(_, c)| c)
            .unwrap_or_default()
    }

    /// Every row of `graceful cgroups -o json -a`.
    pub fn all_counters(&self) -> Vec<(u64, CgroupCounters)> {
        let out = graceful(&self.pin_dir, &["cgroups", "-o", "json", "-a"]);
        assert!(
            out.status.success(),
            "graceful cgroups: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        rows.iter()
            .map(|r| {
                let f = |k: &str| {
                    r[k].as_u64()
                        .unwrap_or_else(|| panic!("field {k} missing in {r}"))
                };
                (
                    f("cgroup_id"),
                    CgroupCounters {
                        inbound_live: f("inbound_live"),
                        outbound_live: f("outbound_live"),
                        listeners: f("listeners"),
                        inbound_total: f("inbound_total"),
                        outbound_total: f("outbound_total"),
                        inbound_closed_total: f("inbound_closed_total"),
                        last_inbound_open_ns: f("last_inbound_open_ns"),
                        last_inbound_close_ns: f("last_inbound_close_ns"),
                        inbound_ignored_live: r["inbound_ignored_live"].as_u64().unwrap_or(0),
                        ..Default::default()
                    },
                )
            })
            .collect()
    }
}

/// Starts `cmd` with `n` as its open-file limit, soft and hard.
fn limit_nofile(cmd: &mut Command, n: u64) {
    use std::os::unix::process::CommandExt as _;
    let lim = libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    };
    // SAFETY: setrlimit is async-signal-safe; `lim` is copied into the closure.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

impl Default for Agent {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop();
        if self.handed_over {
            if !std::thread::panicking() {
                let _ = std::fs::remove_file(&self.log);
            }
            return;
        }
        let out = graceful(&self.pin_dir, &["uninstall"]);
        if !out.status.success() {
            eprintln!(
                "uninstall {}: {}",
                self.pin_dir.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if let Some(g) = &self.gate_dir {
            let _ = std::fs::remove_dir_all(g);
        }
        let _ = std::fs::remove_file(self.api_sock());
        let _ = std::fs::remove_file(graceful::agent::claim::api_lock_path(&self.api_sock()));
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        } else {
            eprintln!("agent log kept at {}", self.log.display());
        }
    }
}

/// A process's parent, from /proc/PID/stat (`pid (comm) state ppid ...`:
/// comm may hold spaces and parentheses, not after its last ')').
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// From an agent's log, field `key` (`key=value`) of the last line that
/// contains `line`.
pub fn log_field<T: std::str::FromStr>(log: &str, line: &str, key: &str) -> Option<T> {
    log.lines()
        .rev()
        .find(|l| l.contains(line))
        .and_then(|l| l.split(&format!("{key}=")).nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// From an agent's log, its last "serving the hooks the previous agent
/// held" line's `since_pause_ms`: how long after the previous agent's
/// pause (a handover's freeze, a crash) it served the held hooks.
pub fn since_pause_ms(log: &str) -> f64 {
    log_field(log, "serving the hooks the previous agent held", "since_pause_ms")
        .unwrap_or_else(|| panic!("no pause in the agent's log: {log}"))
}
