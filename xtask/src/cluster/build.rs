//! Kubernetes v1.20.2, built here from Debian's archive: bookworm's
//! `kubernetes` source package (the whole upstream tree with its `vendor/`,
//! the only complete Kubernetes source Debian has) and Go 1.23 from
//! bookworm-backports. Nothing comes from a Go module proxy, which this kind
//! of machine cannot reach.
//!
//! The binaries are cached in the tools directory with a stamp naming what
//! they were built from; a second `cluster up` builds nothing. The build
//! tree and Go's cache (about 2 GB) are removed once the binaries are in.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{bail, Context as _};

use crate::{
    debian::{self, PrivateApt, ARCHIVE},
    setup, util,
};

/// The upstream release inside bookworm's source package.
pub const VERSION: &str = "v1.20.2";
/// What the cluster runs, all from the same tree.
pub const BINARIES: &[&str] = &[
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
];
/// The pause image's program: `build/pause/linux/pause.c` of the same tree,
/// at the version its Makefile tags.
pub const PAUSE_VERSION: &str = "3.4";
const GO_PACKAGES: &[&str] = &["golang-1.23-go", "golang-1.23-src"];
/// v1.20's vendored reflect2 1.0.1 breaks on Go 1.18+; Debian's 1.0.2 works.
const REFLECT2: &str = "golang-github-modern-go-reflect2-dev";

/// The cached binaries.
pub struct Kube {
    pub dir: PathBuf,
    /// The source package's version, e.g. `1.20.5+really1.20.2-1.1+deb12u1`.
    pub source: String,
}

impl Kube {
    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }
}

fn cache_dir() -> anyhow::Result<PathBuf> {
    Ok(setup::tools_dir()?.join(format!("kubernetes-{VERSION}")))
}

/// What a cache holds, if it is complete: the stamp's source version.
fn cached(dir: &Path) -> Option<String> {
    let stamp: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("stamp.json")).ok()?).ok()?;
    let complete = BINARIES
        .iter()
        .chain(&["pause"])
        .all(|b| dir.join("bin").join(b).is_file());
    complete.then(|| stamp["source"].as_str().map(str::to_string))?
}

