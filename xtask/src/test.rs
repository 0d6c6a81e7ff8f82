//! `cargo xtask test`: setup, build the agent, run the whole suite.
//!
//! The integration tests (crate `tests`) run the real agent binary on the
//! real kernel, so they need root; they find the binary through
//! `GRACEFUL_BIN`. They run first, with no cluster beside them; then the
//! end-to-end tests run on the test node of `cargo xtask cluster`, which is
//! brought up for them (and down after, if it was not up before). The exit
//! code is the first failing `cargo test`'s; then the run itself must have
//! left nothing on the host ([`xtask::host`]): what it added to the
//! directories a node and the tests write to is listed, and the exit code
//! is 1.

use xtask::{
    build::build_agent,
    host, lab,
    util::{self, cargo, display},
};

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
        let text = text + &longest_turns(8);
        println!("==> cargo xtask test, by phase:\n{text}");
        let _ = std::fs::write(util::target_dir().join("test-phases.txt"), text);
    }
}

/// Where the node's tests write each one's time on the node.
fn turns_file() -> std::path::PathBuf {
    util::target_dir().join("cluster-turns.tsv")
}

/// The node's `n` longest tests, from their turns: the lines under the
/// phases, since the node's tests are most of the suite's time.
fn longest_turns(n: usize) -> String {
    let text = std::fs::read_to_string(turns_file()).unwrap_or_default();
    // A test may take the node more than once (one turn per scene).
    let mut by_test: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
    for l in text.lines() {
        if let Some((s, name)) = l.split_once('\t') {
            *by_test.entry(name).or_default() += s.parse::<f64>().unwrap_or(0.0);
        }
    }
    let mut turns: Vec<(f64, &str)> = by_test.into_iter().map(|(n, s)| (s, n)).collect();
    if turns.is_empty() {
        return String::new();
    }
    let total: f64 = turns.iter().map(|t| t.0).sum();
    turns.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut out = format!("  the node's {} tests: {total:.0} s; the longest:\n", turns.len());
    for (s, name) in turns.iter().take(n) {
        out.push_str(&format!("  {s:>6.0} s  {name}\n"));
    }
    out
}

pub fn run(no_cluster: bool, args: &[String]) -> anyhow::Result<i32> {
    util::require_root("cargo xtask test")?;
    let mut phases = Phases::new();
    let mut before = None;
    let code = run_phases(no_cluster, args, &mut phases, &mut before);
    phases.report();
    let code = code?;
    // What the run left, counted from after setup (which installs
    // packages) and the agent's build.
    let left = before
        .map(|b| host::added(&b, &host::entries()))
        .unwrap_or_default();
    if !left.is_empty() {
        eprintln!(
            "error: every test ran, but the run left these on the host (not there before it):\n  {}",
            left.join("\n  ")
        );
        return Ok(if code == 0 { 1 } else { code });
    }
    Ok(code)
}

fn run_phases(
    no_cluster: bool,
    args: &[String],
    phases: &mut Phases,
    before: &mut Option<std::collections::BTreeSet<String>>,
) -> anyhow::Result<i32> {
    xtask::setup::run()?;
    phases.mark("setup");
    let bin = build_agent(false)?;
    phases.mark("agent build");
    *before = Some(host::entries());

    // The kernel tests first, with no cluster agent's programs beside them.
    let mut cmd = cargo();
    cmd.args(["test", "--workspace"])
        .args(args)
        .env("GRACEFUL_BIN", &bin)
        .env("GRACEFUL_PROMTOOL", xtask::setup::promtool_bin()?);
    println!("==> GRACEFUL_BIN={} {}", bin.display(), display(&cmd));
    let code = util::exit_code(util::status(&mut cmd)?);
    phases.mark("kernel tests (with builds)");
    if code != 0 {
        return Ok(code);
    }
    // The lab's own tests (its parsers and planners, the stand-ins'
    // protocols; lab/ is a workspace of its own, so `--workspace` above
    // does not reach it).
    let mut cmd = lab::cargo_in_lab("test");
    cmd.arg("--workspace").args(args);
    println!("==> {}", display(&cmd));
    let code = util::exit_code(util::status(&mut cmd)?);
    phases.mark("lab tests (with build)");
    if code != 0 {
        return Ok(code);
    }
    if no_cluster {
        println!("==> SKIPPED the end-to-end tests on the test node (--no-cluster)");
        return Ok(0);
    }

    // Then the end-to-end tests, on a real node brought up for them.
    let was_up = lab::command("cluster", &["status"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    println!("==> the test node: cargo xtask cluster up");
    util::run(&mut lab::command("cluster", &["up"]))?;
    phases.mark("node up");
    // The plugin's release archives and krew manifest, which a node test
    // installs with krew (served on loopback: the host is swapped there).
    xtask::plugin::build(xtask::plugin::TEST_BASE_URL)?;
    phases.mark("plugin archives");
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
    .env("GRACEFUL_PROMTOOL", xtask::setup::promtool_bin()?)
    .env("GRACEFUL_TURNS", turns_file());
    let _ = std::fs::remove_file(turns_file());
    // The node's kubeconfig and programs (its kubectl first on PATH).
    for line in util::output(&mut lab::command("cluster", &["env"]))?.lines() {
        if let Some((k, v)) = line.split_once('=') {
            cmd.env(k, v);
            println!("==> {k}={v}");
        }
    }
    println!("==> {}", display(&cmd));
    let code = util::exit_code(util::status(&mut cmd)?);
    phases.mark("cluster tests (with build)");
    if was_up {
        println!("==> the node ran before: it stays up (`cargo xtask cluster down` stops it)");
    } else {
        util::run(&mut lab::command("cluster", &["down"]))?;
    }
    phases.mark("node down");
    Ok(code)
}
