//! Whom a pod's httpGet gate answers. The listener is the pod's own, so a
//! request to it can only ever drain that pod; what the gate must tell is
//! whether it is the kubelet running the pod's own hook, which no other
//! caller may stand in for. Two checks:
//!
//! **Per connection, by where it comes from** ([`judge`]):
//! 1. **One of the node's own addresses**, from a process outside every
//!    pod as the node's kernel tells its socket: the kubelet (or root on
//!    the node). Any time. A hostNetwork pod shares the node's addresses,
//!    not its cgroups: refused. Istio ambient's SNAT address (169.254.7.127,
//!    from which a forger cannot complete a handshake) stands for a node
//!    address, for a pod istio-cni enrolled: its socket is looked up as the
//!    node's from each of the node's addresses, the same port.
//! 2. **Relayed**: a connection from inside the pod of a pod whose mesh
//!    proxy relays the hook (loopback, Istio's 127.0.0.6 or `::6`, the
//!    pod's own address), or a node's connection whose socket the node's
//!    kernel does not show (a NAT on the way). The relay carries anyone's
//!    request as its own; what it carries is judged per request.
//! 3. Anyone else: `403`, with what to change when a mesh is in the way.
//!
//! **Per request** ([`spec_hook`], and the pod's termination): a request
//! is a drain only if it is one of the `preStop: httpGet` hooks the pod's
//! spec declares for the gate's port, the very settings the kubelet will
//! send; a relayed one only once the pod is terminating (the API shows its
//! deletion; the gate waits up to [`TERMINATING_WAIT`] for the watch to
//! say so), since no preStop hook runs before. So a mesh client, or a
//! proxy's pooled connection opened before the deletion, can at most send
//! the pod's own hook during its termination: it runs a drain of its own
//! with the pod's own settings, and neither holds, shortens nor
//! reconfigures the kubelet's.

use std::{net::IpAddr, time::Duration};

use graceful_api::hook_query::{self, HookQuery};

use crate::node::addrs::{NodeAddrs, NodeCaller};
use crate::node::kube::{hooks::SpecHook, mesh::Mesh};

/// How long a relayed request waits for the pod's deletion to reach the
/// agent's watch: the kubelet learns of it from its own watch, and runs
/// the hook at once, so the two race by the API's fan-out.
pub const TERMINATING_WAIT: Duration = Duration::from_secs(2);

/// Who a connection is from, as far as the gate can tell.
#[derive(Debug, PartialEq, Eq)]
pub enum Peer {
    /// The kubelet (a process outside every pod, on a node address).
    Kubelet,
    /// A relay: its requests count only during the pod's termination.
    Relayed,
}

/// The class of `peer`, met on a connection to `local` (the pod's own
/// address, as the connection arrived) on the gate's `port`; `caller`
/// asks the node's kernel whose socket a connection from the node's
/// address it is given was. A refusal is the `403`'s line.
pub fn judge(
    node: &NodeAddrs,
    mesh: Option<&Mesh>,
    port: u16,
    (peer, local): (IpAddr, Option<IpAddr>),
    caller: impl Fn(IpAddr) -> NodeCaller,
) -> Result<Peer, String> {
    // A dual-stack listener meets IPv4 peers as IPv4-mapped addresses.
    let peer = peer.to_canonical();
    let from_node = if node.is_node(peer) {
        Some(caller(peer))
    } else if mesh.is_some_and(|m| m.node_alias(peer)) {
        // The SNAT kept the source port: the node's socket is the one
        // from one of its own addresses.
        let same_family = node
            .current()
            .into_iter()
            .filter(|a| a.is_ipv4() == peer.is_ipv4());
        Some(
            same_family
                .map(&caller)
                .find(|c| *c != NodeCaller::Unknown)
                .unwrap_or(NodeCaller::Unknown),
        )
    } else {
        None
    };
    if let Some(c) = from_node {
        return match c {
            NodeCaller::Host { .. } => Ok(Peer::Kubelet),
            NodeCaller::Unknown => Ok(Peer::Relayed),
            NodeCaller::Pod { uid } => Err(format!(
                "{peer} is this node's, used by pod {} on the host network: the httpGet gate answers the kubelet's hooks only",
                graceful_api::clip(&uid, 64)
            )),
        };
    }
    let inside = in_pod(peer, local);
    match mesh {
        Some(m) if inside && m.proxied() => Ok(Peer::Relayed),
        Some(m @ Mesh::IstioAmbient) => Err(format!(
            "{peer} is not this node, nor the address Istio's ambient mode gives the node's connections (if istio-cni's HOST_PROBE_SNAT_IP was changed, {})",
            m.remedy(port)
        )),
        _ if inside => Err(format!(
            "{peer} is not this node but the pod itself: the httpGet gate answers the kubelet's hooks only"
        )),
        _ => Err(format!(
            "{peer} is not this node: the httpGet gate answers the kubelet's hooks only"
        )),
    }
}

/// The refusal of a relayed request whose pod is still not terminating.
pub fn not_terminating(mesh: Option<&Mesh>, port: u16) -> String {
    match mesh {
        Some(m) => format!(
            "a request relayed by {}'s proxy, and the pod is not terminating: the gate answers a relayed hook only during the pod's termination (to have the kubelet call the gate directly, {})",
            m.name(),
            m.remedy(port)
        ),
        None => "a request whose sender the node cannot show (a NAT on the way?), and the pod is not terminating: \
                 such a request is answered only during the pod's termination"
            .into(),
    }
}

/// Whether `path` and `query` are one of `hooks` (the pod's declared
/// `preStop: httpGet` hooks) sent to the gate's `port`: the same settings
/// and container, however the query spells them. The refusal's line
/// otherwise.
pub fn spec_hook(hooks: &[SpecHook], port: u16, path: &str, query: &str) -> Result<(), String> {
    let asked = hook_query::parse(query, 0).ok();
    let mine: Vec<&SpecHook> = hooks.iter().filter(|h| h.port == port).collect();
    let same = |h: &SpecHook| {
        let t = format!("/{}", h.target.trim_start_matches('/'));
        let (p, q) = t.split_once('?').unwrap_or((&t, ""));
        p == path && asked.is_some() && parse(q) == asked
    };
    if mine.iter().any(|h| same(h)) {
        return Ok(());
    }
    if mine.is_empty() {
        return Err(format!(
            "the pod's spec has no preStop httpGet hook on port {port}: the gate drains only for the kubelet's hook"
        ));
    }
    Err(format!(
        "not the pod's own hook: its spec sends {} to port {port}, and the gate drains only for those",
        mine.iter()
            .map(|h| graceful_api::clip(&h.target, 200))
            .collect::<Vec<_>>()
            .join(" or ")
    ))
}

fn parse(query: &str) -> Option<HookQuery> {
    hook_query::parse(query, 0).ok()
}

/// Whether a connection from `peer` was made inside the pod's own network
/// namespace: loopback (Istio's 127.0.0.6 among it), Istio's IPv6
/// passthrough source `::6`, or the address it arrived at.
pub fn in_pod(peer: IpAddr, local: Option<IpAddr>) -> bool {
    // A dual-stack listener meets IPv4 peers as IPv4-mapped addresses.
    let peer = peer.to_canonical();
    peer.is_loopback()
        || peer == IpAddr::V6(std::net::Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 6))
        || Some(peer) == local.map(|l| l.to_canonical())
}

#[cfg(test)]
mod tests;