/// The binaries, built first if the cache lacks them.
pub fn ensure() -> anyhow::Result<Kube> {
    let dir = cache_dir()?;
    let what = format!("kubernetes {VERSION}");
    if let Some(source) = cached(&dir) {
        println!("{:<10} {what:<34} {} (source {source})", "ok", dir.display());
        return Ok(Kube { dir, source });
    }
    println!(
        "{:<10} {what:<34} building from bookworm's source package into {} (about 5 minutes, once)",
        "...",
        dir.display()
    );
    let started = Instant::now();
    let work = dir.join("work");
    if work.exists() {
        fs::remove_dir_all(&work).with_context(|| format!("cannot remove {}", work.display()))?;
    }
    let source = build(&dir, &work)?;
    fs::remove_dir_all(&work).with_context(|| format!("cannot remove {}", work.display()))?;
    println!(
        "{:<10} {what:<34} {} (source {source}, {:.0} s)",
        "built",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(Kube { dir, source })
}

fn build(dir: &Path, work: &Path) -> anyhow::Result<String> {
    let apt = PrivateApt::new(
        &setup::tools_dir()?.join("apt-bookworm"),
        &[
            format!("deb {ARCHIVE} bookworm main"),
            format!("deb-src {ARCHIVE} bookworm main"),
            format!("deb {ARCHIVE} bookworm-backports main"),
        ],
    )?;

    // Go, and reflect2's fixed files, unpacked (not installed).
    let debs = work.join("debs");
    let go_root = work.join("go");
    let mut go_version = String::new();
    for pkg in GO_PACKAGES.iter().chain(&[REFLECT2]) {
        let version = apt.version(pkg)?;
        if *pkg == GO_PACKAGES[0] {
            go_version = version.clone();
        }
        debian::unpack(&apt.download(pkg, &version, &debs)?, &go_root)?;
    }
    let goroot = go_root.join("usr/lib/go-1.23");
    let go = goroot.join("bin/go");

    // The source tree.
    let src_dl = work.join("source");
    apt.source("kubernetes", &src_dl)?;
    let orig = debian::find(&src_dl, |n| n.ends_with(".orig.tar.gz")).with_context(|| {
        format!(
            "apt-get source kubernetes left no .orig.tar.gz in {}",
            src_dl.display()
        )
    })?;
    let dsc = debian::find(&src_dl, |n| n.ends_with(".dsc")).context("no .dsc")?;
    let source = dsc
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.strip_prefix("kubernetes_"))
        .unwrap_or("?")
        .to_string();
    let upstream = VERSION.trim_start_matches('v');
    if !orig.to_string_lossy().contains(&format!("really{upstream}")) && !source.contains(upstream) {
        bail!(
            "bookworm's kubernetes source is {source}, not Kubernetes {VERSION}: the build fixes here are for {VERSION}"
        );
    }
    let gopath = work.join("gopath");
    let tree = gopath.join("src/k8s.io/kubernetes");
    fs::create_dir_all(&tree)?;
    util::run(
        Command::new("tar")
            .args(["xzf"])
            .arg(&orig)
            .arg("-C")
            .arg(&tree)
            .args(["--strip-components=1"]),
    )?;

    fix_reflect2(&tree, &go_root)?;

    let go_cmd = |args: &[&str]| {
        let mut cmd = Command::new(&go);
        cmd.current_dir(&tree)
            .args(args)
            .env("GOROOT", &goroot)
            .env("GOPATH", &gopath)
            .env("GOCACHE", work.join("gocache"))
            // v1.20 builds in GOPATH mode only; nothing may be fetched.
            .env("GO111MODULE", "off")
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "")
            .env("CGO_ENABLED", "0")
            .env("PATH", format!("{}:/usr/bin:/bin", goroot.join("bin").display()));
        cmd
    };

    // The apiserver's OpenAPI definitions are generated, not shipped.
    step("openapi-gen", || {
        let gen = work.join("openapi-gen");
        util::run(
            go_cmd(&["build", "-o"])
                .arg(&gen)
                .arg("./vendor/k8s.io/kube-openapi/cmd/openapi-gen"),
        )?;
        let inputs = openapi_inputs(&tree)?;
        let mut cmd = Command::new(&gen);
        cmd.current_dir(&tree)
            .env("GOPATH", &gopath)
            .env("GOROOT", &goroot)
            .env("GO111MODULE", "off")
            .arg("-i")
            .arg(inputs.join(","))
            .args([
                "-p",
                "k8s.io/kubernetes/pkg/generated/openapi",
                "-O",
                "zz_generated.openapi",
            ])
            .args(["-h", "vendor/k8s.io/code-generator/hack/boilerplate.go.txt"])
            .arg("-r")
            .arg(work.join("openapi-violations.report"));
        util::output(&mut cmd).map(drop)
    })?;

    let bin = dir.join("bin");
    fs::create_dir_all(&bin)?;
    let v = "k8s.io/kubernetes/vendor/k8s.io/component-base/version";
    let (major, minor) = {
        let mut p = upstream.split('.');
        (p.next().unwrap_or("1"), p.next().unwrap_or("20"))
    };
    let ldflags = format!(
        "-s -w -X {v}.gitVersion={VERSION} -X {v}.gitMajor={major} -X {v}.gitMinor={minor} -X {v}.gitTreeState=archive"
    );
    for name in BINARIES {
        step(name, || {
            let out = bin.join(name);
            util::output(
                go_cmd(&["build", "-ldflags", &ldflags, "-o"])
                    .arg(&out)
                    .arg(format!("./cmd/{name}")),
            )
            .map(drop)
        })?;
    }
    step("pause", || {
        util::output(
            Command::new("gcc")
                .args(["-Os", "-Wall", "-static"])
                .arg(format!("-DVERSION=v{PAUSE_VERSION}-graceful"))
                .arg("-o")
                .arg(bin.join("pause"))
                .arg(tree.join("build/pause/linux/pause.c")),
        )
        .map(drop)
    })?;

    let stamp = serde_json::json!({
        "version": VERSION,
        "source": source,
        "go": go_version,
        "binaries": BINARIES,
    });
    fs::write(dir.join("stamp.json"), serde_json::to_string_pretty(&stamp)?)?;
    Ok(source)
}

