//! A rolling replacement of a deployment's pods on a simulated node, behind
//! a real load balancer under real load, run once per way of terminating a
//! pod: no `preStop` hook, `preStop: sleep 15`, and graceful's gate.
//! `cargo xtask rollout` (through the lab's `graceful-rollout` program) prints its
//! table; the kernel tests assert on it.
//!
//! Each run builds its node from scratch ([`node`]): HAProxy ([`lb`]) in
//! front of N pods ([`pod`]), each serving HTTP with a fixed latency
//! ([`app`]), and a load generator ([`load`]) sending a fixed rate through
//! HAProxy. After a second of load the pods are replaced one at a time, as a
//! Deployment with `maxSurge: 1, maxUnavailable: 0` whose next step waits
//! for the previous pod to be gone:
//!
//! 1. a new pod starts; once its app listens, it becomes an endpoint;
//! 2. an old pod's termination starts at T: kubelet runs its `preStop` hook
//!    in the app container;
//! 3. independently, its endpoint leaves HAProxy at T + the propagation
//!    delay (endpoints controller, kube-proxy or an ingress controller, all
//!    late);
//! 4. when the hook returns, the app gets SIGTERM (SIGKILL at the end of the
//!    grace period); the pod's termination time runs from T to the app's exit.
//!
//! The load runs on until every removal has happened, plus a moment.

pub mod app;
pub mod lb;
pub mod load;
pub mod node;
pub mod pod;
pub mod report;
pub mod stop;

use std::{
    collections::VecDeque,
    fmt,
    io::Read,
    process::{Child, Command},
    str::FromStr,
    thread::JoinHandle,
    time::Duration,
};

use crate::monotonic_ns;
use anyhow::{bail, Context as _};

use crate::agent::Agent;
use lb::Haproxy;
use load::Load;
use node::Node;
use pod::Pod;

/// How the old pods are terminated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No `preStop` hook: SIGTERM at once.
    None,
    /// `preStop: sleep` (15 s by default), then SIGTERM.
    Sleep,
    /// `preStop: graceful-wait`, then SIGTERM.
    Graceful,
    /// The kubelet's own `preStop: sleep: {seconds: 15}` (GA in 1.34): no
    /// binary in the image. Only on the test node: it needs a kubelet.
    SleepAction,
    /// `preStop: httpGet` to the agent's gate in the pod (the restricted
    /// namespaces' gate). Only on the test node: it needs a kubelet.
    HttpGate,
    /// No hook written: the namespace is labelled graceful.dev/inject=enabled
    /// and the API server injects the gate (deploy/inject). Only on the
    /// test node: it needs the API server's admission.
    Injected,
}

impl Mode {
    /// The simulation's modes (it has no kubelet to run the others).
    pub const ALL: [Mode; 3] = [Mode::None, Mode::Sleep, Mode::Graceful];
    /// The test node's: every hook a user compares, in the table's order.
    pub const CLUSTER: [Mode; 6] = [
        Mode::None,
        Mode::Sleep,
        Mode::SleepAction,
        Mode::Graceful,
        Mode::HttpGate,
        Mode::Injected,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::None => "none",
            Mode::Sleep => "sleep",
            Mode::Graceful => "graceful",
            Mode::SleepAction => "sleep-action",
            Mode::HttpGate => "http-gate",
            Mode::Injected => "injected",
        }
    }

    /// Whether graceful's agent releases this mode's hook.
    pub fn gated(self) -> bool {
        matches!(self, Mode::Graceful | Mode::HttpGate | Mode::Injected)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        Mode::CLUSTER.into_iter().find(|m| m.name() == s).ok_or_else(|| {
            format!("unknown mode {s:?}: none, sleep, sleep-action, graceful, http-gate or injected")
        })
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Pods in the deployment; each is replaced once.
    pub pods: usize,
    /// From the start of a pod's termination to its endpoint's removal.
    pub propagation: Duration,
    /// Each request's time in the app.
    pub latency: Duration,
    /// The `sleep` mode's hook.
    pub sleep: Duration,
    /// Requests per second, open loop.
    pub rate: u32,
    /// Keep-alive between the clients and HAProxy and between HAProxy and
    /// the pods; else a connection per request on both sides.
    pub keepalive: bool,
    /// The runs, in order.
    pub modes: Vec<Mode>,
    /// graceful-wait's flags; `None`: [`Config::default_wait_args`].
    pub wait_args: Option<Vec<String>>,
    /// terminationGracePeriodSeconds: hook and shutdown together.
    pub grace: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            pods: 3,
            propagation: Duration::from_secs(2),
            latency: Duration::from_millis(100),
            sleep: Duration::from_secs(15),
            rate: 100,
            keepalive: true,
            modes: Mode::ALL.to_vec(),
            wait_args: None,
            grace: Duration::from_secs(30),
        }
    }
}

