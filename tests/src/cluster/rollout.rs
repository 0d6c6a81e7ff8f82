//! A real rolling update on the test node: `deploy/examples/web` (3 nginx
//! pods behind a ClusterIP Service) under an open-loop load from the node
//! (through kube-proxy's rules, as any client on the node reaches a
//! Service), while `kubectl rollout restart` replaces every pod, six ways
//! ([`Mode::CLUSTER`]): no preStop hook; `exec: sleep 15`; the kubelet's own
//! `sleep: {seconds: 15}` action (1.34+); graceful's exec gate (the example
//! as shipped); graceful's httpGet gate; and no hook written, in a
//! namespace labelled for injection (deploy/inject). Each mode runs in a namespace of
//! its own, deleted after.
//!
//! The load starts once kube-proxy's rules send the Service to every ready
//! pod ([`Namespace::wait_service`]), and its failures count from the
//! rollout's start: the second before it is warm-up, reported apart and
//! required to be clean (a failure there is the harness's, not a drain's).
//!
//! Measured from the node, per old pod: its termination's start (the
//! deletion, as the API's watch shows it), its endpoint's removal (when
//! the Service's EndpointSlices, as kube-proxy watches them, stop listing
//! it ready), its last inbound close (the agent's record) and its app's
//! exit (its container's cgroup empties). The table is the simulation's
//! ([`crate::rollout::report`]); its DRAIN runs from the endpoint's removal
//! to the last inbound close.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    io::BufReader,
    net::SocketAddr,
    process::{Child, Stdio},
    sync::{mpsc, Arc, Mutex},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crate::monotonic_ns;
use anyhow::{bail, Context as _};
use serde_json::Value;

use super::{pod::Pod, service, workspace, Cluster, Namespace};
use crate::rollout::{load, Mode, Run, Termination};

pub struct Config {
    pub modes: Vec<Mode>,
    /// Requests a second, open loop, a connection each.
    pub rate: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            modes: Mode::CLUSTER.to_vec(),
            rate: 100,
        }
    }
}

/// The overlay of `deploy/examples/web` for `mode` (`tests/overlays/web-*`).
pub fn overlay(mode: Mode) -> std::path::PathBuf {
    workspace().join(format!("tests/overlays/web-{}", mode.name()))
}

pub const PODS: usize = 3;
const SELECTOR: &str = "app.kubernetes.io/name=web";

pub fn run(cluster: &Cluster, cfg: &Config) -> anyhow::Result<Vec<Run>> {
    let mut runs = Vec::new();
    for &mode in &cfg.modes {
        eprintln!(
            "==> {mode}: deploy/examples/web, {PODS} pods behind a ClusterIP, {} req/s from the node, a connection each; kubectl rollout restart",
            cfg.rate
        );
        runs.push(run_mode(cluster, cfg, mode)?);
    }
    Ok(runs)
}

/// `kubectl get --watch -o json`: each object as it arrives, stamped.
struct Watch {
    child: Child,
    reader: Option<JoinHandle<()>>,
}

impl Watch {
    fn start(cluster: &Cluster, args: &[&str], tx: mpsc::Sender<(Instant, Value)>) -> anyhow::Result<Watch> {
        let mut a = args.to_vec();
        a.extend(["--watch", "-o", "json"]);
        let mut child = cluster
            .kubectl_cmd(&a)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("kubectl get --watch")?;
        let out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let objects = serde_json::Deserializer::from_reader(BufReader::new(out)).into_iter::<Value>();
            for v in objects.map_while(Result::ok) {
                if tx.send((Instant::now(), v)).is_err() {
                    return;
                }
            }
        });
        Ok(Watch {
            child,
            reader: Some(reader),
        })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// One old pod's termination, as the node saw it.
#[derive(Default, Clone)]
struct Seen {
    deleted: Option<Instant>,
    removed: Option<Instant>,
    /// The same moment, on CLOCK_MONOTONIC (the agent's clock).
    removed_ns: Option<u64>,
}

