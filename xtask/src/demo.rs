//! `cargo xtask demo`: graceful counting a pod's connections as it drains,
//! on this machine, no cluster needed.
//!
//! 1. start the agent on its own pin directory (a real agent is never touched);
//! 2. make a pod cgroup in kubelet's systemd layout, run an HTTP server in it;
//! 3. open keep-alive connections to it from another cgroup;
//! 4. close them a few at a time, watching the pod's INBOUND count fall;
//!
//! Then it stops and removes everything (also on error or Ctrl-C), unless `--keep`.

use std::{
    fs,
    io::{IsTerminal, Write},
    net::{Ipv4Addr, SocketAddr, TcpListener},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use crate::util::{self, output};

mod cgroup;
pub mod client;
pub(crate) mod procs;

use client::Client;
use procs::Proc;

/// The demo's own pin directory, so it never disturbs a real agent
/// (which uses /sys/fs/bpf/graceful).
const PIN_DIR: &str = "/sys/fs/bpf/graceful-demo";
const CLIENT_CGROUP: &str = "/graceful-demo-client";
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Keep-alive connections to open to the pod.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u16).range(1..=1000))]
    connections: u16,
    /// Connections closed at each step of the drain.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    batch: u16,
    /// Leave the agent, the pod and its clients running to explore, and print commands to try.
    #[arg(long, conflicts_with = "cleanup")]
    keep: bool,
    /// Stop and remove what a `--keep` run left running.
    #[arg(long)]
    cleanup: bool,
    /// On a real node instead (`cargo xtask cluster`, brought up for it and down after unless it
    /// ran before, or --keep): a rolling update of deploy/examples/web, its drains shown as they
    /// happen.
    #[arg(long, conflicts_with = "cleanup")]
    cluster: bool,
}

/// What a `--keep` run leaves, for `--cleanup`.
#[derive(Debug, Serialize, Deserialize)]
struct State {
    bin: PathBuf,
    pin_dir: PathBuf,
    /// (name, pid, a string its command line contains)
    procs: Vec<(String, i32, String)>,
    /// Absolute, in creation order.
    cgroups: Vec<PathBuf>,
}

fn demo_dir() -> PathBuf {
    util::target_dir().join("demo")
}

fn api_socket() -> PathBuf {
    demo_dir().join("api.sock")
}

fn state_file() -> PathBuf {
    demo_dir().join("kept.json")
}

fn section(title: &str) {
    println!("\n==> {title}");
}

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
struct Counts {
    inbound: i64,
    outbound: i64,
    listeners: i64,
    last_inbound_close_ns: u64,
}

/// Everything the demo started and created. Dropping it stops and removes
/// all of it, in order, unless it was told to keep it.
struct Demo {
    bin: PathBuf,
    pins: PathBuf,
    mount: PathBuf,
    cgroups: cgroup::Created,
    agent: Option<Proc>,
    server: Option<Proc>,
    client: Option<Client>,
    /// Processes of an earlier `--keep` run, for `--cleanup`.
    kept: Vec<Proc>,
    /// The "clean up" header was printed already.
    announced: bool,
    keep: bool,
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
    fn bin_shown(&self) -> String {
        self.bin
            .strip_prefix(util::workspace_root())
            .unwrap_or(&self.bin)
            .display()
            .to_string()
    }

    /// `$ command`, with the agent binary shown relative to the workspace.
    fn shown(&self, cmd: &Command) -> String {
        let full = util::display(cmd);
        let bin = self.bin.display().to_string();
        match full.strip_prefix(&bin) {
            Some(rest) => format!("$ {}{rest}", self.bin_shown()),
            None => format!("$ {full}"),
        }
    }

    fn graceful(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--pin-dir").arg(&self.pins);
        cmd.arg("--api-socket").arg(api_socket());
        cmd
    }

