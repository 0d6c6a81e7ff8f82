//! The node's programs, built here from their published Go modules, each
//! cached in the tools directory by version (a second `cluster up` builds
//! nothing):
//!
//! - Kubernetes (kube-apiserver, -controller-manager, -scheduler, kubelet,
//!   kube-proxy, kubectl) at a pinned patch release of the minor asked for
//!   (1.33 to 1.37; 1.37 by default), through a [`gomod::Wrapper`], and the
//!   pause program from the same module's `build/pause`;
//! - containerd 2 (containerd, its runc shim, ctr) and crictl, by `go install`;
//! - etcd 3.6, the version 1.37 is qualified on, through a wrapper;
//! - OPA, the policy engine of the policy-sidecar examples, by `go install`
//!   (its go.mod has no replaces): not the node's, its pods'.
//! - Istio's pilot-agent, by `go install` (no replaces either): its
//!   `istio-iptables` writes Istio's real capture rules into a test pod's
//!   namespace, and its status server relays a rewritten preStop hook, as
//!   in an Istio sidecar. Not the node's either.
//! - Helm 3, by `go install`: the suite installs, upgrades and removes
//!   graceful's chart (deploy/helm/graceful) with it. An operator's tool.
//! - The CNCF Distribution registry, by `go install`: the suite pushes the
//!   agent's image to it (`cargo xtask image --push`) and the node pulls
//!   from it, as a cluster pulls from its registry.
//! - krew and its manifest validator, by `go install`: the suite installs
//!   the plugin's release archives (`cargo xtask plugin`) with them. Not
//!   the node's either: a user's kubectl's.
//!
//! runc and the CNI plugins stay Debian's (setup installs them): runc from
//! the module proxy needs cgo and libseccomp, and Debian's 1.1.5 runs every
//! test on 1.37.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{bail, Context as _};

use super::gomod::{self, Wrapper};
use xtask::setup;

/// The Kubernetes releases a node can run: each minor at the patch release
/// tested here. `cluster up --version 1.3x` picks one.
pub const RELEASES: &[&str] = &["1.33.13", "1.34.4", "1.35.4", "1.36.3", "1.37.2"];
/// The node's Kubernetes unless asked otherwise: the newest minor.
pub const DEFAULT: &str = "1.37";
pub const CONTAINERD: &str = "v2.4.2";
pub const CRICTL: &str = "v1.37.0";
pub const ETCD: &str = "v3.6.17";
pub const OPA: &str = "v1.22.4";
/// istio.io/istio at a commit of its 1.31 development (VERSION says 1.31):
/// the only version of the module the module proxy serves here; no release
/// tag is.
pub const ISTIO: &str = "v0.0.0-20260827124520-eed52ebb66ad";
pub const HELM: &str = "v3.21.4";
/// github.com/distribution/distribution/v3: the registry.
pub const DISTRIBUTION: &str = "v3.1.2";
/// sigs.k8s.io/krew: `kubectl krew` and validate-krew-manifest.
pub const KREW: &str = "v0.4.3";

/// The commands built from k8s.io/kubernetes.
pub const KUBE_COMMANDS: &[&str] = &[
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "kubectl",
];

/// A Kubernetes release: `1.37` (its pinned patch release) or `1.37.2`.
pub fn release(asked: &str) -> anyhow::Result<&'static str> {
    let asked = asked.trim_start_matches('v');
    RELEASES
        .iter()
        .copied()
        .find(|r| *r == asked || r.rsplit_once('.').is_some_and(|(minor, _)| minor == asked))
        .with_context(|| {
            format!(
                "Kubernetes {asked} is not one the test node builds: pick one of {}",
                RELEASES.join(", ")
            )
        })
}

/// The node's programs, built and cached.
pub struct Kube {
    /// `1.37.2`.
    pub version: String,
    /// The pause program's version, as the Kubernetes tree tags it.
    pub pause_version: String,
    kube: PathBuf,
    containerd: PathBuf,
    etcd: PathBuf,
    opa: PathBuf,
    istio: PathBuf,
    helm: PathBuf,
    registry: PathBuf,
    krew: PathBuf,
}

