//! `cargo xtask test`: setup, build the agent, run the whole suite.
//!
//! The integration tests (crate `tests`) run the real agent binary on the
//! real kernel, so they need root; they find the binary through
//! `GRACEFUL_BIN`. They run first, with no cluster beside them; then the
//! end-to-end tests run on the test node of `cargo xtask cluster`, which is
//! brought up for them (and down after, if it was not up before). The exit
//! code is the first failing `cargo test`'s.

use crate::util::{self, cargo, display};

/// Builds `graceful` (which builds the eBPF object through build.rs) and
/// `graceful-wait` (which the agent places in its gate directory, from
/// beside itself), and returns the path of the agent. `quiet` hides cargo's progress (errors
/// still show).
pub fn build_agent(quiet: bool) -> anyhow::Result<std::path::PathBuf> {
    let mut cmd = cargo();
    // cargo test builds a package's binaries only for its own integration
    // tests: graceful-wait's must be built here.
    cmd.args(["build", "-p", "graceful-daemon", "-p", "graceful-wait"]);
    if quiet {
        println!(
            "==> building the agent: {} (the first build takes a minute or two)",
            display(&cmd)
        );
        cmd.arg("-q");
    } else {
        println!("==> {}", display(&cmd));
    }
    util::run(&mut cmd)?;
    let bin = util::target_dir().join("debug/graceful");
    anyhow::ensure!(
        bin.exists(),
        "`cargo build -p graceful-daemon -p graceful-wait` succeeded but {} is missing",
        bin.display()
    );
    Ok(bin)
}

pub fn run(no_cluster: bool, args: &[String]) -> anyhow::Result<i32> {
    util::require_root("cargo xtask test")?;
    crate::setup::run()?;
    let bin = build_agent(false)?;

    // The kernel tests first, with no cluster agent's programs beside them.
    let mut cmd = cargo();
    cmd.args(["test", "--workspace"])
        .args(args)
        .env("GRACEFUL_BIN", &bin);
    println!("==> GRACEFUL_BIN={} {}", bin.display(), display(&cmd));
    let code = util::exit_code(util::status(&mut cmd)?);
    if code != 0 {
        return Ok(code);
    }
    if no_cluster {
        println!("==> SKIPPED the end-to-end tests on the test node (--no-cluster)");
        return Ok(0);
    }

    // Then the end-to-end tests, on a real node brought up for them.
    println!("==> the test node: cargo xtask cluster up");
    let session = crate::cluster::Session::begin()?;
    let mut cmd = cargo();
    cmd.args([
        "test",
        "-p",
        "graceful-tests",
        "--features",
        "cluster",
        "--test",
        "cluster",
    ])
    .args(args)
    .env("GRACEFUL_BIN", &bin)
    .env("GRACEFUL_KUBECONFIG", &session.kubeconfig);
    println!(
        "==> GRACEFUL_KUBECONFIG={} {}",
        session.kubeconfig.display(),
        display(&cmd)
    );
    let code = util::exit_code(util::status(&mut cmd)?);
    session.end()?;
    Ok(code)
}
