//! The lab's programs built on the integration tests' support
//! (`lab/programs`, package graceful-lab-programs): `graceful-bench`,
//! `graceful-rollout` and `graceful-cluster-demo`. They are built from the
//! lab's workspace into the product's target directory, beside the agent
//! and the tests' peer (`graceful-peer`), which they find beside themselves.

use std::path::PathBuf;

use anyhow::Context as _;
use xtask::util;

/// Builds the program `bin` (release or debug); its path.
pub fn build(bin: &str, release: bool) -> anyhow::Result<PathBuf> {
    let mut cmd = xtask::lab::cargo_in_lab("build");
    cmd.args(["-q", "-p", "graceful-lab-programs", "--bin", bin]);
    if release {
        cmd.arg("--release");
    }
    println!("==> {}", util::display(&cmd));
    util::run(&mut cmd).with_context(|| format!("building {bin} failed"))?;
    Ok(util::target_dir()
        .join(if release { "release" } else { "debug" })
        .join(bin))
}
