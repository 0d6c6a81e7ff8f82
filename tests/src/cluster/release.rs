//! How long after a deleted pod's last inbound close its app receives
//! SIGTERM, on the real kubelet, five ways side by side:
//!
//! - graceful's three gates, each `--policy drained --settle 0s`: the exec
//!   gate (`graceful-wait` from the gate directory), the httpGet gate (the
//!   kubelet's own request to the agent's listener in the pod) and the
//!   socket gate (`graceful-wait` from an image volume of the agent's
//!   image, on the agent's abstract socket in the pod);
//! - a 1 s poller in the pod's preStop hook, what Envoy-based shutdown
//!   managers do: it reads the pod's sockets (`/proc/net/tcp`) once a
//!   second until no connection to the app's port is established;
//! - `preStop: sleep`, the guess teams write today.
//!
//! The kinds take turns, in one run. Each turn creates a batch of pods of
//! one kind, connects two clients to each from the node, deletes them all,
//! and once every hook is under way (the agent lists the gate's drains;
//! the others have had two seconds) closes each pod's clients in turn. The app stamps its own SIGTERM on
//! CLOCK_MONOTONIC, the clock the close is stamped on too. What is timed
//! is the whole path: kernel → agent → gate → hook exits → the kubelet sees
//! the hook end → the runtime sends SIGTERM.

use std::{collections::BTreeMap, fmt, time::Duration};

use crate::monotonic_ns;

use super::{clients::Clients, pod::Pod, pod_head, Cluster, Namespace, AGENT_IMAGE, TEST_APP_IMAGE};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hook {
    Graceful,
    HttpGate,
    SocketGate,
    Poller,
    Sleep,
}

/// graceful-wait's flags for every gate here: released at the last close.
const WAIT: &str = r#""--policy", "drained", "--settle", "0s", "--min", "0s", "--max", "30s""#;

impl Hook {
    pub const ALL: [Hook; 5] = [
        Hook::Graceful,
        Hook::HttpGate,
        Hook::SocketGate,
        Hook::Poller,
        Hook::Sleep,
    ];

    /// One of graceful's gates, whose drains the agent lists.
    pub fn gated(self) -> bool {
        matches!(self, Hook::Graceful | Hook::HttpGate | Hook::SocketGate)
    }

