//! `cargo xtask rollout`: a Kubernetes-like rolling replacement of a
//! deployment's pods on this machine, behind HAProxy under load, run with no
//! `preStop` hook, with `preStop: sleep 15` and with graceful's gate; then
//! the table that compares them (failed requests, p99 latency, time per pod
//! termination, total rollout time), or `--json`.
//!
//! The simulation lives with the integration tests (`graceful_tests::rollout`),
//! which own the cgroups, namespaces and agent it needs, and whose kernel
//! test asserts on the same code; the lab's `graceful-rollout` program
//! (lab/programs) runs it. This sets
//! the machine up, builds, and runs it with the arguments given. Setup's and
//! the build's output goes to stderr: stdout is the table's.
//!
//! `--cluster` runs it on a real node instead (`cargo xtask cluster`'s,
//! brought up for it and down after if it was not up), with
//! `graceful_tests::cluster::rollout`.

use std::{io::Write, process::Command};

use xtask::util::{self, cargo};

/// Runs `f` with this process's stdout (and so its children's) sent to
/// stderr, then puts it back.
fn on_stderr<T>(f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    std::io::stdout().flush()?;
    // SAFETY: dup(2) and dup2(2) on the standard descriptors; restored below.
    let saved = unsafe { libc::dup(1) };
    anyhow::ensure!(saved >= 0, "dup(stdout): {}", std::io::Error::last_os_error());
    // SAFETY: as above.
    unsafe { libc::dup2(2, 1) };
    let result = f();
    let _ = std::io::stdout().flush();
    // SAFETY: as above.
    unsafe {
        libc::dup2(saved, 1);
        libc::close(saved);
    }
    result
}

pub fn run(args: &[String]) -> anyhow::Result<i32> {
    util::require_root("cargo xtask rollout")?;
    let session = if args.iter().any(|a| a == "--cluster") {
        Some(on_stderr(crate::cluster::Session::begin)?)
    } else {
        None
    };
    let agent = on_stderr(|| {
        xtask::setup::run()?;
        let agent = xtask::build::build_agent(true)?;
        // The pods' app is the tests' peer (`graceful-peer rollout-app`),
        // which the simulation finds beside itself.
        let mut cmd = cargo();
        cmd.args(["build", "-q", "-p", "graceful-tests", "--bin", "graceful-peer"]);
        util::run(&mut cmd)?;
        Ok((agent, crate::programs::build("graceful-rollout", false)?))
    })?;
    let (agent, rollout) = agent;
    let mut cmd = Command::new(rollout);
    cmd.args(args).env("GRACEFUL_BIN", &agent);
    if let Some(s) = &session {
        s.point(&mut cmd);
    }
    // Ctrl-C reaches the simulation too; it cleans up and exits, and we
    // wait for it rather than die first.
    crate::demo::procs::catch_signals();
    let code = util::exit_code(util::status(&mut cmd)?);
    if let Some(s) = session {
        on_stderr(|| s.end())?;
    }
    Ok(code)
}
