//! graceful's Helm chart (deploy/helm/graceful) on the test node: helm (the
//! lab builds it from its Go module, `cargo xtask cluster env` puts it on
//! PATH) against the node's API server, and the CRDs the chart's optional
//! objects need (prometheus-operator's, OpenShift's
//! SecurityContextConstraints), from those projects' published Go
//! modules, applied for a test and removed after it.

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
/// The openshift/api version whose SecurityContextConstraints CRD the
/// chart's SCC is checked against: the one machine-api-operator's go.mod
/// names (the module proxy serves openshift/api by exact version only).
pub const OPENSHIFT_API: &str = "v0.0.0-20260213204242-d34f11c515b3";

/// CRDs from a project's published Go module, applied to the node while
/// this lives and deleted after.
pub struct Crds<'a> {
    cluster: &'a Cluster,
    names: Vec<String>,
}

impl<'a> Crds<'a> {
    /// prometheus-operator's ServiceMonitor, PodMonitor and PrometheusRule.
    pub fn monitoring(cluster: &'a Cluster) -> Crds<'a> {
        let files = ["servicemonitors", "podmonitors", "prometheusrules"].map(|crd| {
            (
                format!("example/prometheus-operator-crd/monitoring.coreos.com_{crd}.yaml"),
                format!("{crd}.monitoring.coreos.com"),
            )
        });
        Crds::apply(
            cluster,
            &format!("github.com/prometheus-operator/prometheus-operator@{PROMETHEUS_OPERATOR}"),
            &files,
        )
    }

    /// OpenShift's SecurityContextConstraints.
    pub fn openshift_scc(cluster: &'a Cluster) -> Crds<'a> {
        let file = "security/v1/zz_generated.crd-manifests/0000_03_config-operator_01_securitycontextconstraints.crd.yaml";
        Crds::apply(
            cluster,
            &format!("github.com/openshift/api@{OPENSHIFT_API}"),
            &[(
                file.into(),
                "securitycontextconstraints.security.openshift.io".into(),
            )],
        )
    }

    /// `files` (a path in `module@version`, the CRD's name) applied and
    /// established.
    fn apply(cluster: &'a Cluster, module: &str, files: &[(String, String)]) -> Crds<'a> {
        let out = Command::new("go")
            .env("GOTOOLCHAIN", "local")
            .env("GOFLAGS", "-mod=mod")
            .args(["mod", "download", "-json", module])
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
        let dir = PathBuf::from(v["Dir"].as_str().unwrap_or_else(|| panic!("no Dir: {text}")));
        let crds = Crds {
            cluster,
            names: files.iter().map(|(_, name)| name.clone()).collect(),
        };
        for (file, _) in files {
            // Server-side: the CRDs are too large for the last-applied annotation.
            cluster.kubectl(&["apply", "--server-side", "-f", dir.join(file).to_str().unwrap()]);
        }
        for name in &crds.names {
            cluster.kubectl(&[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                &format!("crd/{name}"),
            ]);
        }
        crds
    }
}

impl Drop for Crds<'_> {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = self
                .cluster
                .try_kubectl(&["delete", "crd", name, "--ignore-not-found", "--wait=true"]);
        }
    }
}
