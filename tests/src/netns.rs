//! Network namespaces made by the test, joined by veth pairs; deleted on drop.

use std::{fs::File, os::fd::AsRawFd};

use crate::sh;

pub struct NetNs {
    pub name: String,
    /// The file that names it: `/run/netns/NAME`, or `/proc/PID/ns/net`.
    path: String,
    file: File,
    /// Made by this handle, and deleted when it drops.
    owned: bool,
}

impl NetNs {
    /// A new namespace with `lo` up.
    pub fn create() -> NetNs {
        let name = crate::unique("ns");
        // Short names: interface names are limited to 15 bytes.
        sh("ip", &["netns", "add", &name]);
        let path = format!("/run/netns/{name}");
        let ns = NetNs {
            file: File::open(&path).unwrap(),
            path,
            name,
            owned: true,
        };
        ns.exec("ip", &["link", "set", "lo", "up"]);
        ns
    }

    /// A namespace someone else made (a pod's, through `/proc/PID/ns/net`,
    /// or a cluster's node): joined, never deleted.
    pub fn open(path: &str) -> std::io::Result<NetNs> {
        Ok(NetNs {
            name: path.to_string(),
            file: File::open(path)?,
            path: path.to_string(),
            owned: false,
        })
    }

    /// The file that names it (`/run/netns/NAME`, `/proc/PID/ns/net`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Runs `f` on a thread inside the namespace: sockets it makes are the
    /// namespace's.
    pub fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let fd = self.fd();
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: `fd` is this handle's open namespace file.
                assert_eq!(
                    unsafe { libc::setns(fd, libc::CLONE_NEWNET) },
                    0,
                    "setns {}: {}",
                    self.path,
                    std::io::Error::last_os_error()
                );
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    pub fn fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// Runs a command inside the namespace. nsenter, not `ip netns exec`:
    /// the latter remounts /sys, which hides the cgroup2 mount from `ss`.
    pub fn exec(&self, cmd: &str, args: &[&str]) -> String {
        let net = format!("--net={}", self.path);
        let mut all = vec![net.as_str(), cmd];
        all.extend_from_slice(args);
        sh("nsenter", &all)
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Two namespaces joined by a veth pair, with IPv4 and IPv6 addresses that
/// exist only inside them: `a` is 10.213.N.1 / fd00:6772:N::1, `b` .2 / ::2.
pub struct VethPair {
    pub a: NetNs,
    pub b: NetNs,
    pub a_v4: String,
    pub b_v4: String,
    pub a_v6: String,
    pub b_v6: String,
}

impl VethPair {
    pub fn create() -> VethPair {
        let a = NetNs::create();
        let b = NetNs::create();
        let n = std::process::id() % 250;
        let ia = format!("gta{}", std::process::id() % 100000);
        let ib = format!("gtb{}", std::process::id() % 100000);
        // Create inside a, move the peer end to b: nothing touches the host namespace.
        a.exec(
            "ip",
            &[
                "link", "add", &ia, "type", "veth", "peer", "name", &ib, "netns", &b.name,
            ],
        );
        let (a_v4, b_v4) = (format!("10.213.{n}.1"), format!("10.213.{n}.2"));
        let (a_v6, b_v6) = (format!("fd00:6772:{n:x}::1"), format!("fd00:6772:{n:x}::2"));
        a.exec("ip", &["addr", "add", &format!("{a_v4}/24"), "dev", &ia]);
        b.exec("ip", &["addr", "add", &format!("{b_v4}/24"), "dev", &ib]);
        a.exec(
            "ip",
            &["-6", "addr", "add", &format!("{a_v6}/64"), "dev", &ia, "nodad"],
        );
        b.exec(
            "ip",
            &["-6", "addr", "add", &format!("{b_v6}/64"), "dev", &ib, "nodad"],
        );
        a.exec("ip", &["link", "set", &ia, "up"]);
        b.exec("ip", &["link", "set", &ib, "up"]);
        VethPair {
            a,
            b,
            a_v4,
            b_v4,
            a_v6,
            b_v6,
        }
    }
}
