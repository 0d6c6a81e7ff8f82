//! End-to-end tests on a real Kubernetes node: `cargo xtask cluster`'s
//! kubelet, containerd, API server and kube-proxy, with graceful's
//! DaemonSet from `deploy/base` on it. `cargo xtask test` brings the node up
//! before it runs them (the `cluster` feature), and down after.
//!
//! They run one at a time: they share the node and its one agent, and
//! several time terminations.

mod admission_hooks;
mod adopt;
mod agent_events;
mod agent_pod;
mod crash;
mod examples;
mod gate;
mod handover;
mod helm;
mod helm_lifecycle;
mod http_gate;
mod image;
mod inject;
mod krew;
mod kubectl_plugin;
mod mesh;
mod monitoring;
mod native_sidecars;
mod pod_security;
mod policy_opa;
mod preflight;
mod quickstart;
mod restart;
mod rollout;
mod seeds;
mod socket_gate;
mod tenants;

use graceful_tests::cluster::{pod_head, Cluster, TEST_APP_IMAGE};

pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A test's hold on the node: the others wait until it is dropped, and its
/// time on the node is printed then, so that CI's log has the suite's
/// split test by test; also appended to `$GRACEFUL_TURNS` when set, from
/// which `cargo xtask test` prints the longest.
pub struct Turn {
    _serial: std::sync::MutexGuard<'static, ()>,
    started: std::time::Instant,
}

impl Drop for Turn {
    fn drop(&mut self) {
        use std::io::Write as _;
        let name = std::thread::current().name().unwrap_or("?").to_string();
        let outcome = if std::thread::panicking() {
            "failed"
        } else {
            "passed"
        };
        // Straight to the process's stderr: the test harness captures
        // eprintln!, and this line is for the log whatever the outcome.
        let took = self.started.elapsed().as_secs_f64();
        let _ = writeln!(
            std::io::stderr(),
            "==> on the node: {name} {outcome} in {took:.1} s"
        );
        if let Some(path) = std::env::var_os("GRACEFUL_TURNS") {
            if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
                let _ = writeln!(f, "{took:.1}\t{name}");
            }
        }
    }
}

/// The node, with the test serialized against the others.
pub fn node() -> (Cluster, Turn) {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let started = std::time::Instant::now();
    (
        Cluster::get(),
        Turn {
            _serial: serial,
            started,
        },
    )
}

/// A pod of the test app (an HTTP server on 8080 that logs when SIGTERM
/// arrives) whose preStop hook is `hook` (graceful-wait's arguments, or
/// none), with the gate's host directory mounted as the examples do. No
/// probe: a probe's connections would be inbound traffic of their own.
pub fn app_pod(name: &str, hook: Option<&[&str]>, grace_s: u32) -> String {
    let lifecycle = match hook {
        Some(args) => {
            let cmd: Vec<String> = std::iter::once("/graceful/graceful-wait")
                .chain(args.iter().copied())
                .map(|a| format!("\"{a}\""))
                .collect();
            format!(
                "      lifecycle:\n        preStop:\n          exec:\n            command: [{}]\n",
                cmd.join(", ")
            )
        }
        None => String::new(),
    };
    format!(
        r#"{head}spec:
  terminationGracePeriodSeconds: {grace_s}
  containers:
    - name: app
      image: {TEST_APP_IMAGE}
      ports: [{{containerPort: 8080}}]
{lifecycle}      volumeMounts:
        - {{name: graceful, mountPath: /graceful, readOnly: true}}
  volumes:
    - name: graceful
      hostPath: {{path: /var/run/graceful, type: DirectoryOrCreate}}
"#,
        head = pod_head(name, &format!("{{app: {name}}}"))
    )
}
