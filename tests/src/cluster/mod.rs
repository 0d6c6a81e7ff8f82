//! The test node of `cargo xtask cluster`, as the end-to-end tests and the
//! cluster benchmarks use it: kubectl against its API server, the node's
//! network namespace (where Services resolve through kube-proxy), pods'
//! cgroups and namespaces on this host, and test namespaces deleted on drop.
//!
//! `cargo xtask test` brings the node up and points `GRACEFUL_KUBECONFIG`
//! at it; without that variable the node's default kubeconfig
//! (`target/cluster/kubeconfig`) is used.

pub mod clients;
pub mod forward;
pub mod helm;
pub mod inject;
pub mod late_lb;
pub mod pod;
pub mod prometheus;
pub mod registry;
pub mod release;
pub mod rollout;
pub mod service;

use std::{
    path::PathBuf,
    process::{Command, Output, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    time::{Duration, Instant},
};

use crate::netns::NetNs;

/// The names `cargo xtask cluster` gives its node (lab/src/cluster/mod.rs).
pub const NODE_NETNS: &str = "/run/netns/graceful-node";
pub const NODE_IP: &str = "10.201.0.1";
pub const AGENT_NAMESPACE: &str = "graceful-system";
pub const AGENT_SELECTOR: &str = "app.kubernetes.io/name=graceful";
/// The agent pod's ports (deploy/base): `--metrics-addr` on the pod's
/// address, `--api-addr` on its loopback.
pub const AGENT_METRICS_PORT: u16 = 9464;
pub const AGENT_API_PORT: u16 = 9465;
/// The node's containerd (lab/src/cluster/mod.rs, `Paths::containerd_sock`).
pub const CONTAINERD_SOCK: &str = "/run/graceful-cluster/containerd.sock";
/// The agent's image, as deploy/base names it and the cluster imports it.
pub const AGENT_IMAGE: &str = concat!("docker.io/graceful/agent:", env!("CARGO_PKG_VERSION"));
/// Image names the cluster imports (lab/src/cluster/images.rs).
pub const TEST_APP_IMAGE: &str = "localhost/graceful-test/app:0.1.0";
pub const BUSYBOX_IMAGE: &str = "localhost/busybox:bookworm";

pub struct Cluster {
    pub kubeconfig: PathBuf,
    /// The node's network namespace: kube-proxy's rules apply here.
    pub node: NetNs,
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

impl Cluster {
    /// The running node; panics, saying how to start one, if it is not up.
    pub fn get() -> Cluster {
        let kubeconfig = std::env::var_os("GRACEFUL_KUBECONFIG")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace().join("target/cluster/kubeconfig"));
        assert!(
            kubeconfig.exists(),
            "no test node: {} is missing. `cargo xtask test` brings one up, or `cargo xtask cluster up`",
            kubeconfig.display()
        );
        let node = NetNs::open(NODE_NETNS).unwrap_or_else(|e| {
            panic!("no test node: {NODE_NETNS}: {e}. `cargo xtask cluster up` starts one")
        });
        let c = Cluster { kubeconfig, node };
        let ready = c.try_kubectl(&[
            "get",
            "node",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        assert!(
            matches!(ready.as_deref(), Ok("True")),
            "the test node is not Ready ({ready:?}): `cargo xtask cluster status` says why"
        );
        c
    }

    /// The kubelet's log (`cargo xtask cluster` keeps it beside the
    /// kubeconfig, in `logs/`).
    pub fn kubelet_log(&self) -> String {
        let log = self
            .kubeconfig
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join("logs/kubelet.log");
        std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()))
    }

    pub fn kubectl_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    /// kubectl's stdout, or its stderr as the error.
    pub fn try_kubectl(&self, args: &[&str]) -> Result<String, String> {
        let out = self
            .kubectl_cmd(args)
            .output()
            .map_err(|e| format!("kubectl: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
        } else {
            Err(format!(
                "kubectl {args:?}: {}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            ))
        }
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        self.try_kubectl(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `kubectl ARGS -o json`, parsed.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&a)).expect("kubectl printed JSON")
    }

    /// kubectl with `input` on its stdin, and what it printed.
    pub fn kubectl_stdin(&self, args: &[&str], input: &str) -> Output {
        crate::output_with_stdin(&mut self.kubectl_cmd(args), input)
    }

    /// `kubectl apply -f -` with `yaml` on stdin.
    pub fn apply(&self, yaml: &str) {
        let out = self.kubectl_stdin(&["apply", "-f", "-"], yaml);
        assert!(
            out.status.success(),
            "kubectl apply failed: {}\n{yaml}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `graceful ARGS` inside the agent's pod (`kubectl exec ds/graceful`).
    pub fn agent(&self, args: &[&str]) -> Output {
        let mut a = vec!["-n", AGENT_NAMESPACE, "exec", "ds/graceful", "--", "/graceful"];
        a.extend(args);
        self.kubectl_cmd(&a).output().expect("kubectl exec")
    }

    /// `ctr images <args>` in the node's containerd (the kubelet's `k8s.io`
    /// namespace): tag, remove.
    pub fn images(&self, args: &[&str]) {
        self.try_images(args).unwrap_or_else(|e| panic!("{e}"));
    }

    /// [`Cluster::images`], for clean-up paths that must not panic.
    pub fn try_images(&self, args: &[&str]) -> Result<(), String> {
        let out = Command::new("ctr")
            .args(["--address", CONTAINERD_SOCK, "-n", "k8s.io", "images"])
            .args(args)
            .output()
            .map_err(|e| format!("ctr (the node's programs come first on PATH): {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "ctr images {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// `GET path` (HTTP/1.0) from inside the node's namespace to `addr`:
    /// the body of a 200 answer, or the status line and body.
    pub fn get_on_node(&self, addr: std::net::SocketAddr, path: &str) -> Result<String, String> {
        use std::io::{Read as _, Write as _};
        let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        let raw = self.on_node(move || -> std::io::Result<String> {
            let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
            s.set_read_timeout(Some(Duration::from_secs(20)))?;
            s.write_all(request.as_bytes())?;
            let mut raw = String::new();
            s.read_to_string(&mut raw)?;
            Ok(raw)
        });
        let raw = raw.map_err(|e| e.to_string())?;
        let (head, body) = raw
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("no HTTP answer: {raw}"))?;
        if head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200") {
            Ok(body.to_string())
        } else {
            Err(format!("{}: {body}", head.lines().next().unwrap_or_default()))
        }
    }

    /// deploy/base's agent as the suite runs it (tests/overlays/agent),
    /// applied, and its rollout waited for: how a test that took the agent
    /// away puts it back (from a Drop: errors are returned, not raised).
    pub fn restore_agent(&self) -> Result<(), String> {
        let overlay = workspace().join("tests/overlays/agent");
        self.try_kubectl(&["apply", "-k", overlay.to_str().unwrap()])?;
        self.agent_rollout()
    }

    /// Waits for the agent DaemonSet's rollout (up to 3 minutes).
    pub fn agent_rollout(&self) -> Result<(), String> {
        self.try_kubectl(&[
            "-n",
            AGENT_NAMESPACE,
            "rollout",
            "status",
            "ds/graceful",
            "--timeout=180s",
        ])
        .map(drop)
    }

    /// Rolls the agent's DaemonSet to `image` and waits for the rollout:
    /// the node's one agent pod is then the new one, ready.
    pub fn roll_agent_to(&self, image: &str) -> String {
        let before = self.agent_pod(60);
        self.kubectl(&[
            "-n",
            AGENT_NAMESPACE,
            "set",
            "image",
            "ds/graceful",
            &format!("agent={image}"),
        ]);
        self.agent_rollout().unwrap_or_else(|e| panic!("{e}"));
        self.agent_replaced(&before)
    }

    /// Every agent pod's name, those being deleted too.
    pub fn agent_pods(&self) -> Vec<String> {
        let pods = self.json(&["-n", AGENT_NAMESPACE, "get", "pods", "-l", AGENT_SELECTOR]);
        pods["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
            .collect()
    }

    /// Waits until the agent pod `before` is gone and one other is left,
    /// ready (a rollout of the DaemonSet, with its handover); its name.
    pub fn agent_replaced(&self, before: &str) -> String {
        crate::wait_for(180, "the old agent pod to be replaced", || {
            let names = self.agent_pods();
            (names.len() == 1 && names[0] != before).then_some(())
        });
        self.agent_pod(60)
    }

    /// The agent pod's name, once exactly one is ready.
    pub fn agent_pod(&self, secs: u64) -> String {
        crate::wait_for(secs, "graceful's agent pod to be ready", || {
            let pods = self.json(&["-n", AGENT_NAMESPACE, "get", "pods", "-l", AGENT_SELECTOR]);
            let ready: Vec<&serde_json::Value> = pods["items"]
                .as_array()?
                .iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && pod::is_ready(p))
                .collect();
            (ready.len() == 1).then(|| ready[0]["metadata"]["name"].as_str().unwrap().to_string())
        })
    }

    /// Runs `f` on a thread inside the node's network namespace.
    pub fn on_node<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let fd = self.node.fd();
        std::thread::spawn(move || {
            // SAFETY: setns(2) on this thread only; the fd stays open (self outlives the join).
            assert_eq!(
                unsafe { libc::setns(fd, libc::CLONE_NEWNET) },
                0,
                "setns into the node"
            );
            f()
        })
        .join()
        .expect("a thread in the node's namespace panicked")
    }
}

/// A namespace of the test's own; deleted (with everything in it) on drop.
pub struct Namespace<'a> {
    pub name: String,
    cluster: &'a Cluster,
}

impl<'a> Namespace<'a> {
    pub fn create(cluster: &'a Cluster, what: &str) -> Namespace<'a> {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "e2e-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        cluster.kubectl(&["create", "namespace", &name]);
        // Pods need the ServiceAccount the controller-manager makes.
        crate::wait_for(30, "the namespace's default ServiceAccount", || {
            cluster
                .try_kubectl(&["-n", &name, "get", "serviceaccount", "default"])
                .ok()
        });
        Namespace { name, cluster }
    }

    /// `kubectl -n NAME ARGS`.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend(args);
        self.cluster.kubectl(&a)
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend(args);
        self.cluster.json(&a)
    }

    /// `kubectl apply -k DIR -n NAME`. The examples' `web` Service has a
    /// fixed ClusterIP (the node runs no DNS): v1.20 may have given it, at
    /// random, to another Service of the same apply, or the last test's
    /// may still hold it. Then this namespace's Services go and the apply
    /// is tried again, for half a minute.
    pub fn apply_kustomization(&self, dir: &std::path::Path) {
        let dir = dir.to_string_lossy();
        let a = ["-n", self.name.as_str(), "apply", "-k", &dir];
        for _ in 0..30 {
            match self.cluster.try_kubectl(&a) {
                Ok(_) => return,
                Err(e) if e.contains("provided IP is already allocated") => {
                    eprintln!("{}: a fixed ClusterIP is taken; trying again: {e}", self.name);
                    let _ = self
                        .cluster
                        .try_kubectl(&["-n", &self.name, "delete", "services", "--all"]);
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err(e) => panic!("{e}"),
            }
        }
        self.cluster.kubectl(&a);
    }

    pub fn apply(&self, yaml: &str) {
        self.cluster.apply(&yaml.replace("NAMESPACE", &self.name));
    }

    /// Whether the API no longer has the pod `name`.
    pub fn pod_gone(&self, name: &str) -> bool {
        let selector = format!("metadata.name={name}");
        self.kubectl(&["get", "pods", "--field-selector", &selector, "-o", "name"])
            .is_empty()
    }
}

impl Drop for Namespace<'_> {
    fn drop(&mut self) {
        // Pods first, at once: their hooks would otherwise hold the
        // namespace's deletion for their grace periods.
        let _ = self.cluster.try_kubectl(&[
            "-n",
            &self.name,
            "delete",
            "pods",
            "--all",
            "--grace-period=0",
            "--force",
        ]);
        let _ =
            self.cluster
                .try_kubectl(&["delete", "namespace", &self.name, "--wait=true", "--timeout=120s"]);
    }
}

/// Seconds and milliseconds from `t0`.
/// The head of a test pod's manifest, up to its `labels` (YAML flow, as
/// `{app: x}`), in the namespace [`Namespace::apply`] puts it in.
pub fn pod_head(name: &str, labels: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: NAMESPACE\n  labels: {labels}\n"
    )
}

pub fn since_ms(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1000.0
}

/// Polls `f` every 5 ms until it returns Some, for at most `limit`.
pub fn poll<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
