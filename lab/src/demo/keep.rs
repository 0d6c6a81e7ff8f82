//! `--keep` and `--cleanup`: what a kept demo leaves running, recorded,
//! and removed later.

use std::{fs, net::SocketAddr, path::PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::session::Demo;
use super::{api_socket, cgroup, demo_dir, procs::Proc, section, CLIENT_CGROUP, PIN_DIR};
use xtask::util::{self};

/// What a `--keep` run leaves, for `--cleanup`.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct State {
    bin: PathBuf,
    pin_dir: PathBuf,
    /// (name, pid, a string its command line contains)
    procs: Vec<(String, i32, String)>,
    /// Absolute, in creation order.
    cgroups: Vec<PathBuf>,
}

pub(super) fn state_file() -> PathBuf {
    demo_dir().join("kept.json")
}

impl Demo {
    /// `--keep`: reopen the connections, leave everything running, say what to try.
    pub(super) fn leave_running(
        &mut self,
        pod: &str,
        container: &str,
        addr: SocketAddr,
        n: usize,
    ) -> anyhow::Result<()> {
        section("left running (--keep)");
        let client = self.client.as_mut().context("no client")?;
        client.open(n)?;
        client.hold()?;
        let state = State {
            bin: self.bin.clone(),
            pin_dir: self.pins.clone(),
            procs: [
                self.client
                    .as_ref()
                    .map(|c| ("client", c.proc.pid, "__demo-client")),
                self.server
                    .as_ref()
                    .map(|s| ("HTTP server", s.pid, "http.server")),
                self.agent.as_ref().map(|a| ("agent", a.pid, "daemon")),
            ]
            .into_iter()
            .flatten()
            .map(|(a, b, c)| (a.to_string(), b, c.to_string()))
            .collect(),
            cgroups: self.cgroups.dirs.clone(),
        };
        fs::write(state_file(), serde_json::to_string_pretty(&state)?)?;
        self.keep = true;

        let bin = self.bin_shown();
        let client_pid = self.client.as_ref().map_or(0, |c| c.proc.pid);
        println!(
            "    agent        pid {}, log {}",
            self.agent.as_ref().map_or(0, |a| a.pid),
            demo_dir().join("daemon.log").display()
        );
        println!(
            "    HTTP server  pid {}, http://{addr}/, in {container}",
            self.server.as_ref().map_or(0, |s| s.pid)
        );
        println!("    client       pid {client_pid}, {n} open keep-alive connections, in {CLIENT_CGROUP}");
        let log = demo_dir().join("daemon.log");
        let log = log
            .strip_prefix(util::workspace_root())
            .unwrap_or(&log)
            .display()
            .to_string();
        let ctr = container.strip_prefix(pod).unwrap_or(container);
        println!("\n    Try, from {}:", util::workspace_root().display());
        let tries = [
            (
                format!("export GRACEFUL_PIN_DIR={PIN_DIR}"),
                "the demo agent's pins",
            ),
            (
                format!("export GRACEFUL_API_SOCKET={}", api_socket().display()),
                "and its local API",
            ),
            (format!("POD={pod}"), ""),
            (format!("CTR=$POD{ctr}"), ""),
            (
                format!("{bin} cgroups"),
                "every cgroup holding connections or listeners",
            ),
            (
                format!("{bin} cgroups -o json --path $POD"),
                "the pod, as scripts read it",
            ),
            (
                "ss -tn cgroup $CTR".to_string(),
                "the kernel's socket table, for comparison",
            ),
            (
                format!(
                    "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://{addr}/\").status)'"
                ),
                "one more request: IN_TOTAL grows",
            ),
            (
                format!("watch -n 0.2 {bin} cgroups --path $POD"),
                "a live view; meanwhile, elsewhere:",
            ),
            (
                format!("kill {client_pid}"),
                "close the clients: INBOUND falls to 0",
            ),
            (format!("{bin} pods"), "per pod, from the agent's API"),
            (
                "curl -s --unix-socket $GRACEFUL_API_SOCKET http://graceful/metrics | grep ^graceful_pod"
                    .to_string(),
                "what Prometheus scrapes",
            ),
            (format!("{bin} doctor"), "what the agent needs from a node"),
            (format!("tail -f {log}"), "the agent's log"),
        ];
        for (cmd, why) in tries {
            if why.is_empty() {
                println!("      {cmd}");
            } else {
                println!("      {cmd:<50} # {why}");
            }
        }
        println!("\n    When done: cargo xtask demo --cleanup");
        Ok(())
    }
}

/// `--cleanup`: stop and remove what a `--keep` run left.
pub(super) fn cleanup_kept() -> anyhow::Result<()> {
    let path = state_file();
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!(
                "nothing to clean up: no demo was left running ({} does not exist)",
                path.display()
            );
            return Ok(());
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let state: State =
        serde_json::from_str(&text).with_context(|| format!("cannot parse {}", path.display()))?;
    let mut demo = Demo {
        bin: state.bin,
        pins: state.pin_dir,
        mount: PathBuf::new(),
        cgroups: cgroup::Created { dirs: state.cgroups },
        agent: None,
        server: None,
        client: None,
        kept: Vec::new(),
        announced: true,
        keep: false,
    };
    section("clean up what `cargo xtask demo --keep` left");
    for (name, pid, marker) in &state.procs {
        let name = match name.as_str() {
            "agent" => "agent",
            "HTTP server" => "HTTP server",
            _ => "client",
        };
        match Proc::adopt(name, *pid, marker) {
            Some(p) => demo.kept.push(p),
            None => println!("    {name} (pid {pid}): already gone"),
        }
    }
    drop(demo);
    fs::remove_file(&path)?;
    Ok(())
}
