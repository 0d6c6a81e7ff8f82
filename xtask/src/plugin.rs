//! `cargo xtask plugin`: kubectl-graceful as krew installs it. One release
//! archive per platform (the binary and the LICENSE, a gzipped tar that one
//! commit makes byte for byte the same) and the krew manifest that names
//! each with its sha256, under `target/plugin/`.
//!
//! The platforms are Linux's, amd64 and arm64, static (musl) as the
//! image's binaries: any distribution's kubectl runs them. macOS is not
//! offered: the plugin compiles for it (CI checks it), but its TLS verifier
//! (kube-rs's rustls-platform-verifier) links Apple's Security framework,
//! which only the macOS SDK carries; a Mac builds it (docs/releasing.md).
//!
//! The manifest's `uri`s are `--base-url` and the archive's name: where
//! the release's files are published. The suite serves the same archives
//! on loopback and runs krew's own validator on the manifest
//! (tests/tests/cluster/krew.rs).

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

use crate::{
    image::{Arch, ARCHES},
    util,
};

/// The plugin's name for krew: `kubectl krew install graceful`, which runs
/// as `kubectl graceful`.
pub const NAME: &str = "graceful";
/// The binary kubectl finds on PATH.
pub const BIN: &str = "kubectl-graceful";

/// The base URL of the manifest `cargo xtask test` writes: a name that
/// resolves nowhere (RFC 2606), since the test serves the archives itself.
pub const TEST_BASE_URL: &str = "https://release.invalid/graceful";

/// krew's `os` label of every archive: the platforms are Linux's, one per
/// architecture of the image ([`ARCHES`]: `arch` is its OCI name, krew's
/// `GOARCH` too).
pub const OS: &str = "linux";

/// What [`build`] wrote.
pub struct Built {
    /// `target/plugin/graceful.yaml`.
    pub manifest: PathBuf,
    /// Each architecture's archive and its sha256 (hex), in [`ARCHES`]' order.
    pub archives: Vec<(Arch, PathBuf, String)>,
}

/// The archive's file name for `a`: `kubectl-graceful_v0.1.0_linux_amd64.tar.gz`.
pub fn archive_name(a: &Arch) -> String {
    format!("{BIN}_v{}_{OS}_{}.tar.gz", env!("CARGO_PKG_VERSION"), a.oci)
}

/// Builds the plugin for every platform (release, `--locked`), packs each
/// archive and writes the manifest whose `uri`s start with `base_url`.
pub fn build(base_url: &str) -> anyhow::Result<Built> {
    let out = util::target_dir().join("plugin");
    if out.exists() {
        fs::remove_dir_all(&out).with_context(|| format!("cannot remove {}", out.display()))?;
    }
    fs::create_dir_all(&out)?;
    let license = util::workspace_root().join("LICENSE");
    let mtime = crate::image::commit_time(&util::workspace_root());
    let mut archives = Vec::new();
    for p in ARCHES {
        crate::image::static_build(p.target, BIN)?;
        let bin = util::target_dir().join(p.target).join("release").join(BIN);
        let stage = out.join(format!("stage-{}", p.oci));
        fs::create_dir_all(&stage)?;
        fs::copy(&bin, stage.join(BIN)).with_context(|| format!("no {}", bin.display()))?;
        fs::copy(&license, stage.join("LICENSE"))?;
        let archive = out.join(archive_name(&p));
        pack(&stage, &archive, mtime)?;
        fs::remove_dir_all(&stage)?;
        let sum = sha256(&archive)?;
        archives.push((p, archive, sum));
    }
    let manifest = out.join(format!("{NAME}.yaml"));
    fs::write(&manifest, manifest_text(base_url, &archives))?;
    Ok(Built { manifest, archives })
}

/// A gzipped tar of `stage`'s files, the same bytes for the same files:
/// names in byte order, owner root, every time the commit's, no name or time in
/// gzip's header.
fn pack(stage: &Path, archive: &Path, mtime: u64) -> anyhow::Result<()> {
    let tar = archive.with_extension("");
    util::run(
        Command::new("tar")
            .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner"])
            .arg(format!("--mtime=@{mtime}"))
            .args(["--mode=u+rw,go+r,go-w", "-C"])
            .arg(stage)
            .arg("-cf")
            .arg(&tar)
            .args(["LICENSE", BIN]),
    )?;
    util::run(Command::new("gzip").args(["-n", "-9", "-f"]).arg(&tar))?;
    anyhow::ensure!(archive.is_file(), "gzip left no {}", archive.display());
    Ok(())
}

fn sha256(file: &Path) -> anyhow::Result<String> {
    let out = util::output(Command::new("sha256sum").arg(file))?;
    let sum = out.split_whitespace().next().unwrap_or_default().to_string();
    anyhow::ensure!(
        sum.len() == 64 && sum.bytes().all(|b| b.is_ascii_hexdigit()),
        "sha256sum printed {out:?}"
    );
    Ok(sum)
}

/// The krew manifest (krew.googlecontainertools.github.com/v1alpha2).
fn manifest_text(base_url: &str, archives: &[(Arch, PathBuf, String)]) -> String {
    let base = base_url.trim_end_matches('/');
    let mut platforms = String::new();
    for (p, archive, sum) in archives {
        let file = archive.file_name().unwrap_or_default().to_string_lossy();
        platforms.push_str(&format!(
            "  - selector:
      matchLabels:
        os: {os}
        arch: {arch}
    uri: {base}/{file}
    sha256: {sum}
    bin: {BIN}
    files:
      - from: {BIN}
        to: .
      - from: LICENSE
        to: .
",
            os = OS,
            arch = p.oci,
        ));
    }
    format!(
        "# Written by `cargo xtask plugin --base-url {base}`: submit it to a krew
# index with the archives published at that URL.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: {NAME}
spec:
  version: v{version}
  shortDescription: Every node's graceful agent, with your own RBAC
  description: |
    kubectl graceful reaches the graceful agent on each node through the
    API server's pods/portforward, with the caller's own RBAC: the
    connections a pod holds, the drains under way and how they ended, a
    preflight of every node before graceful is installed, and adopt, which
    gives a workload graceful's preStop gate without editing its manifest.
  caveats: |
    The plugin talks to graceful's agents in graceful-system: install the
    agent first (its chart or deploy/base). It needs get and create on
    pods/portforward there, and list on pods.
  platforms:
{platforms}",
        version = env!("CARGO_PKG_VERSION"),
    )
}
