//! The demo's session: what it started and created, and how it starts,
//! reads and tears them down.

use std::{
    fs,
    net::{Ipv4Addr, SocketAddr, TcpListener},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use serde::Deserialize;

use super::ids::{hex, random_bytes, random_uuid};
use super::{
    api_socket, cgroup,
    client::Client,
    demo_dir, gate_dir,
    procs::{self, Proc},
    section, CLIENT_CGROUP, POLL,
};
use xtask::util::{self, output};

/// One row of `graceful cgroups -o json` (the fields the demo reads).
#[derive(Debug, Deserialize)]
struct Row {
    path: Option<String>,
    inbound_live: u64,
    outbound_live: u64,
    listeners: u64,
    last_inbound_close_ns: u64,
}

/// The figures of a cgroup and everything below it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) inbound: i64,
    pub(super) outbound: i64,
    pub(super) listeners: i64,
    pub(super) last_inbound_close_ns: u64,
}

/// Everything the demo started and created. Dropping it stops and removes/// all of it, in order, unless it was told to keep it.
pub(super) struct Demo {
    pub(super) bin: PathBuf,
    pub(super) pins: PathBuf,
    pub(super) mount: PathBuf,
    pub(super) cgroups: cgroup::Created,
    pub(super) agent: Option<Proc>,
    pub(super) server: Option<Proc>,
    pub(super) client: Option<Client>,
    /// Processes of an earlier `--keep` run, for `--cleanup`.
    pub(super) kept: Vec<Proc>,
    /// The "clean up" header was printed already.
    pub(super) announced: bool,
    pub(super) keep: bool,
}

impl Drop for Demo {
    fn drop(&mut self) {
        if !self.keep {
            self.teardown();
        }
    }
}

impl Demo {
    /// The agent binary as the user would type it: relative to the workspace.
    pub(super) fn bin_shown(&self) -> String {
        self.bin
            .strip_prefix(util::workspace_root())
            .unwrap_or(&self.bin)
            .display()
            .to_string()
    }

    /// `$ command`, with the agent binary shown relative to the workspace.
    pub(super) fn shown(&self, cmd: &Command) -> String {
        let full = util::display(cmd);
        let bin = self.bin.display().to_string();
        match full.strip_prefix(&bin) {
            Some(rest) => format!("$ {}{rest}", self.bin_shown()),
            None => format!("$ {full}"),
        }
    }

    pub(super) fn graceful(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--pin-dir").arg(&self.pins);
        cmd.arg("--api-socket").arg(api_socket());
        cmd
    }

    /// `graceful cgroups -o json --path <rel>`, summed over the subtree.
    pub(super) fn counts(&self, rel: &str) -> anyhow::Result<Counts> {
        let json = output(
            self.graceful()
                .args(["cgroups", "-o", "json", "--all", "--path", rel]),
        )?;
        let rows: Vec<Row> =
            serde_json::from_str(&json).context("cannot parse `graceful cgroups -o json`")?;
        let mut c = Counts::default();
        for r in rows.iter().filter(|r| r.path.is_some()) {
            // Counters are u64 in the map; a transient negative shows as huge.
            c.inbound += r.inbound_live as i64;
            c.outbound += r.outbound_live as i64;
            c.listeners += r.listeners as i64;
            c.last_inbound_close_ns = c.last_inbound_close_ns.max(r.last_inbound_close_ns);
        }
        Ok(c)
    }

    /// Polls `rel`'s counts until `done` holds, for at most `limit`.
    pub(super) fn wait_for(
        &mut self,
        rel: &str,
        limit: Duration,
        what: &str,
        done: impl Fn(&Counts) -> bool,
    ) -> anyhow::Result<Counts> {
        let start = Instant::now();
        loop {
            let c = self.counts(rel)?;
            if done(&c) {
                return Ok(c);
            }
            if start.elapsed() > limit {
                bail!("{what}: still {c:?} after {} s", limit.as_secs());
            }
            self.check_alive()?;
            procs::sleep(POLL)?;
        }
    }

