//! The agent's image as `cargo xtask image` builds it (buildah, from the
//! Containerfile) and as the node runs it: `cargo xtask cluster up` imports
//! that image's OCI archive, and the DaemonSet's pod runs it; pushed to a
//! registry on the node, it is what the kubelet pulls.

use std::{path::Path, process::Command};

use graceful_tests::cluster::{
    registry::{self, Registry},
    workspace, AGENT_IMAGE, AGENT_NAMESPACE, AGENT_SELECTOR,
};

use super::node;

/// One file out of a tar archive.
fn member(archive: &Path, name: &str) -> Vec<u8> {
    let out = Command::new("tar")
        .arg("-xOf")
        .arg(archive)
        .arg(name)
        .output()
        .expect("tar");
    assert!(
        out.status.success(),
        "{} has no {name}: {}",
        archive.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn blob(archive: &Path, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    member(archive, &format!("blobs/sha256/{hex}"))
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("JSON")
}

#[test]
fn the_node_runs_the_image_built_from_the_containerfile() {
    let (cluster, _serial) = node();
    let version = env!("CARGO_PKG_VERSION");
    let archive = workspace().join(format!("target/image/graceful-agent-{version}.tar"));
    assert!(
        archive.exists(),
        "{} is missing: `cargo xtask cluster up` builds it with `cargo xtask image`",
        archive.display()
    );

    // The archive: one image, named as deploy/base runs it.
    let index = json(&member(&archive, "index.json"));
    let manifests = index["manifests"].as_array().expect("an OCI index");
    assert_eq!(manifests.len(), 1, "{index}");
    assert_eq!(
        manifests[0]["annotations"]["org.opencontainers.image.ref.name"], AGENT_IMAGE,
        "{index}"
    );
    let manifest = json(&blob(&archive, manifests[0]["digest"].as_str().unwrap()));
    let config_digest = manifest["config"]["digest"]
        .as_str()
        .expect("a config")
        .to_string();
    let config = json(&blob(&archive, &config_digest));

    // The node's agent pod runs exactly this image. The kubelet reports
    // the config's digest, or, once the image has a registry's name too
    // (the push test's pull), that registry's manifest digest, which is the
    // archive's: buildah writes the same manifest to both.
    let manifest_digest = manifests[0]["digest"].as_str().unwrap().to_string();
    let pods = cluster.json(&["-n", AGENT_NAMESPACE, "get", "pods", "-l", AGENT_SELECTOR]);
    let running: Vec<String> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["status"]["containerStatuses"][0]["imageID"].as_str())
        .map(str::to_string)
        .collect();
    assert!(!running.is_empty(), "no agent pod: {pods}");
    for id in &running {
        assert!(
            id.ends_with(&config_digest) || id.ends_with(&format!("@{manifest_digest}")),
            "the agent pod runs {id}, not the image built last (config {config_digest}, \
             manifest {manifest_digest}): `cargo xtask cluster up` imports the image \
             `cargo xtask image` built last"
        );
    }
    // FROM scratch: one layer, the two static binaries and nothing else.
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(
        layers.len(),
        1,
        "FROM scratch and two COPY lines make one layer: {manifest}"
    );
    let hex = layers[0]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:");
    let out = Command::new("sh")
        .args(["-c", r#"tar -xOf "$0" "blobs/sha256/$1" | tar -tzv"#])
        .arg(&archive)
        .arg(hex)
        .output()
        .expect("sh");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listing = String::from_utf8_lossy(&out.stdout).to_string();
    let files: Vec<&str> = listing
        .lines()
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(files, ["graceful", "graceful-wait"], "{listing}");
    for l in listing.lines().filter(|l| l.starts_with('-')) {
        assert!(l.starts_with("-rwxr-xr-x"), "the binaries are executable: {l}");
    }

    // The config: the Containerfile's entrypoint, its labels, the version
    // and the commit the binaries name.
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/graceful", "daemon"])
    );
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["org.opencontainers.image.title"], "graceful", "{labels}");
    assert_eq!(
        labels["org.opencontainers.image.licenses"], "Apache-2.0",
        "{labels}"
    );
    assert_eq!(labels["org.opencontainers.image.version"], version, "{labels}");
    let out = cluster.agent(&["--version"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    let revision = labels["org.opencontainers.image.revision"]
        .as_str()
        .expect("a revision label");
    assert_eq!(
        said.trim(),
        format!("graceful {version} ({revision})"),
        "the image's revision label is the commit its agent names"
    );

    eprintln!(
        "image {AGENT_IMAGE}: {config_digest}, layer files {files:?}, revision {revision}, run by {} pod(s)",
        running.len()
    );
}

/// Puts the agent back on the image `cargo xtask cluster up` imported if
/// the test stops half-way (the other tests expect it).
struct BackToImported<'a>(&'a graceful_tests::cluster::Cluster);

impl Drop for BackToImported<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.try_kubectl(&[
                "-n",
                AGENT_NAMESPACE,
                "set",
                "image",
                "ds/graceful",
                &format!("agent={AGENT_IMAGE}"),
            ]);
        }
    }
}

