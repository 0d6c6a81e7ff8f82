//! The programs that go into the guest, built static with musl: the agent,
//! its keeper and its `graceful-wait` hook, the test binary, its peer and the guest's
//! `/init` (the lab's `vm-init` crate).

use std::{path::PathBuf, process::Stdio};

use anyhow::{bail, Context as _};

use super::elf;
use xtask::util::{self, cargo, display};

pub const MUSL: &str = "x86_64-unknown-linux-musl";

#[derive(Debug)]
pub struct Binaries {
    /// `graceful` (graceful-daemon).
    pub graceful: PathBuf,
    /// `graceful-wait`, which the agent looks for beside itself.
    pub wait: PathBuf,
    /// `graceful-keeper`, which `graceful daemon --keeper on` execs, from
    /// beside itself too.
    pub keeper: PathBuf,
    pub peer: PathBuf,
    pub init: PathBuf,
    /// The integration test executable (`tests/tests/kernel`).
    pub tests: PathBuf,
}

pub fn build(release: bool) -> anyhow::Result<Binaries> {
    let profile = if release { "release" } else { "debug" };
    // The product's binaries and the tests' peer; the guest's /init is the
    // lab's own crate.
    let mut cmd = cargo();
    cmd.args(["build", "--target", MUSL])
        .args([
            "-p",
            "graceful-daemon",
            "-p",
            "graceful-wait",
            "-p",
            "graceful-tests",
        ])
        .args([
            "--bin",
            "graceful",
            "--bin",
            "graceful-keeper",
            "--bin",
            "graceful-wait",
            "--bin",
            "graceful-peer",
        ]);
    let mut init = xtask::lab::cargo_in_lab("build");
    init.args(["--target", MUSL, "-p", "graceful-vm-init"]);
    for cmd in [&mut cmd, &mut init] {
        if release {
            cmd.arg("--release");
        }
        println!("==> {}", display(cmd));
        util::run(cmd).context("the musl build failed (`cargo xtask setup` adds the musl target)")?;
    }

    let mut cmd = cargo();
    cmd.args([
        "test",
        "--no-run",
        "--target",
        MUSL,
        "-p",
        "graceful-tests",
        "--test",
        "kernel",
    ])
    // Artifacts as JSON on stdout; errors rendered for humans on stderr.
    .args(["--message-format=json-render-diagnostics"]);
    if release {
        cmd.arg("--release");
    }
    println!("==> {}", display(&cmd));
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run `{}`", display(&cmd)))?;
    if !out.status.success() {
        bail!("`{}` failed ({})", display(&cmd), out.status);
    }
    let tests = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "kernel")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .context("cargo test --no-run named no executable for the `kernel` test")?;

    let dir = util::target_dir().join(MUSL).join(profile);
    let bins = Binaries {
        graceful: dir.join("graceful"),
        wait: dir.join("graceful-wait"),
        keeper: dir.join("graceful-keeper"),
        peer: dir.join("graceful-peer"),
        init: dir.join("graceful-vm-init"),
        tests,
    };
    for bin in [
        &bins.graceful,
        &bins.wait,
        &bins.keeper,
        &bins.peer,
        &bins.init,
        &bins.tests,
    ] {
        let data = std::fs::read(bin).with_context(|| format!("{} was not built", bin.display()))?;
        if !elf::is_static(&data).with_context(|| bin.display().to_string())? {
            bail!(
                "{} is dynamically linked: the guest has no musl loader. Is a linker override in \
                 .cargo/config.toml or RUSTFLAGS turning off static linking for {MUSL}?",
                bin.display()
            );
        }
    }
    Ok(bins)
}
