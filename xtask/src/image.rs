//! `cargo xtask image`: the agent's OCI image, built here from the
//! Containerfile with Debian's buildah, offline.
//!
//! The Containerfile has two stages: a builder (a Rust image that runs
//! `cargo build --release --target x86_64-unknown-linux-musl`) and the image,
//! `FROM scratch` with the two static binaries. Here the builder's work is
//! done by this machine's toolchains, and buildah is handed the result as
//! the builder stage (`--build-context builder=DIR`, DIR laid out as the
//! builder's file system), so the builder's base image is never pulled and
//! the image is built from the very file users build with a registry at hand.
//!
//! buildah's state lives under `target/image/` (`--root`, `--runroot`, the
//! vfs driver, a signature policy of its own): nothing in
//! /etc/containers is read or written. What buildah makes on the host
//! whatever its `--root` (a CNI lock under /etc/cni, a blob-info cache
//! under /var/lib/containers: measured on a fresh machine) is taken away
//! after it ran, when it was not there before ([`HostTraces`]). The
//! image's creation time is the commit's (`--timestamp`), so one commit
//! gives one image id.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use crate::{setup::MUSL, util};

/// The image's repository, as `deploy/base` names it (`graceful/agent`, which
/// containerd and the kubelet read as this).
pub const REPOSITORY: &str = "docker.io/graceful/agent";
/// The Containerfile's builder stage: where its `cargo build` leaves the binaries.
const BUILDER_RELEASE: &str = "src/target/x86_64-unknown-linux-musl/release";
/// The binaries the image carries (the Containerfile copies them from the builder).
const BINARIES: [&str; 2] = ["graceful", "graceful-wait"];

/// An image built by [`build`].
pub struct Built {
    /// `docker.io/graceful/agent:<version>`, then `<version>-<commit>`.
    pub tags: Vec<String>,
    /// The config's digest (hex), which the kubelet reports as the image id.
    pub id: String,
    /// The manifest's digest (hex), the same in the archive and in a
    /// registry: the kubelet reports it (`REPO@sha256:...`) for an image
    /// it also knows from a registry.
    pub manifest: String,
    /// An OCI archive of the image under its first tag (`ctr images import`,
    /// `skopeo copy oci-archive:...`).
    pub archive: PathBuf,
    buildah: Buildah,
}

/// `buildah` with its state under `target/image/`.
#[derive(Clone)]
struct Buildah {
    dir: PathBuf,
}