#[test]
fn the_image_pushed_to_a_registry_is_what_the_node_pulls_and_runs() {
    let (cluster, _serial) = node();
    let version = env!("CARGO_PKG_VERSION");
    let registry = Registry::start(&cluster);
    let repository = format!("{}/graceful/agent", registry::ADDR);

    // The quickstart's command, run where the registry is: the node's
    // namespace. The registry speaks plain HTTP, as on 127.0.0.1 it may.
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            Registry::netns(),
            "cargo",
            "xtask",
            "image",
            "--push",
            &repository,
        ])
        .current_dir(workspace())
        .env("GRACEFUL_IMAGE_TLS_VERIFY", "false")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("cargo xtask image");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "cargo xtask image --push: {stdout}{}\nthe registry's log: {}",
        stderr,
        registry.log()
    );
    let pushed: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("pushed"))
        .map(str::trim)
        .collect();
    assert_eq!(pushed.len(), 2, "both tags: {stdout}");
    assert_eq!(pushed[0], format!("{repository}:{version}"), "{stdout}");
    let with_commit = pushed[1];
    let tag = with_commit.rsplit_once(':').unwrap().1;
    assert!(tag.starts_with(&format!("{version}-")), "{stdout}");
    let mut held = registry.tags("graceful/agent");
    held.sort();
    assert_eq!(
        held,
        [version.to_string(), tag.to_string()],
        "the registry's tags"
    );

    // The DaemonSet rolled to the pushed image: the kubelet pulls it from
    // the registry (the node has never held it) and the agent runs.
    let _back = BackToImported(&cluster);
    let pod = cluster.roll_agent_to(with_commit);
    let p = cluster.json(&["-n", AGENT_NAMESPACE, "get", "pod", &pod]);
    let status = &p["status"]["containerStatuses"][0];
    assert_eq!(status["image"], with_commit, "{status}");
    let image_id = status["imageID"].as_str().unwrap_or_default();
    assert!(
        image_id.starts_with(&format!("{repository}@sha256:")),
        "the pod runs the registry's image: {status}"
    );
    let events = cluster.json(&[
        "-n",
        AGENT_NAMESPACE,
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={pod},reason=Pulled"),
    ]);
    let pulled: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert!(
        pulled.iter().any(|m| m.starts_with("Successfully pulled image")),
        "the kubelet pulled the image from the registry: {pulled:?}"
    );
    let said = cluster.agent(&["--version"]);
    let said = String::from_utf8_lossy(&said.stdout).to_string();
    let commit = tag.strip_prefix(&format!("{version}-")).unwrap();
    assert_eq!(said.trim(), format!("graceful {version} ({commit})"));
    eprintln!("pushed {pushed:?}; the node pulled {image_id} into {pod}: {pulled:?}");

    // Back to the imported image; the pulled one leaves the node.
    cluster.roll_agent_to(AGENT_IMAGE);
    cluster.images(&["rm", with_commit]);
}