impl Config {
    /// The hook's flags an operator would write: release once the pod's
    /// inbound connections have been gone for half a second, never before
    /// 1 s (a floor under any propagation; the traffic decides the rest),
    /// at the latest after 25 s (the default grace period less 5 s for the
    /// app's shutdown). `drained` holds with keep-alive too: HAProxy closes
    /// its idle connections to a server it takes out.
    pub fn default_wait_args(&self) -> Vec<String> {
        [
            "--policy", "drained", "--settle", "500ms", "--min", "1s", "--max", "25s",
        ]
        .map(String::from)
        .to_vec()
    }

    pub fn wait_args(&self) -> Vec<String> {
        self.wait_args.clone().unwrap_or_else(|| self.default_wait_args())
    }

    /// The hook of `mode`, as a pod spec would write it.
    pub fn hook_shown(&self, mode: Mode) -> String {
        match mode {
            Mode::None => "no preStop hook".into(),
            Mode::Sleep => format!("preStop: sleep {}", secs(self.sleep)),
            Mode::Graceful => format!("preStop: graceful-wait {}", self.wait_args().join(" ")),
            Mode::SleepAction => format!("preStop: sleep: {{seconds: {}}}", secs(self.sleep)),
            Mode::HttpGate => "preStop: httpGet :9711/drain".into(),
            Mode::Injected => "none written; injected: graceful-wait --max 25s".into(),
        }
    }
}

/// `15`, `0.5`: seconds as `sleep` takes them.
fn secs(d: Duration) -> String {
    let s = format!("{:.3}", d.as_secs_f64());
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One old pod's termination. Times are seconds from its start (T).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Termination {
    pub pod: String,
    /// The hook returned (0 without one).
    pub hook_s: f64,
    /// Its endpoint left the load balancer.
    pub removed_s: f64,
    /// The app exited: the pod's termination time.
    pub exited_s: f64,
    /// Requests the pod served in its life, and its last response.
    pub served: u64,
    pub last_response_s: Option<f64>,
    /// From the endpoint's removal to the last response; `None` if the app
    /// was gone before its endpoint was.
    pub drain_s: Option<f64>,
    /// graceful-wait's report: why it released.
    pub released: Option<String>,
}

/// One run: one row of the table.
#[derive(Debug, Clone)]
pub struct Run {
    pub mode: Mode,
    pub keepalive: bool,
    pub propagation: Duration,
    pub load: load::Outcome,
    pub terminations: Vec<Termination>,
    /// From the first new pod to the last old pod's exit.
    pub total: Duration,
}

impl Run {
    /// Mean time from a termination's start to the app's exit.
    pub fn per_pod_termination_s(&self) -> f64 {
        mean(self.terminations.iter().map(|t| t.exited_s))
    }

