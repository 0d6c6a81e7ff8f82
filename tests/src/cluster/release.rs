//! How long after a deleted pod's last inbound close its app receives
//! SIGTERM, on the real kubelet, three ways side by side:
//!
//! - graceful's exec gate (`graceful-wait --policy drained --settle 0s`);
//! - a 1 s poller in the pod's preStop hook, what Envoy-based shutdown
//!   managers do: it reads the pod's sockets (`/proc/net/tcp`) once a
//!   second until no connection to the app's port is established;
//! - `preStop: sleep`, the guess teams write today.
//!
//! Each round creates a batch of pods of each kind, connects two clients
//! to each from the node, deletes them all, and once every hook is under
//! way (the agent lists the gate's drains; the others have had two
//! seconds) closes each pod's clients in turn. The app stamps its own SIGTERM on
//! CLOCK_MONOTONIC, the clock the close is stamped on too. What is timed
//! is the whole path: kernel → agent → gate → hook exits → the kubelet sees
//! the hook end → the runtime sends SIGTERM.

use std::{collections::BTreeMap, fmt, time::Duration};

use graceful::bpf::loader::monotonic_ns;

use super::{clients::Clients, pod::Pod, Cluster, Namespace, TEST_APP_IMAGE};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hook {
    Graceful,
    Poller,
    Sleep,
}

impl Hook {
    pub const ALL: [Hook; 3] = [Hook::Graceful, Hook::Poller, Hook::Sleep];

    fn prefix(self) -> &'static str {
        match self {
            Hook::Graceful => "gate",
            Hook::Poller => "poll",
            Hook::Sleep => "sleep",
        }
    }

    fn command(self, sleep: Duration) -> String {
        match self {
            Hook::Graceful => {
                r#"["/graceful/graceful-wait", "--policy", "drained", "--settle", "0s", "--min", "0s", "--max", "30s"]"#
                    .into()
            }
            // An established connection to port 8080 (0x1F90): state 01.
            Hook::Poller => r#"["sh", "-c", "while grep -qE '^ *[0-9]+: [0-9A-F]+:1F90 [0-9A-F]+:[0-9A-F]+ 01 ' /proc/net/tcp /proc/net/tcp6; do sleep 1; done"]"#.into(),
            Hook::Sleep => format!(r#"["sleep", "{}"]"#, sleep.as_secs()),
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hook::Graceful => "graceful (exec gate, settle 0)",
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
}

fn pod_yaml(name: &str, hook: Hook, sleep: Duration) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: NAMESPACE
  labels: {{bench: release}}
spec:
  terminationGracePeriodSeconds: 45
  containers:
    - name: app
      image: {TEST_APP_IMAGE}
      lifecycle:
        preStop:
          exec:
            command: {cmd}
      volumeMounts:
        - {{name: graceful, mountPath: /graceful, readOnly: true}}
  volumes:
    - name: graceful
      hostPath: {{path: /var/run/graceful, type: DirectoryOrCreate}}
---
"#,
        cmd = hook.command(sleep)
    )
}

/// Milliseconds from the last close to SIGTERM, per hook.
pub fn measure(cluster: &Cluster, cfg: &Config) -> BTreeMap<Hook, Vec<f64>> {
    let ns = Namespace::create(cluster, "release-bench");
    let mut out: BTreeMap<Hook, Vec<f64>> = BTreeMap::new();
    for round in 0..cfg.rounds {
        let mut yaml = String::new();
        let mut names = Vec::new();
        for hook in Hook::ALL {
            for i in 0..cfg.batch {
                let name = format!("{}-{round}-{i}", hook.prefix());
                yaml += &pod_yaml(&name, hook, cfg.sleep);
                names.push((hook, name));
            }
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
            if *hook == Hook::Graceful {
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
        // One pod's clients at a time, a quarter second apart (the gate's
        // and the poller's in turn): each release is timed alone, as a
        // rolling update's one-at-a-time terminations are, not in a burst
        // of fifteen on a two-core node.
        let mut order: Vec<usize> = (0..held.len()).collect();
        order.sort_by_key(|&i| (held[i].0 == Hook::Sleep, i % cfg.batch, held[i].0));
        let mut closed = vec![0u64; held.len()];
        for i in order {
            held[i].2.close();
            closed[i] = monotonic_ns();
            if held[i].0 != Hook::Sleep {
                std::thread::sleep(Duration::from_millis(250));
            }
        }
        for ((hook, p, _, log), closed_ns) in held.iter_mut().zip(closed) {
            let limit = cfg.sleep.as_secs() + 45;
            let sigterm = crate::wait_for(limit, "the app's SIGTERM", || sigterm_ns(log));
            let ms = sigterm.saturating_sub(closed_ns) as f64 / 1e6;
            eprintln!(
                "    round {round}: {} {hook}: SIGTERM {ms:.1} ms after the last close",
                p.name
            );
            out.entry(*hook).or_default().push(ms);
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
