//! The pod's preStop hook in the demo: graceful-wait, the copy the agent
//! placed in its gate directory, run in the container's cgroup as the
//! kubelet runs an exec hook, held by the agent until the pod's inbound
//! connections have drained.

use std::{
    io::Read,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context as _};

use super::{gate_dir, procs};

/// The hook's settings: drained for 200 ms; no endpoint propagation to
/// wait for (`--min 0s`: nothing routes to this pod but its clients).
pub(super) const ARGS: [&str; 8] = [
    "--policy", "drained", "--settle", "200ms", "--min", "0s", "--max", "60s",
];

pub(super) struct Hook {
    child: Child,
    pub(super) exited_at: Option<Instant>,
}

impl Hook {
    /// Starts the hook in the container cgroup `dir`; shows its command.
    pub(super) fn start(dir: &Path, shown: impl Fn(&Command) -> String) -> anyhow::Result<Hook> {
        let wait = gate_dir().join("graceful-wait");
        let mut cmd = Command::new(&wait);
        cmd.args(ARGS)
            .arg("--socket")
            .arg(gate_dir().join("gate.sock"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        graceful_test_support::cgroup::start_in(&mut cmd, dir)?;
        println!("    {}", shown(&cmd));
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", wait.display()))?;
        Ok(Hook {
            child,
            exited_at: None,
        })
    }

    /// Whether it still waits (and when it stopped, once it has).
    pub(super) fn held(&mut self) -> anyhow::Result<bool> {
        if self.exited_at.is_some() {
            return Ok(false);
        }
        match self.child.try_wait()? {
            None => Ok(true),
            Some(_) => {
                self.exited_at = Some(Instant::now());
                Ok(false)
            }
        }
    }

    /// Waits for its exit (10 s at most); its report (the last stdout line).
    pub(super) fn report(&mut self) -> anyhow::Result<serde_json::Value> {
        let t0 = Instant::now();
        while self.held()? {
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("the hook was still held 10 s after the last client closed");
            }
            procs::sleep(Duration::from_millis(5))?;
        }
        let mut out = String::new();
        let mut err = String::new();
        self.child
            .stdout
            .take()
            .context("hook stdout")?
            .read_to_string(&mut out)?;
        self.child
            .stderr
            .take()
            .context("hook stderr")?
            .read_to_string(&mut err)?;
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the hook failed ({status}): {out}{err}");
        }
        let last = out.lines().last().unwrap_or_default();
        serde_json::from_str(last)
            .with_context(|| format!("the hook's last line is not its report: {last:?}\n{err}"))
    }
}

impl Drop for Hook {
    fn drop(&mut self) {
        if self.exited_at.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
