//! Where the Kubernetes API is, and which node this is.
//!
//! The config is looked for in this order, the first one present wins:
//! 1. `--kubeconfig PATH`;
//! 2. `$KUBECONFIG` (one path or a list, merged as kubectl does);
//! 3. in-cluster: `KUBERNETES_SERVICE_HOST`/`_PORT` and the ServiceAccount
//!    files under `/var/run/secrets/kubernetes.io/serviceaccount/` (the
//!    DaemonSet);
//! 4. `~/.kube/config`.
//!
//! None present, or `--standalone`: the agent runs without the API. A
//! source that is present but fails to load (a token not mounted yet, a
//! kubeconfig being rewritten) is retried with backoff like an unreachable
//! API, never fatal.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use tracing::{info, warn};

#[derive(Debug, Clone, Default, clap::Args)]
pub struct KubeArgs {
    /// Run without the Kubernetes API: pods are shown by uid, no names, no
    /// Events, no terminating-pod reports.
    #[arg(long, env = "GRACEFUL_STANDALONE")]
    pub standalone: bool,
    /// The kubeconfig to reach the API with. Default: $KUBECONFIG, else the
    /// in-cluster ServiceAccount, else ~/.kube/config; none of them means
    /// standalone.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// This node's name as the API knows it: the DaemonSet sets NODE_NAME
    /// from the downward API (spec.nodeName). Default: the hostname, as the
    /// kubelet's default.
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node_name: Option<String>,
    /// This agent's own pod, for the Events it posts about itself (a
    /// handover it could not take): the DaemonSet sets POD_NAME,
    /// POD_NAMESPACE and POD_UID from the downward API. Without all three
    /// those Events are not posted; the log line is the record.
    #[arg(long, env = "POD_NAME", value_name = "NAME")]
    pub pod_name: Option<String>,
    #[arg(long, env = "POD_NAMESPACE", value_name = "NAMESPACE")]
    pub pod_namespace: Option<String>,
    #[arg(long, env = "POD_UID", value_name = "UID")]
    pub pod_uid: Option<String>,
    /// Namespaces whose every terminating pod is reported (an Event, the
    /// metrics, their alert), whether or not it opted in; `*`: every
    /// namespace. Without it, or a selector, only pods that carry
    /// something of graceful's (a gate, a `graceful.dev/` annotation or
    /// label) are reported.
    #[arg(
        long,
        env = "GRACEFUL_REPORT_NAMESPACES",
        value_name = "NS,...",
        value_delimiter = ','
    )]
    pub report_namespaces: Vec<String>,
    /// Pods whose labels this selector matches (`app=web,tier in
    /// (front,edge)`, as `kubectl -l` takes it) are reported too.
    #[arg(long, env = "GRACEFUL_REPORT_SELECTOR", value_name = "SELECTOR", value_parser = super::report_scope::parse_selector)]
    pub report_selector: Option<super::report_scope::PodSelector>,
}

impl KubeArgs {
    /// The terminating pods reported besides those that opted in.
    pub fn report_scope(&self) -> super::report_scope::ReportScope {
        super::report_scope::ReportScope {
            namespaces: self
                .report_namespaces
                .iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty())
                .collect(),
            selector: self.report_selector.clone(),
        }
    }

    /// This agent's own pod, when all of it is known.
    pub fn own_pod(&self) -> Option<super::events::PodRef> {
        Some(super::events::PodRef {
            name: self.pod_name.clone().filter(|s| !s.is_empty())?,
            namespace: self.pod_namespace.clone().filter(|s| !s.is_empty())?,
            uid: self.pod_uid.clone().filter(|s| !s.is_empty())?,
            workload: None,
        })
    }
}

/// Where the config comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--kubeconfig`, or a test's.
    Kubeconfig(PathBuf),
    /// `$KUBECONFIG`.
    KubeconfigEnv,
    /// The pod's ServiceAccount.
    InCluster,
    /// `~/.kube/config`.
    Home(PathBuf),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Kubeconfig(p) => write!(f, "kubeconfig {}", p.display()),
            Source::KubeconfigEnv => write!(f, "$KUBECONFIG"),
            Source::InCluster => write!(f, "in-cluster ServiceAccount"),
            Source::Home(p) => write!(f, "kubeconfig {}", p.display()),
        }
    }
}

/// The config source to use, or `None` for standalone (logged).
pub fn resolve(args: &KubeArgs) -> Option<Source> {
    if args.standalone {
        info!("standalone: not using the Kubernetes API; pods are shown by uid");
        return None;
    }
    if let Some(p) = &args.kubeconfig {
        return Some(Source::Kubeconfig(p.clone()));
    }
    if std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()) {
        return Some(Source::KubeconfigEnv);
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        return Some(Source::InCluster);
    }
    if let Some(home) = std::env::var_os("HOME") {
        let p = PathBuf::from(home).join(".kube").join("config");
        if p.exists() {
            return Some(Source::Home(p));
        }
    }
    info!("no Kubernetes config found (--kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config): standalone, pods are shown by uid");
    None
}

/// `--node-name`/`NODE_NAME`, else the hostname (what the kubelet uses
/// when not told otherwise).
pub fn node_name(args: &KubeArgs) -> String {
    if let Some(n) = args.node_name.as_deref().filter(|n| !n.is_empty()) {
        return n.to_string();
    }
    let host = hostname();
    warn!(node = %host, "NODE_NAME not set (the DaemonSet sets it from spec.nodeName): watching the pods of the node named as this host");
    host
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is ours and its length is passed.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).to_lowercase()
}

impl Source {
    /// Loads the client config. Errors are one line, for the log.
    pub async fn load(&self) -> Result<kube::Config, String> {
        let opts = KubeConfigOptions::default();
        let from_file = |k: Result<Kubeconfig, _>| async move {
            let k = k.map_err(|e: kube::config::KubeconfigError| e.to_string())?;
            kube::Config::from_custom_kubeconfig(k, &opts)
                .await
                .map_err(|e| e.to_string())
        };
        match self {
            Source::Kubeconfig(p) | Source::Home(p) => from_file(Kubeconfig::read_from(p)).await,
            Source::KubeconfigEnv => {
                from_file(
                    Kubeconfig::from_env().and_then(|k| k.ok_or(kube::config::KubeconfigError::FindPath)),
                )
                .await
            }
            Source::InCluster => kube::Config::incluster().map_err(|e| e.to_string()),
        }
        .map(without_system_roots)
    }
}

/// A plain-HTTP API (kubectl proxy, a test API) needs no TLS roots, yet
/// kube's client still builds a TLS stack, and with no CA configured it looks
/// for the system trust store, which the agent's `FROM scratch` image does
/// not have. An empty root store keeps it from looking. HTTPS is untouched:
/// in-cluster config always carries the service account's CA.
pub fn without_system_roots(mut config: kube::Config) -> kube::Config {
    let plain = config.cluster_url.scheme_str() == Some("http");
    if plain && config.root_cert.is_none() && config.root_cert_file.is_none() {
        config.root_cert = Some(Vec::new());
    }
    config
}
