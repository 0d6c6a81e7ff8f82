//! graceful's Helm chart (deploy/helm/graceful) on the test node: helm (the
//! lab builds it from its Go module, `cargo xtask cluster env` puts it on
//! PATH) against the node's API server, and the prometheus-operator CRDs
//! that the chart's monitoring objects need, from that project's published
//! Go module (its example/prometheus-operator-crd), applied for a test and
//! removed after it.

use std::{
    path::PathBuf,
    process::{Command, Stdio},
};

use super::{workspace, Cluster};

/// The chart, the release name and namespace the suite installs it as,
/// and the test node's values.
pub fn chart() -> PathBuf {
    workspace().join("deploy/helm/graceful")
}
pub const RELEASE: &str = "graceful";
pub fn node_values() -> PathBuf {
    workspace().join("tests/overlays/helm/values.yaml")
}

/// `helm ARGS` against the node; stdout, or stderr as the error.
pub fn try_helm(cluster: &Cluster, args: &[&str]) -> Result<String, String> {
    let out = Command::new("helm")
        .env("KUBECONFIG", &cluster.kubeconfig)
        // helm's cache and config stay out of the user's home.
        .env("HELM_CACHE_HOME", std::env::temp_dir().join("graceful-helm/cache"))
        .env("HELM_CONFIG_HOME", std::env::temp_dir().join("graceful-helm/config"))
        .env("HELM_DATA_HOME", std::env::temp_dir().join("graceful-helm/data"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("helm: {e} (the lab builds it: `cargo xtask cluster build`; `cargo xtask cluster env` puts it on PATH)"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "helm {args:?}: {}{stdout}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

pub fn helm(cluster: &Cluster, args: &[&str]) -> String {
    try_helm(cluster, args).unwrap_or_else(|e| panic!("{e}"))
}

/// `helm template` of the chart as release [`RELEASE`] in the agent's
/// namespace, with `extra` arguments (`--set`, `-f`, `--show-only`).
pub fn template(cluster: &Cluster, extra: &[&str]) -> Result<String, String> {
    let chart = chart();
    let mut args = vec![
        "template",
        RELEASE,
        chart.to_str().unwrap(),
        "-n",
        super::AGENT_NAMESPACE,
    ];
    args.extend(extra);
    try_helm(cluster, &args)
}

/// The prometheus-operator version whose CRDs the chart is checked against.
pub const PROMETHEUS_OPERATOR: &str = "v0.85.0";
/// The CRDs the chart's objects use.
const CRDS: [&str; 3] = ["servicemonitors", "podmonitors", "prometheusrules"];

/// The monitoring CRDs, applied to the node while this lives.
pub struct MonitoringCrds<'a> {
    cluster: &'a Cluster,
}

impl<'a> MonitoringCrds<'a> {
    pub fn apply(cluster: &'a Cluster) -> MonitoringCrds<'a> {
        let module = "github.com/prometheus-operator/prometheus-operator";
        let out = Command::new("go")
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod")
            .args([
                "mod",
                "download",
                "-json",
                &format!("{module}@{PROMETHEUS_OPERATOR}"),
            ])
            .stdin(Stdio::null())
            .output()
            .expect("go (setup checks it is there)");
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| {
            panic!(
                "go mod download {module}: {e}: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let dir = PathBuf::from(v["Dir"].as_str().unwrap_or_else(|| panic!("no Dir: {text}")))
            .join("example/prometheus-operator-crd");
        let crds = MonitoringCrds { cluster };
        for crd in CRDS {
            let file = dir.join(format!("monitoring.coreos.com_{crd}.yaml"));
            // Server-side: the CRDs are too large for the last-applied annotation.
            cluster.kubectl(&["apply", "--server-side", "-f", file.to_str().unwrap()]);
        }
        for crd in CRDS {
            cluster.kubectl(&[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                &format!("crd/{crd}.monitoring.coreos.com"),
            ]);
        }
        crds
    }
}

impl Drop for MonitoringCrds<'_> {
    fn drop(&mut self) {
        for crd in CRDS {
            let _ = self.cluster.try_kubectl(&[
                "delete",
                "crd",
                &format!("{crd}.monitoring.coreos.com"),
                "--ignore-not-found",
                "--wait=true",
            ]);
        }
    }
}