impl Kube {
    /// A program of the node: a Kubernetes command, `pause`, `etcd`,
    /// `containerd`, `ctr`, `crictl` or `containerd-shim-runc-v2`.
    pub fn bin(&self, name: &str) -> PathBuf {
        let dir = match name {
            "etcd" => &self.etcd,
            "opa" => &self.opa,
            "pilot-agent" => &self.istio,
            "helm" => &self.helm,
            "registry" => &self.registry,
            "kubectl-krew" | "validate-krew-manifest" => &self.krew,
            "containerd" | "containerd-shim-runc-v2" | "ctr" | "crictl" => &self.containerd,
            _ => &self.kube,
        };
        dir.join("bin").join(name)
    }

    /// PATH for the node's processes and the tests: these programs first
    /// (containerd finds its shim there, the tests their kubectl), then
    /// this process's PATH and the sbin directories (the kubelet and
    /// kube-proxy run iptables, mount and friends).
    pub fn path_env(&self) -> String {
        let dirs = [
            &self.kube,
            &self.containerd,
            &self.etcd,
            &self.istio,
            &self.helm,
            &self.registry,
            &self.krew,
        ];
        let mut path: Vec<String> = dirs.iter().map(|d| d.join("bin").display().to_string()).collect();
        let inherited = std::env::var("PATH").unwrap_or_default();
        path.extend(inherited.split(':').filter(|d| !d.is_empty()).map(str::to_string));
        for d in [
            "/usr/local/sbin",
            "/usr/local/bin",
            "/usr/sbin",
            "/usr/bin",
            "/sbin",
            "/bin",
        ] {
            if !path.iter().any(|p| p == d) {
                path.push(d.to_string());
            }
        }
        path.join(":")
    }
}

/// The node's programs for Kubernetes `asked` (`1.37` or `1.37.2`), built
/// first where the cache lacks them.
pub fn ensure(asked: &str) -> anyhow::Result<Kube> {
    let version = release(asked)?;
    let tools = setup::tools_dir()?;
    let kube = tools.join(format!("kubernetes-v{version}"));
    let containerd = tools.join(format!("containerd-{CONTAINERD}"));
    let etcd = tools.join(format!("etcd-{ETCD}"));
    let opa = tools.join(format!("opa-{OPA}"));
    let istio = tools.join(format!("istio-{ISTIO}"));
    let helm = tools.join(format!("helm-{HELM}"));
    let registry = tools.join(format!("distribution-{DISTRIBUTION}"));
    let krew = tools.join(format!("krew-{KREW}"));
    let mut bins: Vec<&str> = KUBE_COMMANDS.to_vec();
    bins.push("pause");
    cached_or(
        &kube,
        &format!("kubernetes v{version}"),
        &bins,
        "about 8 minutes cold",
        |dir| build_kubernetes(dir, version),
    )?;
    cached_or(
        &containerd,
        &format!("containerd {CONTAINERD}, crictl {CRICTL}"),
        &["containerd", "containerd-shim-runc-v2", "ctr", "crictl"],
        "about 2 minutes",
        build_containerd,
    )?;
    cached_or(
        &etcd,
        &format!("etcd {ETCD}"),
        &["etcd"],
        "about a minute",
        build_etcd,
    )?;
    cached_or(&opa, &format!("opa {OPA}"), &["opa"], "about a minute", |dir| {
        gomod::install(
            &dir.join("bin"),
            &[format!("github.com/open-policy-agent/opa@{OPA}")],
            "-s -w",
        )
    })?;
    cached_or(
        &istio,
        "Istio's pilot-agent",
        &["pilot-agent"],
        "about 3 minutes cold",
        |dir| {
            gomod::install(
                &dir.join("bin"),
                &[format!("istio.io/istio/pilot/cmd/pilot-agent@{ISTIO}")],
                "-s -w",
            )
        },
    )?;
    cached_or(
        &helm,
        &format!("helm {HELM}"),
        &["helm"],
        "about a minute",
        build_helm,
    )?;
    cached_or(
        &registry,
        &format!("the registry (distribution {DISTRIBUTION})"),
        &["registry"],
        "about 2 minutes",
        |dir| {
            let m = "github.com/distribution/distribution/v3";
            gomod::install(
                &dir.join("bin"),
                &[format!("{m}/cmd/registry@{DISTRIBUTION}")],
                &format!("-s -w -X {m}/version.version={DISTRIBUTION}"),
            )
        },
    )?;
    cached_or(
        &krew,
        &format!("krew {KREW}"),
        &["kubectl-krew", "validate-krew-manifest"],
        "about a minute",
        build_krew,
    )?;
    built(version)
}

