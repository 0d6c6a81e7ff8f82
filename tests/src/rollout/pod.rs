//! One replica of the deployment: a pod in kubelet's cgroup layout with one
//! app container, its own network namespace plugged into the node's bridge,
//! and the app (`graceful-peer rollout-app`) running in both.

use std::{
    io::{BufRead, BufReader, Read},
    net::{Ipv4Addr, SocketAddr},
    os::unix::process::CommandExt,
    process::{Child, ChildStdout, Command, ExitStatus, Stdio},
    time::Duration,
};

use anyhow::{bail, Context as _};
use serde::Deserialize;

use super::node::Node;
use crate::{cgroup::Cgroup, netns::NetNs, peer::place, pod::SimPod};

/// The port every pod's app listens on, in its own namespace.
pub const PORT: u16 = 8080;

/// The app's last line: what it served.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub struct Served {
    pub served: u64,
    /// CLOCK_MONOTONIC ns of its last response; 0 if it served none.
    pub last_response_ns: u64,
}

pub struct Pod {
    /// Its name as an endpoint of the load balancer.
    pub name: String,
    pub ip: Ipv4Addr,
    app: Option<Child>,
    stdout: Option<BufReader<ChildStdout>>,
    // Dropped in this order, after the app: the cgroups (killing anything
    // left in them, a hook for one), then the namespace.
    sim: SimPod,
    ns: NetNs,
}

impl Pod {
    /// Creates the pod and starts its app; returns once the app listens
    /// (its readiness).
    pub fn start(node: &mut Node, name: String, latency: Duration) -> anyhow::Result<Pod> {
        let ns = NetNs::create();
        let ip = node.plug(&ns)?;
        let sim = SimPod::create(1);
        let bin = crate::peer::peer_bin();
        let mut cmd = Command::new(&bin);
        cmd.args(["rollout-app", &SocketAddr::from((ip, PORT)).to_string()])
            .arg(latency.as_millis().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .process_group(0);
        place(&mut cmd, sim.container(0), Some(&ns));
        let mut app = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let mut stdout = BufReader::new(app.stdout.take().context("no stdout")?);
        let mut pod = Pod {
            name,
            ip,
            app: Some(app),
            stdout: None,
            sim,
            ns,
        };
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        if !line.starts_with("listening ") {
            bail!("the app of {} did not start: {line:?}", pod.name);
        }
        pod.stdout = Some(stdout);
        Ok(pod)
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, PORT))
    }

    pub fn container(&self) -> &Cgroup {
        self.sim.container(0)
    }

    pub fn uid(&self) -> &str {
        &self.sim.uid
    }

    /// Starts `cmd` in the app container (its cgroup and network
    /// namespace), as kubelet's exec of a `preStop` hook does.
    pub fn exec(&self, cmd: &mut Command) -> anyhow::Result<Child> {
        cmd.stdin(Stdio::null()).process_group(0);
        place(cmd, self.container(), Some(&self.ns));
        cmd.spawn()
            .with_context(|| format!("cannot run {:?} in {}", cmd.get_program(), self.name))
    }

    pub fn signal(&self, sig: libc::c_int) {
        if let Some(app) = &self.app {
            // SAFETY: kill(2) on our own child, not yet reaped.
            unsafe { libc::kill(app.id() as i32, sig) };
        }
    }

    /// The app's exit status, once it has exited.
    pub fn exited(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        match &mut self.app {
            Some(app) => Ok(app.try_wait()?),
            None => bail!("{} has no app", self.name),
        }
    }

    /// After the exit: what the app says it served.
    pub fn served(&mut self) -> anyhow::Result<Served> {
        let mut rest = String::new();
        if let Some(mut out) = self.stdout.take() {
            out.read_to_string(&mut rest)?;
        }
        let last = rest.lines().last().unwrap_or_default();
        serde_json::from_str(last)
            .with_context(|| format!("the app of {} ended without its summary: {rest:?}", self.name))
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        if let Some(mut app) = self.app.take() {
            let _ = app.kill();
            let _ = app.wait();
        }
    }
}
