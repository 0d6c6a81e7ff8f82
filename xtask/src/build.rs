//! Building the agent for the tasks that run it: the test suite here, and
//! the lab's demo, rollout and benches.

use crate::util::{self, cargo, display};

/// Builds `graceful` (which builds the eBPF object through build.rs) and
/// `graceful-wait` (which the agent places in its gate directory, from
/// beside itself), and returns the path of the agent. `quiet` hides cargo's progress (errors
/// still show).
pub fn build_agent(quiet: bool) -> anyhow::Result<std::path::PathBuf> {
    let mut cmd = cargo();
    // cargo test builds a package's binaries only for its own integration
    // tests: graceful-wait's must be built here.
    cmd.args([
        "build",
        "-p",
        "graceful-daemon",
        "-p",
        "graceful-wait",
        "-p",
        "kubectl-graceful",
    ]);
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
        "`cargo build -p graceful-daemon -p graceful-wait -p kubectl-graceful` succeeded but {} is missing",
        bin.display()
    );
    Ok(bin)
}
