//! The node's network namespace, and what the host must offer a node.
//!
//! Every cluster process runs in [`NETNS`]: kube-proxy's iptables rules, the
//! CNI bridge, the pods' veths and their conntrack entries live there and
//! go away with it. The node's address sits on one end of a veth pair whose
//! both ends stay inside the namespace (this kernel has no dummy device);
//! a default route through it gives the kubelet and the API server the
//! "real" interface they look for.
//!
//! The one host change a node needs: the DaemonSet mounts `/sys/fs/bpf` with
//! `HostToContainer` propagation, which needs a shared (or slave) mount on
//! the host. systemd hosts mount the bpffs shared at boot; this host has no
//! systemd, so `up` mounts it (if nobody has) and makes it shared, and
//! records both so that `down` undoes exactly what it did.

use std::{fs, os::fd::AsRawFd as _, path::Path, process::Command};

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use super::{Paths, NETNS, NODE_IP};
use crate::mounts;
use xtask::util::{self, output};

const NODE_IF: &str = "node0";
const NODE_PEER_IF: &str = "node0-peer";
const GATEWAY: &str = "10.201.0.254";
const BPFFS: &str = "/sys/fs/bpf";

/// What `up` changed on the host, for `down` to undo.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct HostChanges {
    pub bpffs_mounted: bool,
    pub bpffs_made_shared: bool,
    /// The DaemonSet's gate directory did not exist before the cluster.
    pub gate_dir_created: bool,
}

impl HostChanges {
    fn path(paths: &Paths) -> std::path::PathBuf {
        paths.run().join("host-changes.json")
    }
    pub fn load(paths: &Paths) -> HostChanges {
        fs::read_to_string(Self::path(paths))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }
    fn save(&self, paths: &Paths) -> anyhow::Result<()> {
        fs::create_dir_all(paths.run())?;
        fs::write(Self::path(paths), serde_json::to_string_pretty(self)?)?;
        Ok(())
    }
}

pub fn netns_path() -> String {
    format!("/run/netns/{NETNS}")
}

/// `cmd` run inside the node's namespace (nsenter, not `ip netns exec`,
/// which remounts /sys and hides the cgroup2 mount).
pub fn in_node(cmd: &str) -> Command {
    let mut c = Command::new("nsenter");
    c.arg(format!("--net={}", netns_path())).arg(cmd);
    c
}

pub fn exists() -> bool {
    Path::new(&netns_path()).exists()
}

/// Creates the namespace and its interfaces if missing; sets the host up.
pub fn ensure(paths: &Paths) -> anyhow::Result<()> {
    if !exists() && Path::new(super::AGENT_PINS).exists() {
        bail!(
            "{} holds a graceful agent's pins, and the DaemonSet's agent would share them: stop that agent \
             and run `graceful uninstall`, or `cargo xtask cluster down` if an earlier cluster left them",
            super::AGENT_PINS
        );
    }
    let mut changes = HostChanges::load(paths);
    if !Path::new(super::GATE_DIR).exists() {
        changes.gate_dir_created = true;
    }
    bpffs_shared(&mut changes)?;
    changes.save(paths)?;

    if exists() && has_node_ip() {
        return Ok(());
    }
    if exists() {
        util::run(Command::new("ip").args(["netns", "del", NETNS]))?;
    }
    util::run(Command::new("ip").args(["netns", "add", NETNS]))?;
    let ip = |args: &[&str]| util::run(in_node("ip").args(args));
    ip(&["link", "set", "lo", "up"])?;
    ip(&[
        "link",
        "add",
        NODE_IF,
        "type",
        "veth",
        "peer",
        "name",
        NODE_PEER_IF,
    ])?;
    ip(&["addr", "add", &format!("{NODE_IP}/24"), "dev", NODE_IF])?;
    ip(&["link", "set", NODE_PEER_IF, "up"])?;
    ip(&["link", "set", NODE_IF, "up"])?;
    ip(&[
        "route", "add", "default", "via", GATEWAY, "dev", NODE_IF, "onlink",
    ])?;
    // Per namespace: routing for the pods, and bridged pod-to-pod traffic
    // through iptables, so a pod reaching a Service that lands on a pod of
    // the same bridge is translated back.
    for (k, v) in [
        ("net.ipv4.ip_forward", "1"),
        ("net.bridge.bridge-nf-call-iptables", "1"),
    ] {
        util::run(in_node("sysctl").args(["-q", "-w", &format!("{k}={v}")]))
            .with_context(|| format!("setting {k} in the node's namespace"))?;
    }
    Ok(())
}

fn has_node_ip() -> bool {
    output(in_node("ip").args(["-4", "-o", "addr", "show", "dev", NODE_IF]))
        .is_ok_and(|s| s.contains(&format!("{NODE_IP}/")))
}

fn bpffs_shared(changes: &mut HostChanges) -> anyhow::Result<()> {
    match mounts::at(Path::new(BPFFS)) {
        Some(m) if m.fstype != "bpf" => {
            bail!(
                "{BPFFS} is a {} mount, not a bpffs: graceful's pins cannot live there",
                m.fstype
            )
        }
        Some(_) => {}
        None => {
            util::run(Command::new("mount").args(["-t", "bpf", "bpf", BPFFS]))?;
            changes.bpffs_mounted = true;
        }
    }
    let m = mounts::at(Path::new(BPFFS)).context("the bpffs mount vanished")?;
    if !m.is_shared() {
        util::run(Command::new("mount").args(["--make-shared", BPFFS]))?;
        changes.bpffs_made_shared = true;
    }
    Ok(())
}

/// Undoes [`bpffs_shared`]'s changes (after the agent's pins are gone).
pub fn restore_bpffs(changes: &HostChanges) -> anyhow::Result<()> {
    let mounted = mounts::at(Path::new(BPFFS)).is_some();
    if changes.bpffs_mounted {
        if mounted {
            util::run(Command::new("umount").arg(BPFFS))?;
        }
    } else if changes.bpffs_made_shared && mounted {
        util::run(Command::new("mount").args(["--make-private", BPFFS]))?;
    }
    Ok(())
}

/// Runs `f` on a thread that has joined the node's namespace: sockets it
/// opens live there.
pub fn on_node_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> anyhow::Result<T> {
    let ns = fs::File::open(netns_path()).with_context(|| format!("cannot open {}", netns_path()))?;
    std::thread::spawn(move || {
        // SAFETY: setns on this thread only, with an open namespace fd.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(anyhow::anyhow!(
                "setns into {}: {}",
                netns_path(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(f())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("a thread in the node's namespace panicked"))?
}

/// A plain HTTP GET to `addr` inside the node's namespace: true on 200.
pub fn http_ok(addr: &str, path: &str) -> bool {
    let (addr, path) = (addr.to_string(), path.to_string());
    on_node_thread(move || {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(&addr) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
        if write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        let head = String::from_utf8_lossy(&buf[..n]);
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200")
    })
    .unwrap_or(false)
}