fn run_mode(cluster: &Cluster, cfg: &Config, mode: Mode) -> anyhow::Result<Run> {
    let ns = Namespace::create(cluster, &format!("rollout-{mode}"));
    // The injected mode's Deployment has nothing of graceful: its
    // namespace is labelled, and deploy/inject's policy writes the gate
    // into each new pod (removed again when the mode ends).
    let _injection = (mode == Mode::Injected).then(|| super::inject::Injection::apply(cluster, &ns));
    ns.apply_kustomization(&overlay(mode));
    let old = Pod::wait_ready(&ns, SELECTOR, PODS, 120);
    let ip = ns.wait_service("web", PODS);
    let target: SocketAddr = format!("{ip}:80").parse().context("the Service's ClusterIP")?;

    // Watches first, so nothing they should see happens before them.
    let seen: Arc<Mutex<HashMap<String, Seen>>> = Arc::new(Mutex::new(
        old.iter().map(|p| (p.uid.clone(), Seen::default())).collect(),
    ));
    let ip_of: HashMap<String, String> = old.iter().map(|p| (p.ip.clone(), p.uid.clone())).collect();
    let (tx, rx) = mpsc::channel();
    let _pods = Watch::start(
        cluster,
        &["-n", &ns.name, "get", "pods", "-l", SELECTOR],
        tx.clone(),
    )?;
    let _endpoints = Watch::start(
        cluster,
        &[
            "-n",
            &ns.name,
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
        ],
        tx,
    )?;
    let collector = {
        let seen = seen.clone();
        std::thread::spawn(move || {
            // Each slice's ready addresses: the Service's are their union.
            let mut slices: HashMap<String, BTreeSet<String>> = HashMap::new();
            for (at, v) in rx {
                let mut seen = seen.lock().unwrap();
                match v["kind"].as_str() {
                    Some("Pod") if !v["metadata"]["deletionTimestamp"].is_null() => {
                        if let Some(s) = v["metadata"]["uid"].as_str().and_then(|u| seen.get_mut(u)) {
                            s.deleted.get_or_insert(at);
                        }
                    }
                    Some("EndpointSlice") => {
                        // Ready addresses only: kube-proxy sends no new
                        // connection to an endpoint that is not ready while
                        // others are.
                        let name = v["metadata"]["name"].as_str().unwrap_or_default().to_string();
                        slices.insert(name, service::ready_addresses(&v));
                        let ready: BTreeSet<&String> = slices.values().flatten().collect();
                        for (ip, uid) in &ip_of {
                            if !ready.contains(ip) {
                                if let Some(s) = seen.get_mut(uid).filter(|s| s.removed.is_none()) {
                                    s.removed = Some(at);
                                    s.removed_ns = Some(monotonic_ns() - at.elapsed().as_nanos() as u64);
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        })
    };
    // Each old app's exit: its container's cgroup empties.
    let exits: Vec<JoinHandle<(String, Option<Instant>)>> = old
        .iter()
        .map(|p| {
            let p = p.clone();
            std::thread::spawn(move || (p.uid.clone(), p.wait_exit("web", Duration::from_secs(180))))
        })
        .collect();

    let workers = load::workers_for(cfg.rate, Duration::from_millis(10));
    let load = cluster.on_node_load(target, cfg.rate, workers)?;
    std::thread::sleep(Duration::from_secs(1));

    let t0 = Instant::now();
    load.count_from_now();
    ns.kubectl(&["rollout", "restart", "deployment/web"]);
    ns.kubectl(&["rollout", "status", "deployment/web", "--timeout=180s"]);
    let mut exited = BTreeMap::new();
    for h in exits {
        let (uid, at) = h
            .join()
            .map_err(|_| anyhow::anyhow!("an exit watcher panicked"))?;
        let at = at.with_context(|| format!("pod {uid}'s app did not exit within 180 s"))?;
        exited.insert(uid, at);
    }
    let end = exited.values().copied().max().unwrap_or(t0);
    // A moment more for the requests that the last removal may fail.
    std::thread::sleep(Duration::from_millis(1500));
    let outcome = load.finish();
    if !outcome.warmup_failures.is_empty() {
        bail!(
            "{mode}: {} of {} requests failed in the second before the rollout, with kube-proxy's rules already \
             matching the Service's endpoints: {:?}",
            outcome.warmup_failures.values().sum::<u64>(),
            outcome.warmup_requests,
            outcome.warmup_failures
        );
    }
    drop(_pods);
    drop(_endpoints);
    collector
        .join()
        .map_err(|_| anyhow::anyhow!("the watch collector panicked"))?;

    let released = drain_reports(&ns, &old);
    let closes = termination_reports(cluster);
    // Every old pod is reported: the gated ones opted in, the others are
    // taken in by the test agent's --report-selector (tests/overlays/agent).
    if let Some(p) = old.iter().find(|p| !closes.contains_key(&p.uid)) {
        bail!(
            "{mode}: the agent did not report the terminating pod {}: {closes:?}",
            p.name
        );
    }
    let seen = seen.lock().unwrap().clone();
    let mut terminations = Vec::new();
    for p in &old {
        let s = &seen[&p.uid];
        let start = s
            .deleted
            .with_context(|| format!("the watch never showed {}'s deletion", p.name))?;
        let exit = exited[&p.uid];
        let secs = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
        // From the endpoint's removal to the pod's last inbound close (the
        // agent's record), for a pod still there when its endpoint left.
        let drain_s = match (s.removed, s.removed_ns, closes.get(&p.uid)) {
            (Some(removed), Some(removed_ns), Some(&close)) if exit > removed && close > 0 => {
                Some(close.saturating_sub(removed_ns) as f64 / 1e9)
            }
            _ => None,
        };
        terminations.push(Termination {
            pod: p.name.clone(),
            hook_s: 0.0,
            removed_s: s.removed.map_or(f64::NAN, secs),
            exited_s: secs(exit),
            served: 0,
            last_response_s: None,
            drain_s,
            released: released.get(&p.uid).cloned(),
        });
        eprintln!(
            "    {}: endpoint removed after {:.2} s, app exited after {:.2} s{}",
            p.name,
            s.removed.map_or(f64::NAN, secs),
            secs(exit),
            released
                .get(&p.uid)
                .map(|r| format!(" (graceful: {r})"))
                .unwrap_or_default()
        );
    }
    if mode.gated() && released.len() != old.len() {
        bail!(
            "{} of {} drains left a DrainReleased Event: {released:?}",
            released.len(),
            old.len()
        );
    }
    let removal: Vec<f64> = terminations
        .iter()
        .map(|t| t.removed_s)
        .filter(|s| s.is_finite())
        .collect();
    Ok(Run {
        mode,
        keepalive: false,
        propagation: Duration::from_secs_f64(removal.iter().sum::<f64>() / removal.len().max(1) as f64),
        load: outcome,
        terminations,
        total: end.saturating_duration_since(t0),
    })
}

/// Each terminating pod the agent reported on: uid → the kernel's time of
/// its last inbound close (0: none after the agent's start).
fn termination_reports(cluster: &Cluster) -> HashMap<String, u64> {
    let out = cluster.agent(&["drains", "-o", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["terminated"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some((
                t["uid"].as_str()?.to_string(),
                t["last_inbound_close_ns"].as_u64()?,
            ))
        })
        .collect()
}

/// Each old pod's drain report, from the Event graceful left on it:
/// `DrainReleased: held the SIGTERM of the pod for 2.6s: drained, ...`.
pub fn drain_reports(ns: &Namespace, pods: &[Pod]) -> HashMap<String, String> {
    let events = ns.json(&["get", "events"]);
    let mut out = HashMap::new();
    for e in events["items"].as_array().into_iter().flatten() {
        let uid = e["involvedObject"]["uid"].as_str().unwrap_or_default();
        let reason = e["reason"].as_str().unwrap_or_default();
        if !(reason == "DrainReleased" || reason == "DrainDeadline") || !pods.iter().any(|p| p.uid == uid) {
            continue;
        }
        let msg = e["message"].as_str().unwrap_or_default();
        let why = msg
            .split(": ")
            .nth(1)
            .and_then(|w| w.split(',').next())
            .unwrap_or(msg);
        out.insert(uid.to_string(), format!("{reason}: {why}"));
    }
    out
}

impl Cluster {
    /// The open-loop load, from the node's namespace.
    pub fn on_node_load(
        &self,
        target: impl Into<load::Target>,
        rate: u32,
        workers: usize,
    ) -> anyhow::Result<load::Load> {
        load::Load::start(&self.node, target, rate, false, workers)
    }
}
