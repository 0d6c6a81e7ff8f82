//! The README's quickstart, run as written on the test node: the block's
//! lines, unchanged but for `REGISTRY` (a registry on the node), in one
//! shell inside the node's network namespace, where that registry and the
//! API server are. The image is built and pushed there, the chart pulls
//! it, the examples run, and the restart of `web` drains through the gate.
//!
//! The suite's own agent (deploy/base) is taken away first, so that
//! `kubectl create namespace graceful-system` finds what a new cluster
//! has, and put back after.

use std::process::{Command, Stdio};

use graceful_tests::cluster::{
    registry::{self, Registry},
    workspace, Cluster, AGENT_NAMESPACE, AGENT_SELECTOR,
};

use super::node;

/// The README's placeholder, and what the test puts in its place.
const PLACEHOLDER: &str = "REGISTRY=registry.example.com/graceful";

/// The examples the quickstart applies, into the `default` namespace.
const EXAMPLES: [&str; 3] = [
    "deploy/examples/web",
    "deploy/examples/restricted",
    "deploy/examples/restricted-socket",
];

/// The upstream images the examples name, as the node holds them: Debian's
/// nginx laid out like each (lab/src/cluster/images.rs).
const IMAGE_TAGS: [(&str, &str); 2] = [
    (
        "localhost/debian-nginx:bookworm",
        "docker.io/library/nginx:1.27.3",
    ),
    (
        "localhost/debian-nginx-unprivileged:bookworm",
        "docker.io/nginxinc/nginx-unprivileged:1.27.3",
    ),
];

/// The shell block under "On a cluster" in the README.
fn quickstart() -> String {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let after = readme
        .split_once("On a cluster")
        .expect("the README's quickstart says \"On a cluster\"")
        .1;
    let block = after
        .split_once("```sh\n")
        .and_then(|(_, b)| b.split_once("```"))
        .expect("a ```sh block after \"On a cluster\"")
        .0;
    assert_eq!(
        block.lines().filter(|l| l.starts_with(PLACEHOLDER)).count(),
        1,
        "the quickstart sets {PLACEHOLDER} once, on a line of its own:\n{block}"
    );
    block.to_string()
}

/// The admin's kubeconfig, for a client inside the node's namespace: the
/// API server itself on 127.0.0.1:6443 (its certificate names 127.0.0.1),
/// not the host's forwarder.
fn inside_kubeconfig(cluster: &Cluster, dir: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(&cluster.kubeconfig).unwrap();
    assert!(text.contains("https://127.0.0.1:16443"), "{text}");
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        text.replace("https://127.0.0.1:16443", "https://127.0.0.1:6443"),
    )
    .unwrap();
    path
}

/// The node as the rest of the suite expects it, whatever happened: the
/// examples and the chart gone, the pulled and tagged images removed,
/// deploy/base's agent ready.
struct Restore<'a>(&'a Cluster);

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        let c = self.0;
        for e in EXAMPLES {
            let dir = workspace().join(e);
            let _ = c.try_kubectl(&[
                "delete",
                "-k",
                dir.to_str().unwrap(),
                "--ignore-not-found",
                "--wait",
            ]);
        }
        let _ = graceful_tests::cluster::helm::try_helm(
            c,
            &["uninstall", "graceful", "-n", AGENT_NAMESPACE, "--wait"],
        );
        let _ = c.restore_agent();
        let pulled = format!("{}/graceful/agent:{}", registry::ADDR, env!("CARGO_PKG_VERSION"));
        for image in IMAGE_TAGS.iter().map(|(_, t)| *t).chain([pulled.as_str()]) {
            let _ = c.try_images(&["rm", image]);
        }
    }
}

