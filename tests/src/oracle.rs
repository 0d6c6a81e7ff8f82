//! The kernel's own view of a cgroup's sockets, from `ss` (sock_diag), to
//! check the agent's counts against.

use std::collections::BTreeSet;

use crate::netns::NetNs;

/// What `ss` sees for one cgroup in one network namespace.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct View {
    pub inbound_live: u64,
    pub outbound_live: u64,
    pub listeners: u64,
}

impl std::ops::Add for View {
    type Output = View;
    fn add(self, o: View) -> View {
        View {
            inbound_live: self.inbound_live + o.inbound_live,
            outbound_live: self.outbound_live + o.outbound_live,
            listeners: self.listeners + o.listeners,
        }
    }
}

fn ss(ns: Option<&NetNs>, args: &[&str]) -> String {
    match ns {
        Some(ns) => ns.exec("ss", args),
        None => crate::sh("ss", args),
    }
}

/// The local port of an `ss -n` line: the first address:port column (the
/// State column comes and goes with the filters used).
fn local_port(line: &str) -> Option<u16> {
    let local = line.split_whitespace().find(|w| w.contains(':'))?;
    local.rsplit(':').next()?.parse().ok()
}

/// Every TCP socket of `cgroup`, in every state, with its timers: what a
/// failure message shows when the agent's count and [`view`] disagree.
pub fn sockets(ns: Option<&NetNs>, cgroup: &str) -> String {
    ss(ns, &["-tanoH", "cgroup", cgroup])
}

/// Live (ESTABLISHED or CLOSE-WAIT) connections and listeners of `cgroup`
/// (path relative to the cgroup2 mount). A connection is inbound when its
/// local port is one of the cgroup's listening ports (the test's own
/// clients never use a listener's port).
pub fn view(ns: Option<&NetNs>, cgroup: &str) -> View {
    let listen = ss(ns, &["-ltnH", "cgroup", cgroup]);
    let ports: BTreeSet<u16> = listen.lines().filter_map(local_port).collect();
    let live = ss(
        ns,
        &[
            "-tnH",
            "state",
            "established",
            "state",
            "close-wait",
            "cgroup",
            cgroup,
        ],
    );
    let mut v = View {
        listeners: listen.lines().count() as u64,
        ..View::default()
    };
    for l in live.lines() {
        match local_port(l) {
            Some(p) if ports.contains(&p) => v.inbound_live += 1,
            Some(_) => v.outbound_live += 1,
            None => {}
        }
    }
    v
}
