//! The kernel's own view of a cgroup's sockets, from `ss` (sock_diag): what
//! the agent's counts are checked against, by the tests and by the soak.
//! How `ss` runs (here, or inside a network namespace) is the caller's.

use std::collections::BTreeSet;

/// What `ss` sees for one cgroup (in one network namespace).
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

/// The local port of an `ss -n` line: the first address:port column (the
/// State column comes and goes with the filters used).
fn local_port(line: &str) -> Option<u16> {
    let local = line.split_whitespace().find(|w| w.contains(':'))?;
    local.rsplit(':').next()?.parse().ok()
}

/// Live (ESTABLISHED or CLOSE-WAIT) connections and listeners of `cgroup`
/// (path relative to the cgroup2 mount), `ss ARGS` run by `ss`. A
/// connection is inbound when its local port is one of the cgroup's
/// listening ports (its own clients never use a listener's port).
pub fn view(ss: impl Fn(&[&str]) -> String, cgroup: &str) -> View {
    let listen = ss(&["-ltnH", "cgroup", cgroup]);
    let ports: BTreeSet<u16> = listen.lines().filter_map(local_port).collect();
    let live = ss(&[
        "-tnH",
        "state",
        "established",
        "state",
        "close-wait",
        "cgroup",
        cgroup,
    ]);
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
