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

/// How long each phase took, printed at the end and written to
/// `target/test-phases.txt` (CI's time split reads it).
struct Phases(Vec<(&'static str, f64)>, std::time::Instant);

impl Phases {
    fn new() -> Phases {
        Phases(Vec::new(), std::time::Instant::now())
    }
    /// Ends the phase that ran since the last mark.
    fn mark(&mut self, what: &'static str) {
        self.0.push((what, self.1.elapsed().as_secs_f64()));
        self.1 = std::time::Instant::now();
    }
    fn report(&self) {
        let text: String = self
            .0
            .iter()
            .map(|(w, s)| format!("{w:<28} {s:>6.0} s\n"))
            .collect();
        println!("==> cargo xtask test, by phase:\n{text}");
        let _ = std::fs::write(util::target_dir().join("test-phases.txt"), text);
    }
}

pub fn run(no_cluster: bool, args: &[String]) -> anyhow::Result<i32> {
    util::require_root("cargo xtask test")?;
    let mut phases = Phases::new();
    let code = run_phases(no_cluster, args, &mut phases);
    phases.report();
    code
}

fn run_phases(no_cluster: bool, args: &[String], phases: &mut Phases) -> anyhow::Result<i32> {
    crate::setup::run()?;
    phases.mark("setup");
    let bin = build_agent(false)?;
    phases.mark("agent build");

    // The kernel tests first, with no cluster agent's programs beside them.
    let mut cmd = cargo();
    cmd.args(["test", "--workspace"])
        .args(args)
        .env("GRACEFUL_BIN", &bin);
    println!("==> GRACEFUL_BIN={} {}", bin.display(), display(&cmd));
    let code = util::exit_code(util::status(&mut cmd)?);
    phases.mark("kernel tests (with builds)");
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
    phases.mark("node up");
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
    .env("GRACEFUL_BIN", &bin);
    session.point(&mut cmd);
    println!(
        "==> GRACEFUL_KUBECONFIG={} {}",
        session.kubeconfig.display(),
        display(&cmd)
    );
    let code = util::exit_code(util::status(&mut cmd)?);
    phases.mark("cluster tests (with build)");
    session.end()?;
    phases.mark("node down");
    Ok(code)
}