    fn prefix(self) -> &'static str {
        match self {
            Hook::Graceful => "gate",
            Hook::HttpGate => "http",
            Hook::SocketGate => "socket",
            Hook::Poller => "poll",
            Hook::Sleep => "sleep",
        }
    }

    /// The pod's annotations, its hook, and its gate volume.
    fn parts(self, sleep: Duration) -> (&'static str, String, String) {
        let exec = |cmd: String| format!("exec:\n            command: {cmd}");
        let dir =
            "{name: graceful, hostPath: {path: /var/run/graceful, type: DirectoryOrCreate}}".to_string();
        match self {
            Hook::Graceful => ("{}", exec(format!(r#"["/graceful/graceful-wait", {WAIT}]"#)), dir),
            Hook::HttpGate => (
                "{graceful.dev/gate: http}",
                "httpGet: {path: \"/drain?policy=drained&settle=0s&min=0s&max=30s\", port: 9711}".into(),
                dir,
            ),
            Hook::SocketGate => (
                "{graceful.dev/gate: socket}",
                exec(format!(r#"["/graceful/graceful-wait", "--socket", "@graceful.dev/gate", {WAIT}]"#)),
                format!("{{name: graceful, image: {{reference: \"{AGENT_IMAGE}\", pullPolicy: IfNotPresent}}}}"),
            ),
            // An established connection to port 8080 (0x1F90): state 01.
            Hook::Poller => ("{}", exec(r#"["sh", "-c", "while grep -qE '^ *[0-9]+: [0-9A-F]+:1F90 [0-9A-F]+:[0-9A-F]+ 01 ' /proc/net/tcp /proc/net/tcp6; do sleep 1; done"]"#.into()), dir),
            Hook::Sleep => ("{}", exec(format!(r#"["sleep", "{}"]"#, sleep.as_secs())), dir),
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hook::Graceful => "graceful: exec gate",
            Hook::HttpGate => "graceful: httpGet gate",
            Hook::SocketGate => "graceful: socket gate",
            Hook::Poller => "1 s poller in the hook",
            Hook::Sleep => "preStop: sleep",
        })
    }
}

pub struct Config {
    pub rounds: usize,
    /// Pods of each kind per round.
    pub batch: usize,
    pub sleep: Duration,
    /// Between one pod's clients closing and the next's.
    pub spacing: Duration,
}

fn pod_yaml(name: &str, hook: Hook, sleep: Duration) -> String {
    let (annotations, pre_stop, volume) = hook.parts(sleep);
    format!(
        r#"{head}  annotations: {annotations}
spec:
  terminationGracePeriodSeconds: 45
  containers:
    - name: app
      image: {TEST_APP_IMAGE}
      lifecycle:
        preStop:
          {pre_stop}
      volumeMounts:
        - {{name: graceful, mountPath: /graceful, readOnly: true}}
  volumes:
    - {volume}
---
"#,
        head = pod_head(name, "{bench: release}"),
    )
}

/// What one round measured.
#[derive(Default)]
pub struct Figures {
    /// Milliseconds from the last close to SIGTERM, per hook.
    pub sigterm_ms: BTreeMap<Hook, Vec<f64>>,
    /// For each gate: from the last close to the agent's release (its
    /// report's `release_ns`), and from there to SIGTERM (the hook's exit
    /// or the answer to the kubelet's request, the kubelet, the runtime).
    pub agent_ms: BTreeMap<Hook, Vec<f64>>,
    pub kubelet_ms: BTreeMap<Hook, Vec<f64>>,
}

/// The agent's release times (CLOCK_MONOTONIC ns) of the drains it
/// released, by pod uid.
fn releases(cluster: &Cluster) -> BTreeMap<String, u64> {
    let out = cluster.agent(&["drains", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["released"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| Some((d["pod"].as_str()?.to_string(), d["release_ns"].as_u64()?)))
        .collect()
}

pub fn measure(cluster: &Cluster, cfg: &Config) -> Figures {
    let ns = Namespace::create(cluster, "release-bench");
    let mut out = Figures::default();
    // The kinds take turns, round by round, in one run: each batch is
    // timed with no other kind's terminations beside it.
    for (round, hook) in (0..cfg.rounds).flat_map(|r| Hook::ALL.map(|h| (r, h))) {
        let mut yaml = String::new();
        let mut names = Vec::new();
        for i in 0..cfg.batch {
            let name = format!("{}-{round}-{i}", hook.prefix());
            yaml += &pod_yaml(&name, hook, cfg.sleep);
            names.push((hook, name));
        }
        ns.apply(&yaml);
        let pods: Vec<(Hook, Pod)> = names
            .iter()
            .map(|(hook, name)| (*hook, wait_pod(&ns, name)))
            .collect();
        let mut held: Vec<(Hook, Pod, Clients, super::pod::Log)> = pods
            .into_iter()
            .map(|(hook, p)| {
                let c = Clients::open(cluster, format!("{}:8080", p.ip).parse().unwrap(), 2);
                let log = p.open_log("app");
                (hook, p, c, log)
            })
            .collect();
        let mut del = vec!["delete", "pods", "--wait=false"];
        del.extend(names.iter().map(|(_, n)| n.as_str()));
        ns.kubectl(&del);
        let started = std::time::Instant::now();
        for (hook, p, _, _) in &held {
            if hook.gated() {
                crate::wait_for(30, "the gate's drain to be engaged", || {
                    let out = cluster.agent(&["drains", "-o", "json"]);
                    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
                    v["active"]
                        .as_array()?
                        .iter()
                        .any(|d| d["pod"] == p.uid.as_str())
                        .then_some(())
                });
            }
        }
        std::thread::sleep(Duration::from_secs(2).saturating_sub(started.elapsed()));
        // One pod's clients at a time, `spacing` apart: each release
        // is timed alone, as a rolling update's one-at-a-time terminations
        // come, not in a burst on a two-core node.
        let mut closed = Vec::new();
        for (_, _, c, _) in held.iter_mut() {
            c.close();
            closed.push(monotonic_ns());
            std::thread::sleep(cfg.spacing);
        }
        let mut sigterms = Vec::new();
        for (_, _, _, log) in held.iter_mut() {
            let limit = cfg.sleep.as_secs() + 45;
            sigterms.push(crate::wait_for(limit, "the app's SIGTERM", || sigterm_ns(log)));
        }
        let released = releases(cluster);
        for (((hook, p, _, _), closed_ns), sigterm) in held.iter().zip(closed).zip(sigterms) {
            let ms = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1e6;
            let total = ms(closed_ns, sigterm);
            let mut split = String::new();
            if let (true, Some(&rel)) = (hook.gated(), released.get(&p.uid)) {
                out.agent_ms.entry(*hook).or_default().push(ms(closed_ns, rel));
                out.kubelet_ms.entry(*hook).or_default().push(ms(rel, sigterm));
                split = format!(
                    " (the agent released it after {:.2} ms, SIGTERM {:.1} ms later)",
                    ms(closed_ns, rel),
                    ms(rel, sigterm)
                );
            }
            eprintln!(
                "    round {round}: {} {hook}: SIGTERM {total:.1} ms after the last close{split}",
                p.name
            );
            out.sigterm_ms.entry(*hook).or_default().push(total);
        }
    }
    out
}

fn wait_pod(ns: &Namespace, name: &str) -> Pod {
    crate::wait_for(120, "a bench pod to run", || {
        let v = ns.json(&["get", "pod", name]);
        super::pod::is_ready(&v).then(|| Pod::from_json(&v))
    })
}

/// The app's own record of its SIGTERM, from its log (CLOCK_MONOTONIC).
pub fn sigterm_ns(log: &mut super::pod::Log) -> Option<u64> {
    log.lines().iter().find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        v["sigterm_monotonic_ns"].as_u64()
    })
}

/// `p` in [0, 100] of sorted `v`.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}
