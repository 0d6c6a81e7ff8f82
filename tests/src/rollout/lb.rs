//! The load balancer: Debian's HAProxy, in the node namespace, in a cgroup of
//! its own, with its configuration and admin socket in a temporary
//! directory. Endpoints come and go through its runtime API, the way an
//! ingress controller applies endpoint changes: `add server` + `enable
//! server` for a ready pod, `set server … state maint` when the removal
//! reaches it.
//!
//! Nothing hides a failure: no retries, no redispatch to another pod, no
//! health checks (the endpoint leaves when the control plane says so, not
//! when HAProxy notices).

use std::{
    io::{Read, Write},
    net::{Ipv4Addr, SocketAddr},
    os::unix::{net::UnixStream, process::CommandExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{bail, Context as _};

use super::stop;
use crate::{cgroup::Cgroup, netns::NetNs, peer::place};

/// Where the service listens, inside the node namespace.
pub const SERVICE: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

fn config(admin: &Path, keepalive: bool) -> String {
    let backend = if keepalive {
        "    # Connections to the pods are kept and shared, as an ingress\n    \
         # controller's upstream keep-alive pool does.\n    http-reuse always"
    } else {
        "    # A new connection to a pod for every request.\n    option httpclose"
    };
    format!(
        "global
    stats socket {admin} mode 600 level admin
    nbthread 1
    maxconn 4000

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    # A refused or reset connection to a pod is a failed request.
    retries 0

frontend service
    bind {SERVICE}
    default_backend pods

backend pods
    balance roundrobin
{backend}
",
        admin = admin.display()
    )
}

/// HAProxy's runtime API, on its admin socket. Cheap to clone: each
/// command is a connection of its own.
#[derive(Clone, Debug)]
pub struct Admin {
    socket: PathBuf,
}

impl Admin {
    /// One command; its answer.
    pub fn cmd(&self, line: &str) -> anyhow::Result<String> {
        let mut s = UnixStream::connect(&self.socket)
            .with_context(|| format!("cannot reach HAProxy's admin socket {}", self.socket.display()))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(format!("{line}\n").as_bytes())?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    }

    /// A command that answers nothing, or `expect`, when it succeeds.
    fn expect(&self, line: &str, expect: &str) -> anyhow::Result<()> {
        let out = self.cmd(line)?;
        if out.trim() != expect {
            bail!("HAProxy refused `{line}`: {}", out.trim());
        }
        Ok(())
    }

    /// A ready pod becomes an endpoint.
    pub fn add(&self, name: &str, addr: SocketAddr) -> anyhow::Result<()> {
        self.expect(
            &format!("add server pods/{name} {addr}"),
            "New server registered.",
        )?;
        // Servers added at run time start in maintenance.
        self.expect(&format!("enable server pods/{name}"), "")
    }

    /// The endpoint leaves: no new request goes to it (requests in flight
    /// finish).
    pub fn remove(&self, name: &str) -> anyhow::Result<()> {
        self.expect(&format!("set server pods/{name} state maint"), "")
    }
}

pub struct Haproxy {
    child: Child,
    pub admin: Admin,
    dir: PathBuf,
    /// Holds HAProxy; dropping it kills what is left.
    _cgroup: Cgroup,
}

impl Haproxy {
    /// Starts HAProxy in `node` and waits until its admin socket answers.
    pub fn start(node: &NetNs, keepalive: bool) -> anyhow::Result<Haproxy> {
        let dir = std::env::temp_dir().join(crate::unique("haproxy"));
        std::fs::create_dir_all(&dir)?;
        let admin = Admin {
            socket: dir.join("admin.sock"),
        };
        let cfg = dir.join("haproxy.cfg");
        std::fs::write(&cfg, config(&admin.socket, keepalive))?;
        let log = std::fs::File::create(dir.join("haproxy.log"))?;
        let cgroup = Cgroup::unique("lb");
        let mut cmd = Command::new("haproxy");
        cmd.arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        place(&mut cmd, &cgroup, Some(node));
        let child = cmd
            .spawn()
            .context("cannot start haproxy (`cargo xtask setup` installs it)")?;
        let mut lb = Haproxy {
            child,
            admin,
            dir,
            _cgroup: cgroup,
        };
        stop::poll(
            Duration::from_secs(10),
            Duration::from_millis(20),
            "HAProxy's admin socket",
            || {
                if let Some(st) = lb.child.try_wait()? {
                    bail!("haproxy exited ({st}):\n{}", lb.log());
                }
                Ok(lb.admin.cmd("show info").ok().filter(|i| i.contains("Pid:")))
            },
        )?;
        Ok(lb)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("haproxy.log")).unwrap_or_default()
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
