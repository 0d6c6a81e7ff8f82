//! `cargo xtask image`: the agent's OCI image, built here from the
//! Containerfile with Debian's buildah, offline: one image index with an
//! amd64 and an arm64 image.
//!
//! The Containerfile has two stages: a builder (a Rust image that runs
//! `cargo build --release --target <arch>-unknown-linux-musl` on the build
//! machine's architecture) and the image, `FROM scratch` with the three
//! static binaries. Here the builder's work is done by this machine's
//! toolchains (arm64's cross-built with Debian's gcc-aarch64-linux-gnu), and
//! buildah is handed the result as the builder stage, once per architecture
//! (`--platform linux/<arch> --build-context builder=DIR`, DIR laid out as
//! the builder's file system), so the builder's base image is never pulled,
//! no emulator runs, and the image is built from the very file users build
//! with a registry at hand. Each architecture's image is added to one
//! manifest list, pushed whole (`manifest push --all`) to the archive and
//! to registries.
//!
//! buildah's state lives under `target/image/` (`--root`, `--runroot`, the
//! vfs driver, a signature policy of its own): nothing in
//! /etc/containers is read or written. What buildah makes on the host
//! whatever its `--root` (a CNI lock under /etc/cni, a blob-info cache
//! under /var/lib/containers: measured on a fresh machine) is taken away
//! after it ran, when it was not there before ([`HostTraces`]). The
//! image's creation time is the commit's (`--timestamp`), so one commit
//! gives one image id per architecture.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use crate::{
    setup::{MUSL, MUSL_ARM64},
    util,
};

/// The image's repository, as `deploy/base` names it (`graceful/agent`, which
/// containerd and the kubelet read as this).
pub const REPOSITORY: &str = "docker.io/graceful/agent";
/// The Containerfile's builder stage: where it leaves the binaries.
const BUILDER_OUT: &str = "out";
/// The binaries the image carries (the Containerfile copies them from the builder).
const BINARIES: [&str; 3] = ["graceful", "graceful-keeper", "graceful-wait"];

/// One architecture of the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arch {
    /// The OCI name (`GOARCH`'s): the index's `platform.architecture`.
    pub oci: &'static str,
    /// The Rust target its static binaries are built for.
    pub target: &'static str,
    /// `std::env::consts::ARCH` on a machine of this architecture.
    pub rust: &'static str,
}

/// The image's architectures, the index's order.
pub const ARCHES: [Arch; 2] = [
    Arch {
        oci: "amd64",
        target: MUSL,
        rust: "x86_64",
    },
    Arch {
        oci: "arm64",
        target: MUSL_ARM64,
        rust: "aarch64",
    },
];

/// The architecture of this machine, if the image has it.
pub fn host_arch() -> Option<Arch> {
    ARCHES.into_iter().find(|a| a.rust == std::env::consts::ARCH)
}

