//! `cargo xtask setup`: makes a fresh machine (Debian 12, root, rustup with a
//! stable and a nightly toolchain) ready to build, test and demo graceful.
//!
//! Every step checks first and does nothing when already done, so a second
//! run takes well under a second. One line per step: `ok` or `installed`,
//! with the version in use.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context as _};

use crate::util::{self, output};

/// The eBPF side builds with this toolchain (it needs `-Z build-std`).
pub const NIGHTLY: &str = "nightly";
pub const MUSL: &str = "x86_64-unknown-linux-musl";
/// arm64's static target: the image's second architecture, cross-built
/// with Debian's gcc-aarch64-linux-gnu (.cargo/config.toml names it).
pub const MUSL_ARM64: &str = "aarch64-unknown-linux-musl";
pub const BPF_LINKER_VERSION: &str = "0.13.0";
/// Runs the fuzz targets in fuzz/ (`cargo xtask fuzz`, which installs it).
pub const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// apt packages the tests and the demo use. Each entry lists alternatives,
/// best first: the first one Debian offers is installed.
const APT: &[&[&str]] = &[
    &["iproute2"],                     // ss: the oracle for exact counts
    &["procps"],                       // ps, pkill in test scripts
    &["python3"],                      // the demo's HTTP server
    &["nginx-light", "nginx"],         // a real load balancer in tests
    &["haproxy"],                      // the load balancer of `cargo xtask rollout`
    &["wrk"],                          // the HTTP load of `cargo xtask bench nginx`
    &["qemu-system-x86"],              // kernel matrix tests under TCG
    &["busybox-static"],               // the guests' userland
    &["xz-utils"],                     // unpacks the compressed modules of Debian 6.12 kernels (vm-test)
    &["musl-tools"],                   // musl-gcc: ring (rustls) compiles C for the static builds
    &["gcc-aarch64-linux-gnu"],        // arm64's static builds: the linker, and ring's C
    &["libc6-dev-arm64-cross"],        // the headers ring's C includes for arm64
    &["qemu-user"],                    // qemu-aarch64: the image test runs arm64's binaries (no binfmt)
    &["kubernetes-client", "kubectl"], // kubectl kustomize, offline, for the manifest tests
    // The test node of `cargo xtask cluster` (Kubernetes, containerd 2 and
    // etcd are built from their Go modules: cluster/build.rs):
    &["runc"],                        // containerd's OCI runtime
    &["containernetworking-plugins"], // bridge, host-local, portmap, loopback
    &["iptables"],                    // kube-proxy's iptables mode, the CNI's masquerade
    &["openssl"],                     // the cluster's certificates
    &["buildah"],                     // `cargo xtask image`: the agent's image from the Containerfile
];

/// Packages that must come from the suite an installed relative came from.
/// This image has qemu-utils 10.0 from bookworm-backports: with backports
/// enabled, bookworm's qemu-system-x86 7.2 breaks it and apt's resolver
/// gives up ("pkgProblemResolver generated breaks"), so qemu-system-x86 is
/// installed with `-t bookworm-backports`. Without backports in the
/// sources, bookworm's 7.2 installs (replacing the 10.0 qemu-utils).
const SAME_SUITE: &[(&str, &[&str])] = &[(
    "qemu-system-x86",
    &["qemu-utils", "qemu-system-common", "qemu-block-extra"],
)];

fn line(status: &str, what: &str, detail: impl AsRef<str>) {
    println!("{status:<10} {what:<34} {}", detail.as_ref());
}

pub fn run() -> anyhow::Result<()> {
    rust_src()?;
    musl_target()?;
    bpf_linker()?;
    apt_packages()?;
    go_toolchain()?;
    promtool()?;
    Ok(())
}

/// promtool and the Prometheus server, from Debian's `prometheus` package,
/// unpacked into the tools directory rather than installed: installing the
/// package would start a Prometheus service on this machine. The tests
/// check the agent's live scrape and the chart's alert rules with promtool,
/// and scrape the agent on the test node with the server.
pub fn promtool_bin() -> anyhow::Result<PathBuf> {
    Ok(tools_dir()?.join("prometheus/usr/bin/promtool"))
}

