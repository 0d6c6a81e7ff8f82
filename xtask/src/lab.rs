//! The lab's program (`lab/`, package graceful-lab), run through cargo:
//! `cargo xtask cluster ...` becomes `cargo run --manifest-path
//! lab/Cargo.toml -- cluster ...`. The lab is a workspace of its own; it
//! builds into the product's target directory, so the crates they share
//! (xtask's library, test-support, graceful-wait) build once.

use std::process::Command;

use crate::util::{self, cargo};

/// The lab's manifest.
pub fn manifest() -> std::path::PathBuf {
    util::workspace_root().join("lab/Cargo.toml")
}

/// `cargo <verb> --manifest-path lab/Cargo.toml --target-dir <ours>`.
pub fn cargo_in_lab(verb: &str) -> Command {
    let mut cmd = cargo();
    cmd.arg(verb)
        .arg("--manifest-path")
        .arg(manifest())
        .arg("--target-dir")
        .arg(util::target_dir());
    cmd
}

/// The lab's command `command` with `args`, built if needed.
pub fn command(command: &str, args: &[impl AsRef<std::ffi::OsStr>]) -> Command {
    let mut cmd = cargo_in_lab("run");
    cmd.arg("--").arg(command).args(args);
    cmd
}

/// Runs a lab command in the foreground; its exit status.
pub fn run(name: &str, args: &[String]) -> anyhow::Result<i32> {
    Ok(util::exit_code(util::status(&mut command(name, args))?))
}
