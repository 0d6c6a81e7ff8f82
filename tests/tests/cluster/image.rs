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
use graceful_tests::elf;

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

/// A directory of the test's, taken away with it.
struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A layer (a gzipped tar in the archive) unpacked into `dir`, once: its
/// files' names, sorted.
fn unpack(archive: &Path, digest: &str, dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let hex = digest.trim_start_matches("sha256:");
    let out = Command::new("sh")
        .args(["-c", r#"tar -xOf "$0" "blobs/sha256/$1" | tar -xz -C "$2""#])
        .arg(archive)
        .arg(hex)
        .arg(dir)
        .output()
        .expect("sh");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// What one architecture's image holds: FROM scratch, one layer of the three
/// static binaries built for that machine, the Containerfile's entrypoint
/// and labels. Its layer is unpacked under `scratch/<arch>`.
fn check_platform_image(
    archive: &Path,
    manifest: &serde_json::Value,
    arch: &str,
    scratch: &Path,
) -> PlatformImage {
    let config_digest = manifest["config"]["digest"]
        .as_str()
        .expect("a config")
        .to_string();
    let config = json(&blob(archive, &config_digest));
    assert_eq!(config["architecture"], arch, "{arch}'s config: {config}");
    assert_eq!(config["os"], "linux", "{arch}'s config");
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(
        layers.len(),
        1,
        "FROM scratch and three COPY lines make one layer: {manifest}"
    );
    let dir = scratch.join(arch);
    let names = unpack(archive, layers[0]["digest"].as_str().unwrap(), &dir);
    assert_eq!(names, ["graceful", "graceful-keeper", "graceful-wait"], "{arch}");
    let machine = match arch {
        "amd64" => elf::EM_X86_64,
        "arm64" => elf::EM_AARCH64,
        other => panic!("the image has no {other}"),
    };
    let mut object = Vec::new();
    for name in &names {
        let path = dir.join(name);
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o755, "{arch}'s {name} is executable: {mode:o}");
        let exe = std::fs::read(&path).unwrap();
        if name == "graceful" {
            let objects = elf::embedded_bpf_objects(&exe);
            assert_eq!(objects.len(), 1, "{arch}'s agent embeds one eBPF object");
            object = objects[0].to_vec();
        }
        let l = elf::linkage(&exe).unwrap_or_else(|e| panic!("{arch}'s {name}: {e}"));
        assert!(l.is_static(), "{arch}'s {name} is not static: {l:?}");
        assert_eq!(l.machine, machine, "{arch}'s {name} is built for another machine");
    }
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/graceful", "daemon"]),
        "{arch}"
    );
    let labels = &config["config"]["Labels"];
    assert_eq!(labels["org.opencontainers.image.title"], "graceful", "{labels}");
    assert_eq!(
        labels["org.opencontainers.image.licenses"], "Apache-2.0",
        "{labels}"
    );
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION"),
        "{labels}"
    );
    let revision = labels["org.opencontainers.image.revision"]
        .as_str()
        .expect("a revision label")
        .to_string();
    PlatformImage {
        config: config_digest,
        revision,
        dir,
        object,
    }
}

/// One architecture's image, as [`check_platform_image`] found it.
struct PlatformImage {
    /// The config's digest: the image id.
    config: String,
    /// The commit its revision label names.
    revision: String,
    /// Where its one layer is unpacked.
    dir: std::path::PathBuf,
    /// The eBPF object its agent embeds.
    object: Vec<u8>,
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