    /// `graceful cgroups -o json --path <rel>`, summed over the subtree.
    fn counts(&self, rel: &str) -> anyhow::Result<Counts> {
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
    fn wait_for(
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
    fn check_alive(&mut self) -> anyhow::Result<()> {
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

    fn start_agent(&mut self) -> anyhow::Result<()> {
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
        // may hold the default address.
        cmd.args(["daemon", "--api-addr", "off"])
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
    fn start_pod(&mut self) -> anyhow::Result<(String, String, SocketAddr)> {
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
        crate::util::spawn_into(&mut cmd, &container_dir)?;
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

    fn open_clients(&mut self, pod: &str, addr: SocketAddr, n: usize) -> anyhow::Result<()> {
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
        crate::util::spawn_into(&mut cmd, &dir)?;
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
    fn ss_count(&self, container: &str) -> Option<usize> {
        let mut cmd = Command::new("ss");
        cmd.args(["-Htn", "state", "established", "cgroup", container]);
        output(&mut cmd)
            .ok()
            .map(|s| s.lines().filter(|l| !l.trim().is_empty()).count())
    }

    fn drain(&mut self, pod: &str, n: usize, batch: usize) -> anyhow::Result<()> {
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

    /// `--keep`: reopen the connections, leave everything running, say what to try.
    fn leave_running(
        &mut self,
        pod: &str,
        container: &str,
        addr: SocketAddr,
        n: usize,
    ) -> anyhow::Result<()> {
        section("left running (--keep)");
        let client = self.client.as_mut().context("no client")?;
        client.open(n)?;
        client.hold()?;
        let state = State {
            bin: self.bin.clone(),
            pin_dir: self.pins.clone(),
            procs: [
                self.client
                    .as_ref()
                    .map(|c| ("client", c.proc.pid, "__demo-client")),
                self.server
                    .as_ref()
                    .map(|s| ("HTTP server", s.pid, "http.server")),
                self.agent.as_ref().map(|a| ("agent", a.pid, "daemon")),
            ]
            .into_iter()
            .flatten()
            .map(|(a, b, c)| (a.to_string(), b, c.to_string()))
            .collect(),
            cgroups: self.cgroups.dirs.clone(),
        };
        fs::write(state_file(), serde_json::to_string_pretty(&state)?)?;
        self.keep = true;

        let bin = self.bin_shown();
        let client_pid = self.client.as_ref().map_or(0, |c| c.proc.pid);
        println!(
            "    agent        pid {}, log {}",
            self.agent.as_ref().map_or(0, |a| a.pid),
            demo_dir().join("daemon.log").display()
        );
        println!(
            "    HTTP server  pid {}, http://{addr}/, in {container}",
            self.server.as_ref().map_or(0, |s| s.pid)
        );
        println!("    client       pid {client_pid}, {n} open keep-alive connections, in {CLIENT_CGROUP}");
        let log = demo_dir().join("daemon.log");
        let log = log
            .strip_prefix(util::workspace_root())
            .unwrap_or(&log)
            .display()
            .to_string();
        let ctr = container.strip_prefix(pod).unwrap_or(container);
        println!("\n    Try, from {}:", util::workspace_root().display());
        let tries = [
            (
                format!("export GRACEFUL_PIN_DIR={PIN_DIR}"),
                "the demo agent's pins",
            ),
            (
                format!("export GRACEFUL_API_SOCKET={}", api_socket().display()),
                "and its local API",
            ),
            (format!("POD={pod}"), ""),
            (format!("CTR=$POD{ctr}"), ""),
            (
                format!("{bin} cgroups"),
                "every cgroup holding connections or listeners",
            ),
            (
                format!("{bin} cgroups -o json --path $POD"),
                "the pod, as scripts read it",
            ),
            (
                "ss -tn cgroup $CTR".to_string(),
                "the kernel's socket table, for comparison",
            ),
            (
                format!(
                    "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://{addr}/\").status)'"
                ),
                "one more request: IN_TOTAL grows",
            ),
            (
                format!("watch -n 0.2 {bin} cgroups --path $POD"),
                "a live view; meanwhile, elsewhere:",
            ),
            (
                format!("kill {client_pid}"),
                "close the clients: INBOUND falls to 0",
            ),
            (format!("{bin} pods"), "per pod, from the agent's API"),
            (
                "curl -s --unix-socket $GRACEFUL_API_SOCKET http://graceful/metrics | grep ^graceful_pod"
                    .to_string(),
                "what Prometheus scrapes",
            ),
            (format!("{bin} doctor"), "what the agent needs from a node"),
            (format!("tail -f {log}"), "the agent's log"),
        ];
        for (cmd, why) in tries {
            if why.is_empty() {
                println!("      {cmd}");
            } else {
                println!("      {cmd:<50} # {why}");
            }
        }
        println!("\n    When done: cargo xtask demo --cleanup");
        Ok(())
    }

    fn teardown(&mut self) {
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

/// `--cleanup`: stop and remove what a `--keep` run left.
fn cleanup_kept() -> anyhow::Result<()> {
    let path = state_file();
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!(
                "nothing to clean up: no demo was left running ({} does not exist)",
                path.display()
            );
            return Ok(());
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let state: State =
        serde_json::from_str(&text).with_context(|| format!("cannot parse {}", path.display()))?;
    let mut demo = Demo {
        bin: state.bin,
        pins: state.pin_dir,
        mount: PathBuf::new(),
        cgroups: cgroup::Created { dirs: state.cgroups },
        agent: None,
        server: None,
        client: None,
        kept: Vec::new(),
        announced: true,
        keep: false,
    };
    section("clean up what `cargo xtask demo --keep` left");
    for (name, pid, marker) in &state.procs {
        let name = match name.as_str() {
            "agent" => "agent",
            "HTTP server" => "HTTP server",
            _ => "client",
        };
        match Proc::adopt(name, *pid, marker) {
            Some(p) => demo.kept.push(p),
            None => println!("    {name} (pid {pid}): already gone"),
        }
    }
    drop(demo);
    fs::remove_file(&path)?;
    Ok(())
}

fn random_bytes<const N: usize>() -> anyhow::Result<[u8; N]> {
    use std::io::Read;
    let mut b = [0u8; N];
    fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A random (version 4) UUID, as Kubernetes gives pods.
fn random_uuid() -> anyhow::Result<String> {
    let mut b = random_bytes::<16>()?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    ))
}

/// The demo on the test node: graceful-cluster-demo (graceful_tests::cluster::demo).
fn on_cluster(keep: bool) -> anyhow::Result<()> {
    section("the test node: cargo xtask cluster up");
    let session = crate::cluster::Session::begin()?;
    let mut cmd = util::cargo();
    cmd.args([
        "build",
        "-q",
        "-p",
        "graceful-tests",
        "--bin",
        "graceful-cluster-demo",
    ]);
    util::run(&mut cmd)?;
    section("a rolling update on a real node");
    let mut cmd = std::process::Command::new(util::target_dir().join("debug/graceful-cluster-demo"));
    cmd.env("GRACEFUL_KUBECONFIG", &session.kubeconfig);
    let result = util::run(&mut cmd);
    if keep {
        println!(
            "==> --keep: the node stays up; KUBECONFIG={}",
            session.kubeconfig.display()
        );
    } else {
        session.end()?;
    }
    result
}

pub fn run(args: Args) -> anyhow::Result<()> {
    util::require_root("cargo xtask demo")?;
    if args.cluster {
        return on_cluster(args.keep);
    }
    if args.cleanup {
        return cleanup_kept();
    }
    if state_file().exists() {
        println!("A previous `cargo xtask demo --keep` is still running: cleaning it up first.");
        cleanup_kept()?;
    }
    section("setup");
    crate::setup::run()?;
    println!();
    let bin = crate::test::build_agent(true)?;
    fs::create_dir_all(demo_dir())?;

    procs::catch_signals();
    let mut demo = Demo {
        bin,
        pins: PathBuf::from(PIN_DIR),
        mount: cgroup::mount_point()?,
        cgroups: cgroup::Created::default(),
        agent: None,
        server: None,
        client: None,
        kept: Vec::new(),
        announced: false,
        keep: false,
    };
    let n = args.connections as usize;
    demo.start_agent()?;
    let (pod, container, addr) = demo.start_pod()?;
    demo.open_clients(&pod, addr, n)?;
    if let Some(ss) = demo.ss_count(&container) {
        println!("    `ss -tn state established cgroup <container>` (the kernel's socket table) lists {ss}.");
    }
    procs::sleep(Duration::from_secs(1))?;
    demo.drain(&pod, n, args.batch as usize)?;
    if args.keep {
        demo.leave_running(&pod, &container, addr, n)?;
    }
    drop(demo);
    Ok(())
}