    /// Fails, with the log's tail, if a background process died.
    pub(super) fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(how) = self.agent.as_mut().and_then(Proc::exited) {
            let log = fs::read_to_string(demo_dir().join("daemon.log")).unwrap_or_default();
            bail!(
                "the agent exited ({how}); the end of its log:\n{}",
                util::tail(&log, 20)
            );
        }
        if let Some(how) = self.server.as_mut().and_then(Proc::exited) {
            let log = fs::read_to_string(demo_dir().join("server.log")).unwrap_or_default();
            bail!(
                "the HTTP server exited ({how}); the end of its log:\n{}",
                util::tail(&log, 20)
            );
        }
        Ok(())
    }

    pub(super) fn start_agent(&mut self) -> anyhow::Result<()> {
        section("1/4  start the agent");
        if self.pins.exists() {
            println!(
                "    {} is left from an earlier run: removing it first",
                self.pins.display()
            );
            output(self.graceful().arg("uninstall"))?;
        }
        let log_path = demo_dir().join("daemon.log");
        let log =
            fs::File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
        let mut cmd = self.graceful();
        // Its local API on a socket of its own only: a node's real agent
        // may hold the default address. The gate in the demo's directory.
        cmd.args(["daemon", "--api-addr", "off", "--gate-dir"])
            .arg(gate_dir())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        println!("    {} &", self.shown(&cmd));
        println!("    its log: {}", log_path.display());
        let start = Instant::now();
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", self.bin.display()))?;
        self.agent = Some(Proc::child("agent", child));

        // Attached once its program link is pinned.
        let links = self.pins.join("links");
        while !fs::read_dir(&links).is_ok_and(|mut d| d.next().is_some()) {
            self.check_alive()?;
            if start.elapsed() > Duration::from_secs(30) {
                bail!("the agent did not attach within 30 s; see {}", log_path.display());
            }
            procs::sleep(Duration::from_millis(50))?;
        }
        println!(
            "    attached in {:.1} s (pid {}): every TCP state change on this machine is now counted per cgroup",
            start.elapsed().as_secs_f64(),
            self.agent.as_ref().map_or(0, |a| a.pid)
        );
        Ok(())
    }

    /// Makes the pod's cgroups and starts the server in the container's.
    /// Returns (pod path, container path, server address).
    pub(super) fn start_pod(&mut self) -> anyhow::Result<(String, String, SocketAddr)> {
        section("2/4  a simulated pod with an HTTP server");
        let uid = random_uuid()?;
        let pod = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
            uid.replace('-', "_")
        );
        let container = format!("{pod}/cri-containerd-{}.scope", hex(&random_bytes::<32>()?));
        let mount = self.mount.clone();
        let container_dir = self.cgroups.create(&mount, &container)?;
        println!("    cgroup2 is mounted at {}", mount.display());
        println!("    pod {uid}, in kubelet's systemd cgroup layout:");
        println!("      pod cgroup        {pod}");
        println!(
            "      container cgroup  {pod}/{}",
            container.rsplit('/').next().unwrap_or("")
        );

        let www = demo_dir().join("www");
        fs::create_dir_all(&www)?;
        fs::write(www.join("index.html"), "hello from a simulated pod\n")?;
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let log_path = demo_dir().join("server.log");
        let log = fs::File::create(&log_path)?;
        let python = if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3"
        } else {
            "python3"
        };
        let mut cmd = Command::new(python);
        cmd.args([
            "-u",
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            "--protocol",
            "HTTP/1.1",
            "--directory",
        ])
        .arg(&www)
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0);
        graceful_test_support::cgroup::start_in(&mut cmd, &container_dir)?;
        println!("    {}", self.shown(&cmd));
        let child = cmd.spawn().with_context(|| format!("cannot start {python}"))?;
        drop(cmd);
        self.server = Some(Proc::child("HTTP server", child));
        println!(
            "    serving http://{addr}/ (pid {}), moved into the container cgroup before exec",
            self.server.as_ref().map_or(0, |s| s.pid)
        );
        let c = self.wait_for(
            &pod,
            Duration::from_secs(10),
            "the server did not start listening",
            |c| c.listeners >= 1,
        )?;
        println!(
            "    graceful sees its listening socket: LISTEN {} in the pod",
            c.listeners
        );
        Ok((pod, container, addr))
    }

    pub(super) fn open_clients(&mut self, pod: &str, addr: SocketAddr, n: usize) -> anyhow::Result<()> {
        section(&format!("3/4  {n} keep-alive clients"));
        let mount = self.mount.clone();
        let dir = self.cgroups.create(&mount, CLIENT_CGROUP)?;
        let log = demo_dir().join("client.log");
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.args(["__demo-client", "--connect", &addr.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(&log)?)
            .process_group(0);
        graceful_test_support::cgroup::start_in(&mut cmd, &dir)?;
        let mut child = cmd.spawn().context("cannot start the demo client")?;
        drop(cmd);
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let client = self.client.insert(Client::new(
            Proc::child("client", child),
            stdin.context("no stdin")?,
            stdout.context("no stdout")?,
            log,
        ));
        let (open, status) = client.open(n)?;
        println!(
            "    a client process (pid {}) in cgroup {CLIENT_CGROUP} opened {open} connections;",
            client.proc.pid
        );
        println!("    each sent `GET /`, got `{status}`, and keeps its connection open (keep-alive)");
        self.wait_for(
            pod,
            Duration::from_secs(5),
            "the pod's INBOUND count did not reach the clients' count",
            |c| c.inbound == open as i64,
        )?;

        let mut cmd = self.graceful();
        cmd.args(["cgroups", "--path", "/kubepods.slice"]);
        println!("\n    {}", self.shown(&cmd));
        for line in output(&mut cmd)?.lines() {
            println!("    {line}");
        }
        let c = self.counts(CLIENT_CGROUP)?;
        println!("\n    INBOUND {n} in the pod's container: connections it accepted and still holds.",);
        println!(
            "    The client's side of them is OUTBOUND {} in {CLIENT_CGROUP}.",
            c.outbound
        );
        Ok(())
    }

    /// The kernel's own socket table, for comparison: `ss -tn cgroup <path>`.
    pub(super) fn ss_count(&self, container: &str) -> Option<usize> {
        let mut cmd = Command::new("ss");
        cmd.args(["-Htn", "state", "established", "cgroup", container]);
        output(&mut cmd)
            .ok()
            .map(|s| s.lines().filter(|l| !l.trim().is_empty()).count())
    }

    pub(super) fn teardown(&mut self) {
        if !self.announced {
            section("clean up");
        }
        let stop = |mut p: Proc, grace: u64| {
            let how = p.stop(libc::SIGTERM, Duration::from_secs(grace));
            println!("    {} (pid {}): {how}", p.name, p.pid);
        };
        for p in self.kept.drain(..) {
            stop(p, 10);
        }
        if let Some(c) = self.client.take() {
            stop(c.proc, 2);
        }
        if let Some(p) = self.server.take() {
            stop(p, 2);
        }
        if let Some(p) = self.agent.take() {
            stop(p, 10);
        }
        if self.pins.exists() {
            let mut cmd = self.graceful();
            cmd.arg("uninstall");
            match output(&mut cmd) {
                Ok(out) => println!("    {}\n    {}", self.shown(&cmd), out.trim()),
                Err(e) => println!("    {e:#}"),
            }
        }
        for line in self.cgroups.remove_all() {
            println!("    {line}");
        }
    }
}