fn promtool() -> anyhow::Result<()> {
    let bin = promtool_bin()?;
    let version = |b: &Path| output(Command::new(b).arg("--version")).ok();
    if let Some(v) = version(&bin) {
        line("ok", "promtool", v.lines().next().unwrap_or_default());
        return Ok(());
    }
    println!("{:<10} {:<34} apt-get download prometheus", "...", "promtool");
    let root = tools_dir()?.join("prometheus");
    let download = tools_dir()?.join("prometheus.download");
    for d in [&root, &download] {
        if d.exists() {
            std::fs::remove_dir_all(d)?;
        }
    }
    std::fs::create_dir_all(&download)?;
    output(
        Command::new("apt-get")
            .args(["download", "prometheus"])
            .current_dir(&download),
    )
    .context("apt-get download prometheus (Debian's archive)")?;
    let deb = std::fs::read_dir(&download)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .context("apt-get download prometheus left no .deb")?;
    output(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
    std::fs::remove_dir_all(&download)?;
    let v = version(&bin).with_context(|| format!("{} does not run", bin.display()))?;
    line("installed", "promtool", v.lines().next().unwrap_or_default());
    Ok(())
}

/// Go, which builds the test node's programs from their modules. This kind
/// of machine ships it; nothing can fetch another toolchain.
fn go_toolchain() -> anyhow::Result<()> {
    let out = Command::new("go")
        .arg("version")
        .env("GOTOOLCHAIN", "local")
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let v = String::from_utf8_lossy(&o.stdout);
            line("ok", "go", v.trim().trim_start_matches("go version "));
            Ok(())
        }
        _ => bail!(
            "no Go toolchain on PATH: the test node's Kubernetes, containerd and etcd are built with it (put Go 1.24 or newer on PATH)"
        ),
    }
}

/// cargo-fuzz, into the same tools directory as bpf-linker; the path of
/// its binary.
pub fn cargo_fuzz() -> anyhow::Result<PathBuf> {
    cargo_fuzz_installed()?;
    Ok(tools_dir()?.join("bin/cargo-fuzz"))
}

fn cargo_fuzz_installed() -> anyhow::Result<()> {
    let what = format!("cargo-fuzz {CARGO_FUZZ_VERSION}");
    let bin = tools_dir()?.join("bin/cargo-fuzz");
    let version = output(Command::new(&bin).arg("--version")).unwrap_or_default();
    if version.split_whitespace().any(|w| w == CARGO_FUZZ_VERSION) {
        line("ok", &what, bin.display().to_string());
        return Ok(());
    }
    println!("{:<10} {what:<34} building (about a minute)", "...");
    let mut cmd = util::rustup_cargo(NIGHTLY);
    cmd.args([
        "install",
        "cargo-fuzz",
        "--locked",
        "--version",
        CARGO_FUZZ_VERSION,
        "--root",
    ])
    .arg(tools_dir()?);
    output(&mut cmd)?;
    line("installed", &what, bin.display().to_string());
    Ok(())
}

/// A `rustc`/`cargo`/`rustup` call through rustup, clean of the variables
/// `cargo run` gives us.
fn rustup_tool(program: &str) -> Command {
    let mut cmd = Command::new(program);
    for var in ["CARGO", "RUSTC", "RUSTDOC", "LD_LIBRARY_PATH"] {
        cmd.env_remove(var);
    }
    cmd
}

fn sysroot(toolchain: Option<&str>) -> anyhow::Result<PathBuf> {
    let mut cmd = rustup_tool("rustc");
    if let Some(t) = toolchain {
        cmd.arg(format!("+{t}"));
    }
    let out = output(cmd.args(["--print", "sysroot"])).with_context(|| match toolchain {
        Some(t) => format!("the {t} toolchain is needed: `rustup toolchain install {t}`"),
        None => "a Rust toolchain is needed: install rustup".to_string(),
    })?;
    Ok(PathBuf::from(out.trim()))
}

