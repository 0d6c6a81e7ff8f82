//! `cargo xtask cluster up | down | status`: a real Kubernetes node on this
//! machine: Kubernetes 1.33 to 1.37 (1.37 by default) on containerd 2, built
//! here from their published Go modules.
//!
//! - [`build`]: the node's programs, by version, cached; [`gomod`] builds
//!   each from its module.
//! - [`node`]: the node's network namespace, where every cluster process
//!   runs, so kube-proxy's iptables rules, the CNI bridge and the pods'
//!   veths live there and go away with it; the host's network is untouched.
//!   The host reaches the API server through [`forward`] on loopback.
//! - [`pki`]: a CA and the certificates of each component (TLS, RBAC on).
//! - [`config`]: containerd's, the CNI's, the kubelet's and kube-proxy's.
//! - [`daemons`]: etcd, the control plane, containerd, the kubelet and
//!   kube-proxy, each a process in the cluster's own cgroup with a pidfile
//!   and a log.
//! - [`images`]: the images pods run, written as archives from the
//!   project's own static binaries and Debian's, imported into containerd.
//! - [`down`]: everything the cluster made, removed, also after a failed `up`.

mod archive;
pub mod build;
mod config;
mod daemons;
mod deploy;
mod down;
mod footprint;
pub mod forward;
mod gomod;
mod images;
mod kubectl;
mod node;
mod pki;
mod rootfs;
mod status;

use std::{
    fs,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use xtask::util;

/// The node's network namespace (`ip netns` name) and the node's name.
pub const NETNS: &str = "graceful-node";
pub const NODE_NAME: &str = "graceful-node";
/// The node's address, on an interface of its own inside [`NETNS`]: the
/// kubelet refuses a loopback node IP, and the API server advertises it.
pub const NODE_IP: &str = "10.201.0.1";
pub const POD_CIDR: &str = "10.202.0.0/24";
pub const SERVICE_CIDR: &str = "10.203.0.0/24";
/// The `kubernetes` Service's ClusterIP (the first of [`SERVICE_CIDR`]).
pub const KUBERNETES_SERVICE_IP: &str = "10.203.0.1";
pub const API_PORT: u16 = 6443;
/// Where the host's kubectl reaches the API server ([`forward`]).
pub const HOST_API: &str = "127.0.0.1:16443";
/// State that must not live in the target directory: containerd's
/// socket and state, and what `up` changed on the host for `down` to undo.
pub const RUN_DIR: &str = "/run/graceful-cluster";
/// The cgroup (under the cgroup2 root) of every process the cluster starts.
pub const CGROUP: &str = "graceful-cluster";
/// The pin directory of the DaemonSet's agent (its default).
pub const AGENT_PINS: &str = "/sys/fs/bpf/graceful";
/// The DaemonSet's gate directory on the host (its hostPath).
pub const GATE_DIR: &str = "/var/run/graceful";

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, clap::Subcommand)]
enum Cmd {
    /// Build (once) and start the node, import the images, deploy graceful's DaemonSet from
    /// deploy/base; returns once the node is Ready and the agent is ready. Idempotent.
    Up {
        /// The Kubernetes release: a minor (1.33 to 1.37, each at the patch release tested
        /// here) or that exact patch release. Default: $GRACEFUL_KUBE_VERSION, else 1.37.
        #[arg(long)]
        version: Option<String>,
    },
    /// Build (once) the node's programs only: Kubernetes, containerd 2, crictl and etcd from
    /// their Go modules, cached in the tools directory by version.
    Build {
        /// As for `up`.
        #[arg(long)]
        version: Option<String>,
    },
    /// Stop and remove everything the cluster made: processes, mounts, cgroups, network
    /// namespaces (with their iptables rules and bridge), pins and directories.
    Down,
    /// What runs, and whether the node and the agent are ready. Exit status 0 when all is up.
    Status,
    /// For a task run against the running node: `GRACEFUL_KUBECONFIG=...` and `PATH=...` (its
    /// programs first), one per line. Fails if the node is not up.
    Env,
}

/// Where the cluster keeps its files: `target/cluster`.
#[derive(Debug, Clone)]
pub struct Paths {
    pub root: PathBuf,
}