    /// Mean drain after the endpoint's removal, over the pods that were
    /// still there when it happened.
    pub fn drain_s(&self) -> Option<f64> {
        let d: Vec<f64> = self.terminations.iter().filter_map(|t| t.drain_s).collect();
        (!d.is_empty()).then(|| mean(d.into_iter()))
    }
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

fn since_s(t0_ns: u64, t_ns: u64) -> f64 {
    t_ns.saturating_sub(t0_ns) as f64 / 1e9
}

/// Runs every mode of `cfg`, in order, and returns their rows. Progress
/// goes to stderr. The agent (with its gate) runs only if a mode needs it.
pub fn run(cfg: &Config) -> anyhow::Result<Vec<Run>> {
    if cfg.pods == 0 {
        bail!("a rollout needs at least one pod");
    }
    if let Some(m) = cfg.modes.iter().find(|m| !Mode::ALL.contains(m)) {
        bail!("the {m} mode needs a kubelet: run it on the test node (--cluster)");
    }
    let agent = cfg.modes.contains(&Mode::Graceful).then(Agent::started_with_gate);
    let mut runs = Vec::new();
    for &mode in &cfg.modes {
        eprintln!(
            "==> {mode}: {} pods behind HAProxy, {} req/s{}, {} ms per request, endpoint removed {} s after termination starts; {}",
            cfg.pods,
            cfg.rate,
            if cfg.keepalive { " over keep-alive" } else { ", a connection each" },
            cfg.latency.as_millis(),
            secs(cfg.propagation),
            cfg.hook_shown(mode)
        );
        runs.push(run_mode(cfg, mode, agent.as_ref())?);
    }
    Ok(runs)
}

/// A termination under way: its endpoint's removal may still be pending.
struct Terminating {
    t0_ns: u64,
    pod: Pod,
    removal: JoinHandle<anyhow::Result<u64>>,
    hook_ns: u64,
    exit_ns: u64,
    released: Option<String>,
}

fn run_mode(cfg: &Config, mode: Mode, agent: Option<&Agent>) -> anyhow::Result<Run> {
    let mut node = Node::create();
    let lb = Haproxy::start(&node.ns, cfg.keepalive)?;
    let mut names = (1..).map(|i| format!("pod-{i}"));
    let mut live = VecDeque::new();
    for _ in 0..cfg.pods {
        let pod = Pod::start(&mut node, names.next().unwrap(), cfg.latency)?;
        lb.admin.add(&pod.name, pod.addr())?;
        live.push_back(pod);
    }
    let workers = load::workers_for(cfg.rate, cfg.latency);
    let load = Load::start(&node.ns, lb::SERVICE, cfg.rate, cfg.keepalive, workers)?;
    stop::sleep(Duration::from_secs(1))?;

    let start_ns = monotonic_ns();
    let mut done: Vec<Terminating> = Vec::new();
    for _ in 0..cfg.pods {
        let new = Pod::start(&mut node, names.next().unwrap(), cfg.latency)?;
        lb.admin.add(&new.name, new.addr())?;
        live.push_back(new);
        let old = live.pop_front().context("no pod to replace")?;
        done.push(terminate(cfg, mode, old, &lb.admin, agent)?);
        let t = done.last().unwrap();
        eprintln!(
            "    {}: replaced; terminated in {:.2} s{}",
            t.pod.name,
            since_s(t.t0_ns, t.exit_ns),
            t.released
                .as_ref()
                .map(|r| format!(" (graceful-wait: {r})"))
                .unwrap_or_default()
        );
    }
    let end_ns = done.last().map_or(start_ns, |t| t.exit_ns);

    let mut terminations = Vec::new();
    for t in done {
        terminations.push(finish(t)?);
    }
    // The last removal has happened (finish waited for it): a moment more
    // for the requests it may have failed to show.
    stop::sleep(Duration::from_millis(500))?;
    let outcome = load.finish();
    Ok(Run {
        mode,
        keepalive: cfg.keepalive,
        propagation: cfg.propagation,
        load: outcome,
        terminations,
        total: Duration::from_nanos(end_ns - start_ns),
    })
}

/// A running `preStop` hook. graceful-wait's stdout is read as it comes:
/// a long drain's progress lines must never fill the pipe and stall it.
struct Hook {
    child: Child,
    stdout: Option<JoinHandle<String>>,
}

impl Hook {
    /// The hook of `mode`, started in `pod`'s app container.
    fn start(cfg: &Config, mode: Mode, pod: &Pod, agent: Option<&Agent>) -> anyhow::Result<Option<Hook>> {
        let mut cmd = match mode {
            Mode::None => return Ok(None),
            Mode::Sleep => {
                let mut c = Command::new("sleep");
                c.arg(secs(cfg.sleep));
                c
            }
            Mode::SleepAction | Mode::HttpGate | Mode::Injected => bail!("the {mode} mode needs a kubelet"),
            Mode::Graceful => {
                let agent = agent.context("the graceful mode needs the agent")?;
                let gate = agent.gate_dir.as_ref().context("the agent has no gate")?;
                let mut c = Command::new(gate.join("graceful-wait"));
                c.args(cfg.wait_args()).arg("--socket").arg(agent.gate_sock());
                c.stdout(std::process::Stdio::piped());
                c
            }
        };
        let mut child = pod.exec(&mut cmd)?;
        let stdout = child.stdout.take().map(|mut out| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = out.read_to_string(&mut text);
                text
            })
        });
        Ok(Some(Hook { child, stdout }))
    }

    /// Once it has exited: why graceful-wait released (its report, the
    /// last line, says); `None` for another hook.
    fn released(mut self) -> anyhow::Result<Option<String>> {
        self.child.wait()?;
        let Some(reader) = self.stdout.take() else {
            return Ok(None);
        };
        let out = reader.join().unwrap_or_default();
        let last = out.lines().last().unwrap_or_default();
        let report: serde_json::Value = serde_json::from_str(last)
            .with_context(|| format!("graceful-wait's last line is not its report: {last:?}"))?;
        Ok(report["reason"].as_str().map(str::to_string))
    }
}