fn rustc_version(toolchain: Option<&str>) -> String {
    let mut cmd = rustup_tool("rustc");
    if let Some(t) = toolchain {
        cmd.arg(format!("+{t}"));
    }
    output(cmd.arg("--version")).map_or_else(|_| "?".into(), |s| s.trim().to_string())
}

fn rust_src() -> anyhow::Result<()> {
    let what = "rust-src (nightly)";
    let src = sysroot(Some(NIGHTLY))?.join("lib/rustlib/src/rust/library");
    if src.is_dir() {
        line("ok", what, rustc_version(Some(NIGHTLY)));
        return Ok(());
    }
    util::run(rustup_tool("rustup").args(["component", "add", "rust-src", "--toolchain", NIGHTLY]))?;
    line("installed", what, rustc_version(Some(NIGHTLY)));
    Ok(())
}

/// The plugin's macOS targets: CI checks that kubectl-graceful builds for
/// them (`cargo check --target`), since no macOS machine is here.
pub const MACOS: [&str; 2] = ["aarch64-apple-darwin", "x86_64-apple-darwin"];

fn musl_target() -> anyhow::Result<()> {
    for target in [MUSL, MUSL_ARM64].into_iter().chain(MACOS) {
        rust_target(target)?;
    }
    Ok(())
}

/// Rust's standard library for `target`, for the toolchain cargo runs us
/// with (stable), as `rustup target add` picks it.
fn rust_target(target: &str) -> anyhow::Result<()> {
    let what = format!("target {target}");
    let dir = sysroot(None)?.join("lib/rustlib").join(target).join("lib");
    if dir.is_dir() {
        line("ok", &what, rustc_version(None));
        return Ok(());
    }
    util::run(rustup_tool("rustup").args(["target", "add", target]))?;
    line("installed", &what, rustc_version(None));
    Ok(())
}

/// Where graceful's tools live: `$GRACEFUL_TOOLS`, or
/// `~/.local/share/graceful/tools`. The daemon's build.rs looks there too.
pub fn tools_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("GRACEFUL_TOOLS").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    Ok(data_dir()?.join("tools"))
}

fn data_dir() -> anyhow::Result<PathBuf> {
    Ok(util::home()?.join(".local/share/graceful"))
}

fn bpf_linker_version(bin: &Path) -> Option<String> {
    let mut cmd = Command::new(bin);
    cmd.env_remove("LD_LIBRARY_PATH").arg("--version");
    output(&mut cmd).ok().map(|s| s.trim().to_string())
}