#[test]
fn the_readme_quickstart_runs_as_written_on_the_node() {
    let (cluster, _serial) = node();
    let script = quickstart();
    let registry = Registry::start(&cluster);
    let dir = std::env::temp_dir().join(format!("graceful-quickstart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = inside_kubeconfig(&cluster, &dir);

    // A node with no graceful: the suite's agent goes, namespace and all.
    let _restore = Restore(&cluster);
    let overlay = workspace().join("tests/overlays/agent");
    cluster.kubectl(&[
        "delete",
        "-k",
        overlay.to_str().unwrap(),
        "--wait",
        "--timeout=180s",
    ]);
    assert!(cluster
        .try_kubectl(&["get", "namespace", AGENT_NAMESPACE])
        .is_err());
    for (held, upstream) in IMAGE_TAGS {
        cluster.images(&["tag", "--force", held, upstream]);
    }

    let script = script.replace(PLACEHOLDER, &format!("REGISTRY={}/graceful", registry::ADDR));
    // kubectl-graceful on PATH, as the quickstart's last line says.
    let path = format!(
        "{}:{}",
        workspace().join("target/debug").display(),
        std::env::var("PATH").unwrap()
    );
    let t0 = std::time::Instant::now();
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            Registry::netns(),
            "bash",
            "-euo",
            "pipefail",
            "-xc",
            &script,
        ])
        .current_dir(workspace())
        .env("KUBECONFIG", &kubeconfig)
        .env("PATH", path)
        .env("GRACEFUL_IMAGE_TLS_VERIFY", "false")
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    let secs = t0.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "the quickstart failed ({}):\n{stdout}\n{stderr}\nthe registry's log: {}",
        out.status,
        registry.log()
    );

    // The agent runs the image pushed to the registry, pulled by the kubelet.
    let pods = cluster.json(&["-n", AGENT_NAMESPACE, "get", "pods", "-l", AGENT_SELECTOR]);
    let status = &pods["items"][0]["status"]["containerStatuses"][0];
    let image = format!("{}/graceful/agent:{}", registry::ADDR, env!("CARGO_PKG_VERSION"));
    assert_eq!(status["image"], image.as_str(), "{status}");
    assert!(
        status["imageID"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!("{}/graceful/agent@sha256:", registry::ADDR)),
        "{status}"
    );
    // The socket example's image volume is the agent's image from the
    // registry, pulled there: its pod runs (in the examples' restricted
    // namespace).
    cluster.kubectl(&[
        "-n",
        "graceful-restricted",
        "rollout",
        "status",
        "deploy/restricted-web",
        "--timeout=180s",
    ]);
    let d = cluster.json(&["-n", "graceful-restricted", "get", "deploy/restricted-web"]);
    let volumes = d["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    assert!(
        volumes.iter().any(|v| v["image"]["reference"] == image.as_str()),
        "the image volume names the registry's image: {volumes:?}"
    );
    // The doctor found nothing wrong (it exits non-zero on a failure; the
    // script would have stopped), and `kubectl graceful drains` answered.
    assert!(
        stdout.contains("NODE"),
        "kubectl graceful drains printed its table: {stdout}"
    );

    // The restart drained through the gate: each old web pod's drain left
    // its Event, from the agent the chart installed.
    cluster.kubectl(&[
        "-n",
        "default",
        "rollout",
        "status",
        "deploy/web",
        "--timeout=180s",
    ]);
    let released = graceful_tests::wait_for(60, "the old web pods' DrainReleased Events", || {
        let events = cluster.json(&[
            "-n",
            "default",
            "get",
            "events",
            "--field-selector",
            "reason=DrainReleased",
        ]);
        let n = events["items"]
            .as_array()?
            .iter()
            .filter(|e| {
                e["involvedObject"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("web-"))
            })
            .filter(|e| e["source"]["component"] == "graceful" || e["reportingComponent"] == "graceful")
            .count();
        (n >= 3).then_some(n)
    });
    eprintln!(
        "the quickstart ran in {secs:.0} s; the agent runs {image}; {released} web pods drained through the gate"
    );
}