/// The node's programs for Kubernetes `asked`, as built before (by
/// [`ensure`]); nothing is built or printed.
pub fn built(asked: &str) -> anyhow::Result<Kube> {
    let version = release(asked)?;
    let tools = setup::tools_dir()?;
    let kube = tools.join(format!("kubernetes-v{version}"));
    let pause_version = fs::read_to_string(kube.join("pause.version"))
        .with_context(|| {
            format!(
                "Kubernetes v{version} is not built here: `cargo xtask cluster build --version {version}`"
            )
        })?
        .trim()
        .to_string();
    Ok(Kube {
        version: version.to_string(),
        pause_version,
        kube,
        containerd: tools.join(format!("containerd-{CONTAINERD}")),
        etcd: tools.join(format!("etcd-{ETCD}")),
        opa: tools.join(format!("opa-{OPA}")),
        istio: tools.join(format!("istio-{ISTIO}")),
        helm: tools.join(format!("helm-{HELM}")),
        registry: tools.join(format!("distribution-{DISTRIBUTION}")),
        krew: tools.join(format!("krew-{KREW}")),
    })
}

/// Runs `build` into `dir` unless `dir/bin` holds every one of `bins` and
/// a stamp that says the build finished.
fn cached_or(
    dir: &Path,
    what: &str,
    bins: &[&str],
    how_long: &str,
    build: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let complete =
        |d: &Path| d.join("stamp").is_file() && bins.iter().all(|b| d.join("bin").join(b).is_file());
    if complete(dir) {
        println!("{:<10} {what:<34} {}", "ok", dir.display());
        return Ok(());
    }
    println!(
        "{:<10} {what:<34} building from the Go module proxy into {} ({how_long}, once)",
        "...",
        dir.display()
    );
    let t = Instant::now();
    if dir.exists() {
        fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    build(dir).with_context(|| format!("building {what}"))?;
    let missing: Vec<&&str> = bins
        .iter()
        .filter(|b| !dir.join("bin").join(b).is_file())
        .collect();
    if !missing.is_empty() {
        bail!(
            "building {what} left no {missing:?} in {}",
            dir.join("bin").display()
        );
    }
    fs::write(dir.join("stamp"), format!("{what}\n"))?;
    println!("{:<10} {what:<34} {:.0} s", "built", t.elapsed().as_secs_f64());
    Ok(())
}

fn build_kubernetes(dir: &Path, version: &str) -> anyhow::Result<()> {
    let tag = format!("v{version}");
    let (go_mod, tree) = gomod::go_mod("k8s.io/kubernetes", &tag)?;
    let staging = gomod::local_replaces(&go_mod);
    anyhow::ensure!(
        staging.iter().any(|m| m == "k8s.io/api"),
        "k8s.io/kubernetes {tag}'s go.mod replaces no staging module: the wrapper recipe does not fit it"
    );
    // Staging modules are published as v0.<minor>.<patch>.
    let staging_version = format!("v0.{}", version.split_once('.').map_or(version, |(_, r)| r));
    let commands: Vec<String> = KUBE_COMMANDS
        .iter()
        .map(|c| format!("k8s.io/kubernetes/cmd/{c}"))
        .collect();
    let wrapper = Wrapper::create(
        &dir.join("module"),
        "k8s.io/kubernetes",
        &tag,
        &staging,
        &staging_version,
        &commands,
    )?;
    let mut parts = version.split('.');
    let (major, minor) = (parts.next().unwrap_or("1"), parts.next().unwrap_or("0"));
    let v = "k8s.io/component-base/version";
    let ldflags = format!(
        "-s -w -X {v}.gitVersion={tag} -X {v}.gitMajor={major} -X {v}.gitMinor={minor} -X {v}.gitTreeState=archive"
    );
    wrapper.build(&dir.join("bin"), &commands, &ldflags)?;

    // pause, from the same tree, at the tag its Makefile gives it.
    let makefile = fs::read_to_string(tree.join("build/pause/Makefile"))?;
    let pause_version = makefile
        .lines()
        .find_map(|l| l.strip_prefix("TAG ?=").or_else(|| l.strip_prefix("TAG ?= ")))
        .map(str::trim)
        .context("build/pause/Makefile names no TAG")?
        .to_string();
    xtask::util::output(
        std::process::Command::new("gcc")
            .args(["-Os", "-Wall", "-static"])
            .arg(format!("-DVERSION=v{pause_version}-graceful"))
            .arg("-o")
            .arg(dir.join("bin/pause"))
            .arg(tree.join("build/pause/linux/pause.c")),
    )?;
    fs::write(dir.join("pause.version"), format!("{pause_version}\n"))?;
    Ok(())
}

fn build_containerd(dir: &Path) -> anyhow::Result<()> {
    let m = "github.com/containerd/containerd/v2";
    let ldflags = format!("-s -w -X {m}/version.Version={CONTAINERD}");
    let cmds = ["containerd", "containerd-shim-runc-v2", "ctr"];
    let pkgs: Vec<String> = cmds.iter().map(|c| format!("{m}/cmd/{c}@{CONTAINERD}")).collect();
    gomod::install(&dir.join("bin"), &pkgs, &ldflags)?;
    let ldflags = format!("-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version={CRICTL}");
    gomod::install(
        &dir.join("bin"),
        &[format!("sigs.k8s.io/cri-tools/cmd/crictl@{CRICTL}")],
        &ldflags,
    )
}

/// Helm with the version and the Kubernetes version its Makefile stamps in:
/// without them `helm template` renders for Kubernetes 1.20 and refuses a
/// chart that needs 1.25.
/// krew as kubectl finds a plugin (`kubectl-krew` on PATH), and the
/// validator krew's index runs on every manifest submitted to it (which
/// installs each platform's archive with `kubectl krew install`). No
/// version is stamped: krew then skips its check for a newer release,
/// which would reach the network.
fn build_krew(dir: &Path) -> anyhow::Result<()> {
    let bin = dir.join("bin");
    gomod::install(
        &bin,
        &[
            format!("sigs.k8s.io/krew/cmd/krew@{KREW}"),
            format!("sigs.k8s.io/krew/cmd/validate-krew-manifest@{KREW}"),
        ],
        "-s -w",
    )?;
    fs::rename(bin.join("krew"), bin.join("kubectl-krew"))?;
    Ok(())
}

fn build_helm(dir: &Path) -> anyhow::Result<()> {
    let m = "helm.sh/helm/v3";
    let (go_mod, _) = gomod::go_mod(m, HELM)?;
    // client-go v0.36.2 is Kubernetes 1.36.
    let client_go = go_mod
        .lines()
        .find_map(|l| l.trim().strip_prefix("k8s.io/client-go v0."))
        .and_then(|v| v.split('.').next())
        .context("helm's go.mod names no k8s.io/client-go v0.x")?;
    let mut ldflags = format!("-s -w -X {m}/internal/version.version={HELM}");
    for pkg in ["pkg/lint/rules", "pkg/chartutil"] {
        ldflags.push_str(&format!(
            " -X {m}/{pkg}.k8sVersionMajor=1 -X {m}/{pkg}.k8sVersionMinor={client_go}"
        ));
    }
    gomod::install(&dir.join("bin"), &[format!("{m}/cmd/helm@{HELM}")], &ldflags)
}

fn build_etcd(dir: &Path) -> anyhow::Result<()> {
    let server = "go.etcd.io/etcd/server/v3";
    let (go_mod, _) = gomod::go_mod(server, ETCD)?;
    let wrapper = Wrapper::create(
        &dir.join("module"),
        server,
        ETCD,
        &gomod::local_replaces(&go_mod),
        ETCD,
        &[server.to_string()],
    )?;
    wrapper.build(
        &dir.join("bin"),
        &[server.to_string()],
        &format!("-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA={ETCD}"),
    )?;
    // `go build -o DIR/` names a `/v3` package's binary for the element before it.
    for name in ["server", "v3"] {
        let built = dir.join("bin").join(name);
        if built.is_file() {
            fs::rename(&built, dir.join("bin/etcd"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