/// bpf-linker, built against the nightly toolchain's own LLVM (see
/// DESIGN.md): no system LLVM needed, and its LLVM matches rustc's.
fn bpf_linker() -> anyhow::Result<()> {
    let what = format!("bpf-linker {BPF_LINKER_VERSION}");
    let tools = tools_dir()?;
    let bin = tools.join("bin/bpf-linker");
    if let Some(v) = bpf_linker_version(&bin) {
        if v.split_whitespace().any(|w| w == BPF_LINKER_VERSION) {
            line("ok", &what, bin.display().to_string());
            return Ok(());
        }
    }

    let lib = sysroot(Some(NIGHTLY))?.join("lib");
    let (real, major) = find_libllvm(&lib)?;
    let prefix = data_dir()?.join("llvm-prefix");
    let prefix_lib = prefix.join("lib");
    fs::create_dir_all(&prefix_lib).with_context(|| format!("cannot create {}", prefix_lib.display()))?;
    let name = real.file_name().context("libLLVM has no file name")?.to_owned();
    // Drop links to another toolchain's LLVM; keep ours untouched if they are
    // right already (a bpf-linker running right now loads through them).
    for entry in fs::read_dir(&prefix_lib)?.flatten() {
        let n = entry.file_name();
        if n != "libLLVM.so" && n != name.as_os_str() {
            fs::remove_file(entry.path())?;
        }
    }
    for link in [prefix_lib.join("libLLVM.so"), prefix_lib.join(&name)] {
        if fs::read_link(&link).ok().as_deref() == Some(real.as_path()) {
            continue;
        }
        if link.symlink_metadata().is_ok() {
            fs::remove_file(&link)?;
        }
        symlink(&real, &link)
            .with_context(|| format!("cannot link {} to {}", link.display(), real.display()))?;
    }

    println!(
        "{:<10} {what:<34} building against {} (about a minute)",
        "...",
        real.display()
    );
    let mut cmd = util::rustup_cargo(NIGHTLY);
    cmd.env("LLVM_PREFIX", &prefix)
        .args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION])
        .args(["--no-default-features", "--features", &format!("llvm-{major}")])
        .arg("--root")
        .arg(&tools);
    output(&mut cmd).with_context(|| format!("building bpf-linker with LLVM_PREFIX={}", prefix.display()))?;
    match bpf_linker_version(&bin) {
        Some(v) if v.contains(BPF_LINKER_VERSION) => {
            line(
                "installed",
                &what,
                format!("{} (LLVM {major} from {})", bin.display(), real.display()),
            );
            Ok(())
        }
        other => bail!(
            "bpf-linker was built but `{} --version` says {other:?}; it loads LLVM through {}",
            bin.display(),
            prefix_lib.display()
        ),
    }
}

/// The nightly toolchain's real libLLVM (a big shared object; the
/// `libLLVM-<n>-rust-*.so` beside it is a tiny linker script) and its major.
fn find_libllvm(lib: &Path) -> anyhow::Result<(PathBuf, String)> {
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in fs::read_dir(lib)
        .with_context(|| format!("cannot list {}", lib.display()))?
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("libLLVM") || !name.contains(".so") {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        if meta.is_file() && meta.len() > 1 << 20 && best.as_ref().is_none_or(|(len, _)| meta.len() > *len) {
            best = Some((meta.len(), entry.path()));
        }
    }
    let (_, real) = best.with_context(|| {
        format!(
            "no libLLVM shared object in {}: is the nightly toolchain complete?",
            lib.display()
        )
    })?;
    // libLLVM.so.22.1-rust-1.97.0-nightly → 22
    let name = real
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let major = name
        .split(".so.")
        .nth(1)
        .and_then(|v| v.split(['.', '-']).next())
        .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
        .with_context(|| format!("cannot read the LLVM version from {name}"))?
        .to_string();
    Ok((real, major))
}

/// `package → version` of the installed ones among `names`.
fn installed(names: &[&str]) -> BTreeMap<String, String> {
    let mut cmd = Command::new("dpkg-query");
    cmd.args(["-W", "-f", "${Package}\t${db:Status-Abbrev}\t${Version}\n"])
        .args(names);
    // Exits 1 when some name is unknown; what it prints is still right.
    let Ok(out) = cmd.stdin(Stdio::null()).stderr(Stdio::null()).output() else {
        return BTreeMap::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            let (pkg, status, version) = (f.next()?, f.next()?, f.next()?);
            status
                .starts_with("ii")
                .then(|| (pkg.to_string(), version.to_string()))
        })
        .collect()
}

fn has_candidate(pkg: &str) -> bool {
    let mut cmd = Command::new("apt-cache");
    cmd.args(["policy", pkg]);
    output(&mut cmd).is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.trim().strip_prefix("Candidate:"))
            .is_some_and(|c| c.trim() != "(none)")
    })
}