/// Kubernetes' termination of `pod`: the hook at T and, independently, the
/// endpoint's removal at T + propagation; SIGTERM when the hook returns.
fn terminate(
    cfg: &Config,
    mode: Mode,
    mut pod: Pod,
    admin: &lb::Admin,
    agent: Option<&Agent>,
) -> anyhow::Result<Terminating> {
    let t0_ns = monotonic_ns();
    let removal = std::thread::spawn({
        let (admin, name) = (admin.clone(), pod.name.clone());
        let at = t0_ns + cfg.propagation.as_nanos() as u64;
        move || {
            stop::until(at)?;
            admin.remove(&name)?;
            Ok(monotonic_ns())
        }
    });
    let grace_end = t0_ns + cfg.grace.as_nanos() as u64;
    let step = Duration::from_millis(2);
    let mut released = None;
    if let Some(mut hook) = Hook::start(cfg, mode, &pod, agent)? {
        let finished = stop::poll(cfg.grace, step, "the preStop hook", || {
            Ok(hook.child.try_wait()?.map(|_| ()))
        });
        if finished.is_err() {
            // Kubelet's way: the grace period is over, the hook is cut short.
            let _ = hook.child.kill();
        }
        stop::check()?;
        released = hook.released()?;
    }
    let hook_ns = monotonic_ns();
    pod.signal(libc::SIGTERM);
    // SIGKILL at the end of the grace period, 2 s at least after SIGTERM.
    let kill_at = grace_end.max(hook_ns + 2_000_000_000);
    let left = Duration::from_nanos(kill_at.saturating_sub(monotonic_ns()));
    if stop::poll(left, step, "the app's exit", || Ok(pod.exited()?.map(|_| ()))).is_err() {
        stop::check()?;
        pod.signal(libc::SIGKILL);
        stop::poll(
            Duration::from_secs(5),
            step,
            "the app's exit after SIGKILL",
            || Ok(pod.exited()?.map(|_| ())),
        )?;
    }
    Ok(Terminating {
        t0_ns,
        exit_ns: monotonic_ns(),
        pod,
        removal,
        hook_ns,
        released,
    })
}

/// The figures of a termination, once its endpoint is gone too.
fn finish(mut t: Terminating) -> anyhow::Result<Termination> {
    let removed_ns = t
        .removal
        .join()
        .map_err(|_| anyhow::anyhow!("the endpoint removal of {} panicked", t.pod.name))??;
    let served = t.pod.served()?;
    let last = (served.last_response_ns > 0).then_some(served.last_response_ns);
    Ok(Termination {
        pod: t.pod.name.clone(),
        hook_s: since_s(t.t0_ns, t.hook_ns),
        removed_s: since_s(t.t0_ns, removed_ns),
        exited_s: since_s(t.t0_ns, t.exit_ns),
        served: served.served,
        last_response_s: last.map(|l| since_s(t.t0_ns, l)),
        drain_s: (t.exit_ns > removed_ns).then(|| since_s(removed_ns, last.unwrap_or(0).max(removed_ns))),
        released: t.released,
    })
}