fn step(what: &str, f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    let t = Instant::now();
    f().with_context(|| format!("building {what}"))?;
    println!("{:<10} {:<34} {:.0} s", "built", what, t.elapsed().as_secs_f64());
    Ok(())
}

/// Replaces the vendored reflect2 1.0.1 with Debian's 1.0.2.
fn fix_reflect2(tree: &Path, unpacked: &Path) -> anyhow::Result<()> {
    let vendored = tree.join("vendor/github.com/modern-go/reflect2");
    let debian = unpacked.join("usr/share/gocode/src/github.com/modern-go/reflect2");
    for e in fs::read_dir(&vendored)?.flatten() {
        if e.file_name().to_string_lossy().ends_with(".go") {
            fs::remove_file(e.path())?;
        }
    }
    let mut n = 0;
    for e in fs::read_dir(&debian)
        .with_context(|| format!("{REFLECT2} has no {}", debian.display()))?
        .flatten()
    {
        let name = e.file_name();
        if name.to_string_lossy().ends_with(".go") && !name.to_string_lossy().ends_with("_test.go") {
            fs::copy(e.path(), vendored.join(&name))?;
            n += 1;
        }
    }
    anyhow::ensure!(n > 0, "{REFLECT2} holds no Go files");
    Ok(())
}

/// The packages to generate OpenAPI definitions for, as upstream's
/// `build/root/Makefile.generated_files` finds them: every directory of the
/// tree (staging/src named as its vendor/ alias; not vendor/ itself, nor
/// `_*` and `.*`) with a Go file carrying a `// +k8s:` tag, of which those
/// that say `+k8s:openapi-gen=`, without code-generator and sample-apiserver.
fn openapi_inputs(tree: &Path) -> anyhow::Result<Vec<String>> {
    let mut dirs = std::collections::BTreeSet::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut tagged = false;
        for e in fs::read_dir(tree.join(&rel))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = rel.join(&name);
            let ft = e.file_type()?;
            if ft.is_dir() {
                let top = rel.as_os_str().is_empty();
                if name.starts_with('_') || name.starts_with('.') || (top && name == "vendor") {
                    continue;
                }
                stack.push(path);
            } else if ft.is_file() && name.ends_with(".go") && !tagged {
                let text = fs::read_to_string(e.path()).unwrap_or_default();
                tagged = text.lines().any(|l| {
                    l.strip_prefix("//")
                        .is_some_and(|r| r.trim_start().starts_with("+k8s:"))
                }) && text.contains("+k8s:openapi-gen=");
            }
        }
        if tagged {
            let rel = rel.to_string_lossy().into_owned();
            let rel = match rel.strip_prefix("staging/src/") {
                Some(r) => format!("vendor/{r}"),
                None => rel,
            };
            if !rel.starts_with("vendor/k8s.io/code-generator")
                && !rel.starts_with("vendor/k8s.io/sample-apiserver")
            {
                dirs.insert(format!("k8s.io/kubernetes/{rel}"));
            }
        }
    }
    anyhow::ensure!(
        !dirs.is_empty(),
        "no package in {} asks for OpenAPI definitions",
        tree.display()
    );
    Ok(dirs.into_iter().collect())
}