/// An image index built by [`build`].
pub struct Built {
    /// `docker.io/graceful/agent:<version>`, then `<version>-<commit>`.
    pub tags: Vec<String>,
    /// The index's digest (hex), the same in the archive and in a
    /// registry: the kubelet reports it (`REPO@sha256:...`) for an image
    /// it also knows from a registry.
    pub index: String,
    /// Each architecture's image: (architecture, config digest), in [`ARCHES`]' order.
    pub images: Vec<(Arch, String)>,
    /// An OCI archive of the index under its first tag (`ctr images import`,
    /// `skopeo copy --all oci-archive:...`).
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

/// Builds the static binaries for each architecture, then each one's
/// image into one index; writes its OCI archive.
pub fn build() -> anyhow::Result<Built> {
    let _traces = HostTraces::note();
    anyhow::ensure!(
        util::which("buildah").is_some(),
        "buildah is not installed: run `cargo xtask setup` (it installs Debian's buildah)"
    );
    let host = host_arch().with_context(|| {
        format!(
            "the image is built on amd64 or arm64, not on {}",
            std::env::consts::ARCH
        )
    })?;
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

    // Each architecture's builder stage, as far as the image reads it.
    let mut builders = Vec::new();
    for arch in ARCHES {
        let release = static_binaries(arch.target)?;
        let builder = dir.join(format!("builder-{}", arch.oci));
        let staged = builder.join(BUILDER_OUT);
        fs::create_dir_all(&staged)?;
        for bin in BINARIES {
            fs::copy(release.join(bin), staged.join(bin))
                .with_context(|| format!("cannot stage {}", release.join(bin).display()))?;
        }
        builders.push((arch, builder));
    }
    let context = dir.join("context");
    fs::create_dir_all(&context)?;

    let version = env!("CARGO_PKG_VERSION");
    // The commit the binaries name, asked of the ones this machine runs.
    let host_builder = &builders
        .iter()
        .find(|(a, _)| *a == host)
        .expect("the host's arch")
        .1;
    let commit = commit_of(&host_builder.join(BUILDER_OUT).join("graceful"))?;
    let tags = vec![
        format!("{REPOSITORY}:{version}"),
        format!("{REPOSITORY}:{version}-{commit}"),
    ];
    // The list, made anew: a list keeps what was added to it (and an
    // earlier build may have left an image of that name).
    let list = &tags[0];
    let _ = util::output(buildah.cmd().args(["manifest", "rm", list]));
    let _ = util::output(buildah.cmd().args(["rmi", "--force", list]));
    // Earlier builds' images, which the list named: not after the builds,
    // as this list's own images have no name but its.
    let _ = util::output(buildah.cmd().args(["rmi", "--prune"]));
    util::output(buildah.cmd().args(["manifest", "create", list]))
        .context("buildah manifest create failed")?;
    let mut images = Vec::new();
    for (arch, builder) in &builders {
        let mut cmd = buildah.cmd();
        cmd.args(["build", "--quiet", "--pull=never", "--layers=false"])
            .args(["--platform", &format!("linux/{}", arch.oci)])
            .arg("--build-context")
            .arg(format!("builder={}", builder.display()))
            .args(["--timestamp", &commit_time(&root).to_string()])
            .args(["--label", &format!("org.opencontainers.image.version={version}")])
            .args(["--label", &format!("org.opencontainers.image.revision={commit}")])
            .args(["--manifest", list])
            .arg("-f")
            .arg(root.join("Containerfile"))
            .arg(&context);
        println!(
            "==> buildah build --platform linux/{} (state under {})",
            arch.oci,
            dir.display()
        );
        let out = util::output(&mut cmd)
            .with_context(|| format!("buildah build of the Containerfile for {} failed", arch.oci))?;
        let id = out
            .lines()
            .last()
            .map(|l| l.trim().trim_start_matches("sha256:").to_string())
            .filter(|l| l.len() == 64)
            .with_context(|| format!("buildah build printed no image id: {out}"))?;
        images.push((*arch, id));
    }

    let archive = dir.join(format!("graceful-agent-{version}.tar"));
    let _ = fs::remove_file(&archive);
    let digestfile = dir.join("index.digest");
    util::output(
        buildah
            .cmd()
            .args(["manifest", "push", "--all", "--format", "oci"])
            .arg("--signature-policy")
            .arg(buildah.policy())
            .arg("--digestfile")
            .arg(&digestfile)
            .arg(list)
            .arg(format!("oci-archive:{}:{}", archive.display(), tags[0])),
    )
    .context("buildah manifest push to an OCI archive failed")?;
    // buildah 1.28 exits 0 when a list's image is missing: check.
    let index = fs::read_to_string(&digestfile)?
        .trim()
        .trim_start_matches("sha256:")
        .to_string();
    anyhow::ensure!(
        index.len() == 64 && archive.exists(),
        "buildah manifest push wrote no archive ({}) or no index digest",
        archive.display()
    );
    Ok(Built {
        tags,
        index,
        images,
        archive,
        buildah,
    })
}

impl Built {
    /// This machine's architecture's image's config digest (hex), which
    /// the kubelet reports as the image id of the image the node imports.
    pub fn id(&self) -> &str {
        self.images
            .iter()
            .find(|(a, _)| Some(*a) == host_arch())
            .map(|(_, id)| id.as_str())
            .expect("build() refuses a machine the image has no architecture for")
    }

    /// Pushes the index and its images under every tag to `repository`
    /// (`registry.example/graceful/agent`), with the credentials `buildah
    /// login` or `REGISTRY_AUTH_FILE` give.
    pub fn push(&self, repository: &str) -> anyhow::Result<Vec<String>> {
        let _traces = HostTraces::note();
        let mut pushed = Vec::new();
        for t in &self.tags {
            let tag = t.rsplit_once(':').map(|(_, t)| t).unwrap_or(t);
            let dest = format!("{repository}:{tag}");
            let mut cmd = self.buildah.cmd();
            cmd.args(["manifest", "push", "--all", "--format", "oci"])
                .arg("--signature-policy")
                .arg(self.buildah.policy());
            if let Ok(tls) = std::env::var("GRACEFUL_IMAGE_TLS_VERIFY") {
                cmd.arg(format!("--tls-verify={tls}"));
            }
            cmd.arg(&self.tags[0]).arg(format!("docker://{dest}"));
            util::output(&mut cmd).with_context(|| format!("buildah push to {dest} failed"))?;
            pushed.push(dest);
        }
        Ok(pushed)
    }
}

/// The agent's static binaries (release, musl) for `target`, as the
/// Containerfile's builder makes them, one package at a time (graceful-wait
/// alone keeps graceful-api's serde feature off); returns their directory.
pub fn static_binaries(target: &str) -> anyhow::Result<PathBuf> {
    for package in ["graceful-daemon", "graceful-wait"] {
        static_build(target, package)?;
    }
    Ok(util::target_dir().join(target).join("release"))
}

/// `package`'s release build, `--locked`, for `target` (a musl target):
/// the image's binaries, and the plugin's archives (crate::plugin).
pub fn static_build(target: &str, package: &str) -> anyhow::Result<()> {
    let mut cmd = util::cargo();
    cmd.args([
        "build",
        "--release",
        "--locked",
        "--target",
        target,
        "-p",
        package,
    ]);
    println!("==> {}", util::display(&cmd));
    let hint = if target == MUSL_ARM64 {
        " (arm64 needs its Rust target and Debian's gcc-aarch64-linux-gnu: `cargo xtask setup`)"
    } else {
        ""
    };
    util::run(&mut cmd).with_context(|| format!("the static build of {package} for {target} failed{hint}"))
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
pub(crate) fn commit_time(root: &Path) -> u64 {
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