impl Paths {
    pub fn new() -> Paths {
        Paths {
            root: util::target_dir().join("cluster"),
        }
    }
    /// The admin kubeconfig for the host (through [`HOST_API`]).
    pub fn kubeconfig(&self) -> PathBuf {
        self.root.join("kubeconfig")
    }
    /// kubectl's discovery and HTTP cache for this node (`KUBECACHEDIR`):
    /// beside the kubeconfig, so `down` takes it with the rest, instead of
    /// the user's `~/.kube/cache`.
    pub fn kube_cache(&self) -> PathBuf {
        self.root.join("kube-cache")
    }
    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    pub fn etc(&self) -> PathBuf {
        self.root.join("etc")
    }
    pub fn images(&self) -> PathBuf {
        self.root.join("images")
    }
    pub fn etcd_data(&self) -> PathBuf {
        self.root.join("etcd")
    }
    pub fn containerd_root(&self) -> PathBuf {
        self.root.join("containerd")
    }
    pub fn run(&self) -> PathBuf {
        PathBuf::from(RUN_DIR)
    }
    pub fn containerd_sock(&self) -> PathBuf {
        self.run().join("containerd.sock")
    }
    /// The Kubernetes release the node was brought up at.
    pub fn version_file(&self) -> PathBuf {
        self.root.join("version")
    }
    pub fn pidfile(&self, name: &str) -> PathBuf {
        self.run().join(format!("{name}.pid"))
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    util::require_root("cargo xtask cluster")?;
    let paths = Paths::new();
    match args.cmd {
        Cmd::Up { version } => up(&paths, &version.unwrap_or_else(default_version)).map(|_| 0),
        Cmd::Build { version } => build::ensure(&version.unwrap_or_else(default_version)).map(|_| 0),
        Cmd::Down => down::run(&paths).map(|_| 0),
        Cmd::Status => status::run(&paths),
        Cmd::Env => env(&paths).map(|_| 0),
    }
}

/// Prints what points a command at the running node (see [`Session::point`]).
fn env(paths: &Paths) -> anyhow::Result<()> {
    anyhow::ensure!(
        is_up(paths),
        "the test node is not up: `cargo xtask cluster up` first"
    );
    let version = fs::read_to_string(paths.version_file())
        .with_context(|| format!("the running node's version ({})", paths.version_file().display()))?;
    let kube = build::built(version.trim())?;
    println!("GRACEFUL_KUBECONFIG={}", paths.kubeconfig().display());
    println!("KUBECACHEDIR={}", paths.kube_cache().display());
    println!("PATH={}", kube.path_env());
    Ok(())
}

/// The release a node is built at unless a command names one:
/// `$GRACEFUL_KUBE_VERSION`, else [`build::DEFAULT`].
pub fn default_version() -> String {
    std::env::var("GRACEFUL_KUBE_VERSION")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| build::DEFAULT.to_string())
}

/// Brings the node up at Kubernetes `version` (each step skips what already
/// runs) and returns its programs.
pub fn up(paths: &Paths, version: &str) -> anyhow::Result<build::Kube> {
    let t0 = Instant::now();
    xtask::setup::run()?;
    let kube = build::ensure(version)?;
    if is_up(paths) {
        let running = fs::read_to_string(paths.version_file()).unwrap_or_default();
        anyhow::ensure!(
            running.trim() == kube.version,
            "the node runs Kubernetes {} already, not {}: `cargo xtask cluster down` first",
            running.trim(),
            kube.version
        );
    }
    let bins = images::Binaries::build()?;

    let result = (|| {
        footprint::Footprint::record_once(paths)?;
        node::ensure(paths)?;
        pki::ensure(paths)?;
        config::write(paths, &kube)?;
        fs::write(paths.version_file(), format!("{}\n", kube.version))?;
        daemons::start_all(paths, &kube, &bins)?;
        Ok::<_, anyhow::Error>(())
    })();
    if let Err(e) = result {
        return Err(e.context(format!(
            "the cluster did not come up; its logs are in {} (`cargo xtask cluster down` removes what it made)",
            paths.logs().display()
        )));
    }
    println!(
        "==> the node (Kubernetes v{}) is Ready and graceful's DaemonSet is ready ({:.0} s)\n    export KUBECONFIG={}\n    export PATH={}",
        kube.version,
        t0.elapsed().as_secs_f64(),
        paths.kubeconfig().display(),
        kube.path_env(),
    );
    Ok(kube)
}

/// Whether every node process runs (the node may still be starting).
pub fn is_up(paths: &Paths) -> bool {
    node::exists()
        && daemons::ORDER
            .iter()
            .all(|n| daemons::running(paths, n).is_some())
}

/// The node for a task that needs it: brought up if it was down, and then
/// taken down again by [`Session::end`] (a node that ran before stays).
pub struct Session {
    pub paths: Paths,
    pub kubeconfig: PathBuf,
    /// The node's programs: `kube.path_env()` puts its kubectl first.
    pub kube: build::Kube,
    started: bool,
}

impl Session {
    pub fn begin() -> anyhow::Result<Session> {
        let paths = Paths::new();
        let started = !is_up(&paths);
        let kube = up(&paths, &default_version())?;
        Ok(Session {
            kubeconfig: paths.kubeconfig(),
            paths,
            kube,
            started,
        })
    }

    /// Points `cmd` at the node: its kubeconfig (`GRACEFUL_KUBECONFIG`) and
    /// its programs first on PATH (the tests' kubectl is the node's).
    pub fn point(&self, cmd: &mut std::process::Command) {
        cmd.env("GRACEFUL_KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.paths.kube_cache())
            .env("PATH", self.kube.path_env());
    }

    /// Takes the node down if this session brought it up.
    pub fn end(self) -> anyhow::Result<()> {
        if self.started {
            down::run(&self.paths)?;
        } else {
            println!("==> the node ran before: it stays up (`cargo xtask cluster down` stops it)");
        }
        Ok(())
    }
}

/// Polls `f` every 200 ms until it returns `Some`, for at most `limit`.
pub fn wait_for<T>(limit: Duration, what: &str, f: impl FnMut() -> Option<T>) -> anyhow::Result<T> {
    graceful_test_support::poll(limit, Duration::from_millis(200), f)
        .ok_or_else(|| anyhow::anyhow!("{what} within {} s", limit.as_secs()))
}

/// Writes `text` to `path` if it differs; true if it changed.
pub fn write_if_changed(path: &Path, text: &str) -> anyhow::Result<bool> {
    if std::fs::read_to_string(path).ok().as_deref() == Some(text) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(true)
}
