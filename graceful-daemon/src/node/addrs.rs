//! The node's own addresses: where the kubelet's hook requests and probes
//! come from, so the only peers the httpGet gate admits, and the peers
//! `ignore-peers: node` leaves out. Read from the interfaces of
//! the node's network namespace (`--node-netns`, by default that of pid 1,
//! the host's, which the agent sees with `hostPID`), and read again when a
//! peer is not among them (at most once a second, so a flood of strangers
//! costs no more than one look per second). Loopback is never the node:
//! inside a pod's namespace it is the pod itself.

use std::{
    collections::HashSet,
    io,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    path::Path,
    sync::Mutex,
    time::{Duration, Instant},
};

use crate::{
    kernel::adopt::{
        netns::{run_in, NetNs},
        sockdiag::{Lookup, TcpSocket},
    },
    node::resolver::index::Owner,
    sync,
};

/// How often a peer not among the addresses known may make the agent look again.
pub const REFRESH_AT_MOST: Duration = Duration::from_secs(1);

/// The default node namespace: the host's, through its init process.
pub const DEFAULT_NETNS: &str = "/proc/1/ns/net";

pub struct NodeAddrs {
    pub netns: NetNs,
    known: Mutex<Known>,
    /// A sock_diag socket opened in the node's namespace, for
    /// [`NodeAddrs::caller`]; opened on first use.
    lookup: Mutex<Option<Lookup>>,
}

/// Who is at the other end of a connection that came from one of the
/// node's addresses, as the node's kernel knows the socket it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeCaller {
    /// A process outside every pod: the kubelet, or root on the node.
    Host { uid: u32 },
    /// A process of pod `uid` on the host network.
    Pod { uid: String },
    /// No socket of the node has these addresses (a NAT on the way, or it
    /// closed already): who it is cannot be told.
    Unknown,
}

struct Known {
    addrs: HashSet<IpAddr>,
    read_at: Option<Instant>,
}

impl NodeAddrs {
    /// Opens the node's namespace at `path` and reads its addresses.
    pub fn open(path: &Path) -> io::Result<NodeAddrs> {
        let netns = NetNs::open(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "the node's network namespace {}: {e} (set --node-netns)",
                    path.display()
                ),
            )
        })?;
        let addrs = NodeAddrs {
            netns,
            known: Mutex::new(Known {
                addrs: HashSet::new(),
                read_at: None,
            }),
            lookup: Mutex::new(None),
        };
        let now = addrs.read()?;
        *sync::lock(&addrs.known) = Known {
            addrs: now,
            read_at: Some(Instant::now()),
        };
        Ok(addrs)
    }

    /// Whether `ip` is one of the node's addresses (an IPv4-mapped IPv6
    /// peer, as a dual-stack listener sees IPv4, is taken as its IPv4).
    pub fn is_node(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        if ip.is_loopback() || ip.is_unspecified() {
            return false;
        }
        let mut known = sync::lock(&self.known);
        if known.addrs.contains(&ip) {
            return true;
        }
        if known.read_at.is_some_and(|t| t.elapsed() < REFRESH_AT_MOST) {
            return false;
        }
        self.reread(&mut known);
        known.addrs.contains(&ip)
    }

    /// Reads the addresses into `known`, keeping the last ones on an error.
    fn reread(&self, known: &mut Known) {
        known.read_at = Some(Instant::now());
        match self.read() {
            Ok(now) => known.addrs = now,
            Err(e) => tracing::warn!(error = %e, "cannot read the node's addresses; keeping the last ones"),
        }
    }

    /// The node's addresses read again now (a bridge made since the agent
    /// started, for its first pod, brings the address the kubelet's probes
    /// come from), loopback left out; the last ones if they can't be read.
    pub fn fresh(&self) -> Vec<IpAddr> {
        let mut known = sync::lock(&self.known);
        self.reread(&mut known);
        let mut v: Vec<_> = known
            .addrs
            .iter()
            .copied()
            .filter(|ip| !ip.to_canonical().is_loopback())
            .collect();
        v.sort();
        v
    }

    /// The node's addresses now, for logs and tests.
    pub fn current(&self) -> Vec<IpAddr> {
        let mut v: Vec<_> = sync::lock(&self.known).addrs.iter().copied().collect();
        v.sort();
        v
    }

    /// Who connected from `peer` (one of the node's addresses) to `local`:
    /// the node's socket with those addresses, and whose cgroup it is in
    /// (`owner`: the resolver's view of a cgroup id). A hostNetwork pod
    /// shares the node's addresses, never its cgroups.
    pub fn caller(
        &self,
        peer: SocketAddr,
        local: SocketAddr,
        owner: impl Fn(u64) -> Option<Owner>,
    ) -> NodeCaller {
        let Some(s) = self.peer_socket(peer, local) else {
            return NodeCaller::Unknown;
        };
        match s.cgroup_id.and_then(owner) {
            Some(Owner::Pod { uid, .. }) => NodeCaller::Pod { uid },
            _ => NodeCaller::Host { uid: s.uid },
        }
    }

    /// The node's socket whose own address is `peer` and whose peer is
    /// `local` (a dual-stack listener's IPv4-mapped addresses taken as IPv4).
    fn peer_socket(&self, peer: SocketAddr, local: SocketAddr) -> Option<TcpSocket> {
        let (peer, local) = (canonical_addr(peer), canonical_addr(local));
        if peer.is_ipv4() != local.is_ipv4() {
            return None;
        }
        let mut lookup = sync::lock(&self.lookup);
        if lookup.is_none() {
            match run_in(&self.netns, Lookup::open) {
                Ok(Ok(l)) => *lookup = Some(l),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot look up the node's sockets: callers from the node's addresses are not told apart");
                    return None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot enter the node's network namespace to look up its sockets");
                    return None;
                }
            }
        }
        let l = lookup.as_mut()?;
        match l.find(peer, local) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot look up a node socket; opening a new sock_diag socket next time");
                *lookup = None;
                None
            }
        }
    }

    fn read(&self) -> io::Result<HashSet<IpAddr>> {
        run_in(&self.netns, interface_addrs)?
    }
}

fn canonical_addr(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// Every address of every interface of the calling thread's namespace.
pub(crate) fn interface_addrs() -> io::Result<HashSet<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = HashSet::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr of the family it names.
            match i32::from(unsafe { (*ifa.ifa_addr).sa_family }) {
                libc::AF_INET => {
                    let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                    out.insert(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
                }
                libc::AF_INET6 => {
                    let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                    out.insert(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                }
                _ => {}
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: the list from getifaddrs above, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

#[cfg(test)]
mod tests;
