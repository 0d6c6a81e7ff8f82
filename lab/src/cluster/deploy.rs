//! graceful's DaemonSet on the node: `deploy/base`, through the overlay in
//! `tests/overlays/agent` (which only shows the agent the node's network
//! namespace: the harness runs the node in one of its own).

use std::time::Duration;

use super::{kubectl::Kubectl, wait_for};
use xtask::util;

pub const NAMESPACE: &str = "graceful-system";
const SELECTOR: &str = "app.kubernetes.io/name=graceful";

pub fn overlay() -> std::path::PathBuf {
    util::workspace_root().join("tests/overlays/agent")
}

/// Applies the DaemonSet and waits until its one pod runs the image (the
/// kubelet reports one of `digests`) and is ready. A pod still on an older
/// image of the same tag is replaced: the tag stays
/// `graceful/agent:<version>` while the binaries change.
pub fn agent(kubectl: &Kubectl, digests: &[String]) -> anyhow::Result<()> {
    let ours = |id: &str| digests.iter().any(|d| id.ends_with(d.as_str()));
    kubectl.text(&["apply", "-k", &overlay().to_string_lossy()])?;
    let pods = || {
        kubectl
            .text(&[
                "-n",
                NAMESPACE,
                "get",
                "pods",
                "-l",
                SELECTOR,
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].imageID} \
                 {.status.containerStatuses[0].ready} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
            ])
            .unwrap_or_default()
    };
    let stale: Vec<String> = pods()
        .lines()
        .filter_map(|l| {
            // name, imageID, ready: a pod still starting has no imageID yet.
            let f: Vec<&str> = l.split_whitespace().collect();
            let other_image = f.get(1).is_some_and(|id| id.contains("sha256:") && !ours(id));
            other_image.then(|| f[0].to_string())
        })
        .collect();
    for pod in &stale {
        println!(
            "{:<10} {:<34} {pod}: not on the new image, replaced",
            "...", "graceful DaemonSet"
        );
        kubectl.text(&["-n", NAMESPACE, "delete", "pod", pod, "--wait=false"])?;
    }
    let ready = wait_for(
        Duration::from_secs(120),
        "graceful's DaemonSet pod was not ready on the new image",
        || {
            let text = pods();
            let lines: Vec<&str> = text.lines().collect();
            let ok = lines.len() == 1 && {
                let f: Vec<&str> = lines[0].split_whitespace().collect();
                f.len() == 3 && ours(f[1]) && f[2] == "true"
            };
            ok.then(|| lines[0].split_whitespace().next().unwrap_or_default().to_string())
        },
    );
    match ready {
        Ok(pod) => {
            println!(
                "{:<10} {:<34} {NAMESPACE}/{pod} ready",
                "ok", "graceful DaemonSet"
            );
            Ok(())
        }
        Err(e) => {
            let describe = kubectl
                .text(&["-n", NAMESPACE, "describe", "pods", "-l", SELECTOR])
                .unwrap_or_default();
            Err(e.context(util::tail(&describe, 25)))
        }
    }
}