impl Buildah {
    fn cmd(&self) -> Command {
        let mut c = Command::new("buildah");
        c.arg("--root")
            .arg(self.dir.join("storage"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .args(["--storage-driver", "vfs"])
            .stdin(std::process::Stdio::null());
        c
    }

    fn policy(&self) -> PathBuf {
        self.dir.join("policy.json")
    }
}

/// What buildah makes on the host whatever its `--root`: the CNI network
/// lock (`/etc/cni/net.d/cni.lock`) and containers/image's blob-info
/// cache (`/var/lib/containers/cache/blob-info-cache-v1.boltdb`).
const HOST_TRACES: [&str; 2] = ["/etc/cni", "/var/lib/containers"];

/// Those of [`HOST_TRACES`] absent when it was made, removed when dropped:
/// what this run of buildah made, and nothing a machine had before.
struct HostTraces(Vec<&'static str>);

impl HostTraces {
    fn note() -> HostTraces {
        HostTraces(
            HOST_TRACES
                .into_iter()
                .filter(|p| !Path::new(p).exists())
                .collect(),
        )
    }
}

impl Drop for HostTraces {
    fn drop(&mut self) {
        for p in &self.0 {
            if let Err(e) = fs::remove_dir_all(p) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("cannot remove {p}, which buildah made: {e}");
                }
            }
        }
    }
}

/// Builds the static binaries, then the image; writes its OCI archive.
pub fn build() -> anyhow::Result<Built> {
    let _traces = HostTraces::note();
    anyhow::ensure!(
        util::which("buildah").is_some(),
        "buildah is not installed: run `cargo xtask setup` (it installs Debian's buildah)"
    );
    let root = util::workspace_root();
    let dir = util::target_dir().join("image");
    let buildah = Buildah { dir: dir.clone() };
    fs::create_dir_all(&dir)?;
    // Pushing to an archive checks a signature policy: accept what this
    // build itself made, without reading /etc/containers.
    fs::write(
        buildah.policy(),
        r#"{"default":[{"type":"insecureAcceptAnything"}]}"#,
    )?;

    let release = static_binaries()?;
    // The builder stage's file system, as far as the image reads it.
    let builder = dir.join("builder");
    let staged = builder.join(BUILDER_RELEASE);
    fs::create_dir_all(&staged)?;
    for bin in BINARIES {
        fs::copy(release.join(bin), staged.join(bin))
            .with_context(|| format!("cannot stage {}", release.join(bin).display()))?;
    }
    let context = dir.join("context");
    fs::create_dir_all(&context)?;

    let version = env!("CARGO_PKG_VERSION");
    let commit = commit_of(&staged.join("graceful"))?;
    let tags = vec![
        format!("{REPOSITORY}:{version}"),
        format!("{REPOSITORY}:{version}-{commit}"),
    ];
    let mut cmd = buildah.cmd();
    cmd.args(["build", "--quiet", "--pull=never", "--layers=false"])
        .arg("--build-context")
        .arg(format!("builder={}", builder.display()))
        .args(["--timestamp", &commit_time(&root).to_string()])
        .args(["--label", &format!("org.opencontainers.image.version={version}")])
        .args(["--label", &format!("org.opencontainers.image.revision={commit}")])
        .arg("-f")
        .arg(root.join("Containerfile"));
    for t in &tags {
        cmd.args(["--tag", t]);
    }
    cmd.arg(&context);
    println!("==> buildah build (state under {})", dir.display());
    let out = util::output(&mut cmd).context("buildah build of the Containerfile failed")?;
    let id = out
        .lines()
        .last()
        .map(|l| l.trim().trim_start_matches("sha256:").to_string())
        .filter(|l| l.len() == 64)
        .with_context(|| format!("buildah build printed no image id: {out}"))?;
    // Earlier builds' images, untagged by this one.
    let _ = util::output(buildah.cmd().args(["rmi", "--prune"]));

    let archive = dir.join(format!("graceful-agent-{version}.tar"));
    let _ = fs::remove_file(&archive);
    let digestfile = dir.join("manifest.digest");
    util::output(
        buildah
            .cmd()
            .arg("push")
            .arg("--signature-policy")
            .arg(buildah.policy())
            .arg("--digestfile")
            .arg(&digestfile)
            .arg(&id)
            .arg(format!("oci-archive:{}:{}", archive.display(), tags[0])),
    )
    .context("buildah push to an OCI archive failed")?;
    let manifest = fs::read_to_string(&digestfile)?
        .trim()
        .trim_start_matches("sha256:")
        .to_string();
    Ok(Built {
        tags,
        id,
        manifest,
        archive,
        buildah,
    })
}

impl Built {
    /// Pushes every tag's version to `repository` (`registry.example/graceful/agent`),
    /// with the credentials `buildah login` or `REGISTRY_AUTH_FILE` give.
    pub fn push(&self, repository: &str) -> anyhow::Result<Vec<String>> {
        let _traces = HostTraces::note();
        let mut pushed = Vec::new();
        for t in &self.tags {
            let tag = t.rsplit_once(':').map(|(_, t)| t).unwrap_or(t);
            let dest = format!("{repository}:{tag}");
            let mut cmd = self.buildah.cmd();
            cmd.arg("push")
                .arg("--signature-policy")
                .arg(self.buildah.policy())
                .args(["--format", "oci"]);
            if let Ok(tls) = std::env::var("GRACEFUL_IMAGE_TLS_VERIFY") {
                cmd.arg(format!("--tls-verify={tls}"));
            }
            cmd.arg(&self.id).arg(format!("docker://{dest}"));
            util::output(&mut cmd).with_context(|| format!("buildah push to {dest} failed"))?;
            pushed.push(dest);
        }
        Ok(pushed)
    }
}

/// The agent's static binaries (release, musl), as the Containerfile's
/// builder makes them, one package at a time (graceful-wait alone keeps
/// graceful-api's serde feature off); returns their directory.
pub fn static_binaries() -> anyhow::Result<PathBuf> {
    for package in ["graceful-daemon", "graceful-wait"] {
        let mut cmd = util::cargo();
        cmd.args(["build", "--release", "--locked", "--target", MUSL, "-p", package]);
        println!("==> {}", util::display(&cmd));
        util::run(&mut cmd).with_context(|| format!("the static build of {package} failed"))?;
    }
    Ok(util::target_dir().join(MUSL).join("release"))
}

/// The commit `graceful --version` names (`0.1.0 (0123456789ab)`): the
/// tag says what the binaries say.
fn commit_of(graceful: &Path) -> anyhow::Result<String> {
    let out = util::output(Command::new(graceful).arg("--version"))?;
    let commit = out
        .split_once('(')
        .and_then(|(_, c)| c.split_once(')'))
        .map(|(c, _)| c.trim().to_string())
        .with_context(|| format!("`graceful --version` names no commit: {out}"))?;
    anyhow::ensure!(
        !commit.is_empty()
            && commit
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
        "`graceful --version` names a commit that is no tag: {commit:?}"
    );
    Ok(commit)
}

/// The commit's time (seconds since the epoch), the image's creation
/// time; 0 outside a repository.
fn commit_time(root: &Path) -> u64 {
    Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["log", "-1", "--format=%ct"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(0)
}

/// The image's size on disk, for the summary line.
pub fn size_mib(path: &Path) -> f64 {
    fs::metadata(path)
        .map(|m| m.len() as f64 / (1024.0 * 1024.0))
        .unwrap_or(0.0)
}
