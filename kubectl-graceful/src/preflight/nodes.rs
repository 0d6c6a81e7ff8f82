//! The nodes to check, and what their Node objects already say: whether
//! the kubelet is Ready (a pod on a node that is not never starts), and
//! whether its kubelet and runtime mount image volumes (the socket gate's):
//! Kubernetes 1.31 to 1.34 have the ImageVolume gate off by default, 1.35
//! on, 1.36 GA; containerd from 2.1, CRI-O from 1.31.

use graceful_api::views::doctor::{Finding, Level};
use k8s_openapi::api::core::v1::Node;
use kube::{api::ListParams, Api, Client};

use crate::agents::said;

/// A node, why it is not checked (if so), and what its object says.
pub struct Target {
    pub name: String,
    pub skip: Option<String>,
    pub findings: Vec<Finding>,
}

/// `major.minor` of a version string such as `v1.37.2` or `2.1.4-k3s1`.
pub fn minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.trim_start_matches('v').split(['.', '-', '+']);
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// What a kubelet and a runtime of these versions do with an image volume.
pub fn image_volume(kubelet: &str, runtime: &str) -> Finding {
    let line = |level, message: String| Finding {
        level,
        check: "image-volume".into(),
        message,
    };
    let kubelet_says = match minor(kubelet) {
        Some(v) if v >= (1, 35) => None,
        Some(v) if v >= (1, 31) => Some(format!(
            "kubelet {kubelet} mounts image volumes only with --feature-gates=ImageVolume=true (on by default from 1.35)"
        )),
        Some(_) => Some(format!("kubelet {kubelet} has no image volumes (1.31 and later)")),
        None => Some(format!("kubelet version {kubelet:?} unread")),
    };
    let (name, version) = runtime.split_once("://").unwrap_or((runtime, ""));
    let runtime_says = match (name, minor(version)) {
        ("containerd", Some(v)) if v < (2, 1) => Some(format!(
            "containerd {version} has no image volumes (2.1 and later)"
        )),
        ("cri-o", Some(v)) if v < (1, 31) => {
            Some(format!("CRI-O {version} has no image volumes (1.31 and later)"))
        }
        _ => None,
    };
    match (kubelet_says, runtime_says) {
        (None, None) => line(
            Level::Ok,
            format!("kubelet {kubelet} and {runtime} mount image volumes"),
        ),
        (a, b) => line(
            Level::Warn,
            format!(
                "{}: the socket gate's pods cannot start here; the exec and httpGet gates work",
                a.into_iter().chain(b).collect::<Vec<_>>().join("; ")
            ),
        ),
    }
}

/// Every node (or `only`), by name.
pub async fn list(client: &Client, only: Option<&str>) -> anyhow::Result<Vec<Target>> {
    let api: Api<Node> = Api::all(client.clone());
    let mut lp = ListParams::default();
    if let Some(n) = only {
        lp = lp.fields(&format!("metadata.name={n}"));
    }
    let list = api
        .list(&lp)
        .await
        .map_err(|e| anyhow::anyhow!("cannot list the nodes: {} (needs `list` on nodes)", said(&e)))?;
    if list.items.is_empty() {
        anyhow::bail!("no node {}", only.unwrap_or("at all"));
    }
    let mut targets: Vec<Target> = list
        .items
        .into_iter()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap_or_default();
            let status = n.status.unwrap_or_default();
            let ready = status
                .conditions
                .unwrap_or_default()
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status == "True")
                .unwrap_or(false);
            let info = status.node_info.unwrap_or_default();
            Target {
                name,
                skip: (!ready)
                    .then(|| "the node is not Ready: its pod would not start, so it is not checked".into()),
                findings: vec![image_volume(
                    &info.kubelet_version,
                    &info.container_runtime_version,
                )],
            }
        })
        .collect();
    targets.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(targets)
}

#[cfg(test)]
mod tests;