    // The archive: one image index, named as deploy/base runs it, of an
    // amd64 and an arm64 image.
    let top = json(&member(&archive, "index.json"));
    let entries = top["manifests"].as_array().expect("an OCI layout");
    assert_eq!(entries.len(), 1, "{top}");
    assert_eq!(
        entries[0]["annotations"]["org.opencontainers.image.ref.name"], AGENT_IMAGE,
        "{top}"
    );
    let index_digest = entries[0]["digest"].as_str().unwrap().to_string();
    let index = json(&blob(&archive, &index_digest));
    assert_eq!(
        index["mediaType"], "application/vnd.oci.image.index.v1+json",
        "{index}"
    );
    let platforms: Vec<(String, String)> = index["manifests"]
        .as_array()
        .expect("an index")
        .iter()
        .map(|m| {
            (
                format!(
                    "{}/{}",
                    m["platform"]["os"].as_str().unwrap_or("?"),
                    m["platform"]["architecture"].as_str().unwrap_or("?")
                ),
                m["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let names: Vec<&str> = platforms.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["linux/amd64", "linux/arm64"], "{index}");
    let scratch = Scratch(std::env::temp_dir().join(graceful_tests::unique("image-layers")));
    let mut images = Vec::new();
    for (platform, digest) in &platforms {
        let arch = platform.strip_prefix("linux/").unwrap();
        let manifest = json(&blob(&archive, digest));
        images.push((arch, check_platform_image(&archive, &manifest, arch, &scratch.0)));
    }
    let [(_, amd), (_, arm)] = &images[..] else {
        unreachable!()
    };
    let (amd64, arm64, revision) = (&amd.config, &arm.config, &amd.revision);
    assert_eq!(
        revision, &arm.revision,
        "both architectures are built from one commit"
    );
    assert_ne!(amd64, arm64, "two images");
    // The kernel programs are the same on both, instruction for
    // instruction: built against arm64's bindings of the kernel's context
    // structs (`bpf_sock_ops`, `__sk_buff`), which are UAPI and laid out
    // alike, and reading every other struct's offsets from the running
    // kernel's BTF. Only the debug info and the BTF's type names differ
    // (`aya_ebpf_bindings::aarch64::...`).
    let code = |o: &[u8]| -> Vec<(String, Vec<u8>)> {
        elf::sections(o)
            .expect("the eBPF object's sections")
            .into_iter()
            .filter(|(n, _)| ![".debug", ".rel.debug", ".BTF"].iter().any(|p| n.starts_with(p)))
            .map(|(n, d)| (n, d.to_vec()))
            .collect()
    };
    let (ours, theirs) = (code(&amd.object), code(&arm.object));
    let differ: Vec<&str> = ours
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| a != b)
        .map(|((n, _), _)| n.as_str())
        .collect();
    assert!(
        ours.len() == theirs.len() && differ.is_empty(),
        "arm64's agent embeds other kernel programs than amd64's: sections {differ:?} differ"
    );
    let programs: Vec<&str> = ours
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| n.starts_with("sockops") || n.starts_with("tp_btf/") || n.starts_with("iter/"))
        .collect();
    assert!(
        programs.contains(&"sockops"),
        "the programs compared: {programs:?}"
    );

    // The node's agent pod runs exactly this image: the kubelet reports
    // amd64's config digest, or, once the image has a registry's name too
    // (the push test's pull), that registry's index digest, which is the
    // archive's: buildah writes the same index to both.
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
            id.ends_with(amd64.as_str()) || id.ends_with(&format!("@{index_digest}")),
            "the agent pod runs {id}, not the image built last (amd64's config {amd64}, \
             index {index_digest}): `cargo xtask cluster up` imports the image \
             `cargo xtask image` built last"
        );
    }
    let out = cluster.agent(&["--version"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        said.trim(),
        format!("graceful {version} ({revision})"),
        "the image's revision label is the commit its agent names"
    );

    // arm64's binaries run, on an emulated arm64 CPU (qemu's user mode:
    // the program's own instructions, this kernel's syscalls), and name
    // the same commit.
    let mut arm_said = Vec::new();
    for (bin, args) in [("graceful", ["--version"]), ("graceful-wait", ["--help"])] {
        let path = arm.dir.join(bin);
        let out = Command::new("qemu-aarch64")
            .arg(&path)
            .args(args)
            .output()
            .expect("qemu-aarch64 (Debian's qemu-user: `cargo xtask setup`)");
        assert!(
            out.status.success(),
            "arm64's {bin} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        arm_said.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    assert_eq!(
        arm_said[0],
        format!("graceful {version} ({revision})"),
        "arm64's agent names the commit"
    );
    assert!(
        arm_said[1].starts_with("usage: graceful-wait"),
        "arm64's hook: {arm_said:?}"
    );

    eprintln!(
        "image {AGENT_IMAGE}: index {index_digest}; amd64 {amd64}, arm64 {arm64}; revision \
         {revision}; the same {} program sections in both agents' eBPF objects; run by {} pod(s); arm64 under qemu-aarch64 says {:?} and {:?}",
        programs.len(),
        running.len(),
        arm_said[0],
        arm_said[1].lines().next().unwrap_or_default()
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