fn apt_packages() -> anyhow::Result<()> {
    let all: Vec<&str> = APT.iter().flat_map(|alts| alts.iter().copied()).collect();
    let have = installed(&all);
    let missing: Vec<&[&str]> = APT
        .iter()
        .copied()
        .filter(|alts| !alts.iter().any(|p| have.contains_key(*p)))
        .collect();
    for alts in APT {
        if let Some(p) = alts.iter().find(|p| have.contains_key(**p)) {
            line("ok", &format!("apt {p}"), &have[*p]);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }

    let wanted: Vec<String> = missing.iter().map(|alts| alts.join(" or ")).collect();
    if Command::new("apt-get")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        bail!(
            "these packages are missing and this is not a Debian system: {}",
            wanted.join(", ")
        );
    }
    if !util::is_root() {
        bail!(
            "these apt packages are missing: {}; run `cargo xtask setup` as root to install them",
            wanted.join(", ")
        );
    }
    println!("{:<10} {:<34} apt-get update", "...", "apt packages");
    apt_get(&["update"])?;
    let mut pick: Vec<&str> = Vec::new();
    for alts in &missing {
        let p = alts.iter().find(|p| has_candidate(p)).with_context(|| {
            format!(
                "Debian offers none of {} (check /etc/apt/sources.list)",
                alts.join(", ")
            )
        })?;
        pick.push(*p);
    }
    // Each package tied to a relative's suite in an apt-get of its own (`-t`
    // applies to the whole transaction); the rest together.
    let mut plain = Vec::new();
    for p in &pick {
        match target_release(p) {
            Some((suite, why)) => {
                println!(
                    "{:<10} {:<34} apt-get install -t {suite} {p} (the suite of {why})",
                    "...", "apt packages"
                );
                apt_get(&["install", "-y", "--no-install-recommends", "-t", &suite, p])?;
            }
            None => plain.push(*p),
        }
    }
    if !plain.is_empty() {
        println!(
            "{:<10} {:<34} apt-get install {}",
            "...",
            "apt packages",
            plain.join(" ")
        );
        let mut args = vec!["install", "-y", "--no-install-recommends"];
        args.extend(&plain);
        apt_get(&args)?;
    }
    let now = installed(&pick);
    for p in &pick {
        match now.get(*p) {
            Some(v) => line("installed", &format!("apt {p}"), v),
            None => bail!("apt-get installed {p} but dpkg does not list it as installed"),
        }
    }
    Ok(())
}

/// The suite `pkg` must be installed from, and why: the suite (as the
/// machine's sources name it) that an installed relative's version came
/// from (see [`SAME_SUITE`]). None: no relative installed, or its version is
/// in none of the machine's sources (only in dpkg's status).
fn target_release(pkg: &str) -> Option<(String, String)> {
    let (_, relatives) = SAME_SUITE.iter().find(|(p, _)| *p == pkg)?;
    for (rel, version) in installed(relatives) {
        let policy = output(Command::new("apt-cache").args(["policy", &rel])).ok()?;
        if let Some(suite) = suite_of(&policy, &version) {
            return Some((suite, format!("the installed {rel} {version}")));
        }
    }
    None
}

/// The suite (`bookworm-backports`) that offers `version` in `apt-cache
/// policy` output: the first archive line under that version in the table.
fn suite_of(policy: &str, version: &str) -> Option<String> {
    let mut under = false;
    for l in policy.lines() {
        let words: Vec<&str> = l.trim().trim_start_matches("***").split_whitespace().collect();
        match words[..] {
            // ` *** 1:10.0.2+ds-2~bpo12+1 100`: a version and its priority.
            [v, prio] if !prio.starts_with('/') && prio.bytes().all(|b| b.is_ascii_digit()) => {
                under = v == version;
            }
            // `100 http://deb.debian.org/debian bookworm-backports/main amd64 Packages`
            [_, _uri, dist, ..] if under => {
                return dist.split('/').next().map(str::to_string);
            }
            _ => {}
        }
    }
    None
}

fn apt_get(args: &[&str]) -> anyhow::Result<()> {
    let mut cmd = Command::new("apt-get");
    cmd.args(["-q", "-o", "Dpkg::Use-Pty=0"])
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdin(Stdio::null());
    output(&mut cmd).map(drop)
}

#[cfg(test)]
mod tests;
