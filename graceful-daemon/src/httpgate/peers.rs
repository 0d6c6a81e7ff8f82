//! Whom a pod's httpGet gate answers. The listener is the pod's own, so a
//! request to it can only ever drain that pod; what the gate must tell is
//! whether it is the kubelet's hook, which no other caller may stand in
//! for. The rules:
//!
//! 1. **One of the node's own addresses**: the kubelet, which calls the
//!    pod's IP from the node's network namespace. Any time.
//! 2. **Istio ambient's SNAT address** (169.254.7.127), for a pod that
//!    istio-cni enrolled (`ambient.istio.io/redirection: enabled`): the
//!    node's rule rewrites the kubelet's source to it. Another pod cannot
//!    send from it: a reply to that address is routed to the node, where no
//!    interface has it, so no handshake completes for a forger. Any time.
//! 3. **From inside the pod** (loopback, Istio's 127.0.0.6 or `::6`, the
//!    pod's own address), for a pod whose mesh proxy relays the hook (Istio
//!    sidecar, Linkerd): only once the pod is terminating (the API shows
//!    its deletion; the gate waits up to [`TERMINATING_WAIT`] for the watch
//!    to say so). Before that no preStop hook can run, so such a request is
//!    not the kubelet's. During it, the proxy relays any caller as itself:
//!    what a caller other than the kubelet gets is a drain of its own,
//!    which neither holds nor releases the kubelet's hook (each request is
//!    its own drain), and which ends at the pod's deadline at the latest.
//! 4. Anyone else: `403`, with what to change when a mesh is in the way.

use std::{net::IpAddr, time::Duration};

use crate::kube::mesh::Mesh;
use crate::node_addrs::NodeAddrs;

/// How long a proxied request waits for the pod's deletion to reach the
/// agent's watch: the kubelet learns of it from its own watch, and runs
/// the hook at once, so the two race by the API's fan-out.
pub const TERMINATING_WAIT: Duration = Duration::from_secs(2);

/// What the gate does with a peer.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Admit,
    /// A proxied request: admitted once the pod is terminating.
    OnceTerminating,
    /// `403`, with this line.
    Refuse(String),
}

/// The verdict for `peer`, met on a connection to `local` (the pod's own
/// address, as the connection arrived) on the gate's `port`.
pub fn judge(
    node: &NodeAddrs,
    mesh: Option<&Mesh>,
    port: u16,
    (peer, local): (IpAddr, Option<IpAddr>),
    terminating: bool,
) -> Verdict {
    if node.is_node(peer) || mesh.is_some_and(|m| m.node_alias(peer)) {
        return Verdict::Admit;
    }
    let inside = in_pod(peer, local);
    match mesh {
        Some(m) if inside && m.proxied() => {
            if terminating {
                Verdict::Admit
            } else {
                Verdict::OnceTerminating
            }
        }
        Some(m @ Mesh::IstioAmbient) => Verdict::Refuse(format!(
            "{peer} is not this node, nor the address Istio's ambient mode gives the node's connections (if istio-cni's HOST_PROBE_SNAT_IP was changed, {})",
            m.remedy(port)
        )),
        _ if inside => Verdict::Refuse(format!(
            "{peer} is not this node but the pod itself: the httpGet gate answers the kubelet's hooks only"
        )),
        _ => Verdict::Refuse(format!(
            "{peer} is not this node: the httpGet gate answers the kubelet's hooks only"
        )),
    }
}

/// The refusal of a proxied request whose pod is still not terminating.
pub fn not_terminating(peer: IpAddr, mesh: &Mesh, port: u16) -> String {
    format!(
        "{peer} is {}'s proxy in the pod, and the pod is not terminating: the gate answers a relayed hook only during the pod's termination (to have the kubelet call the gate directly, {})",
        mesh.name(),
        mesh.remedy(port)
    )
}

/// Whether a connection from `peer` was made inside the pod's own network
/// namespace: loopback (Istio's 127.0.0.6 among it), Istio's IPv6
/// passthrough source `::6`, or the address it arrived at.
pub fn in_pod(peer: IpAddr, local: Option<IpAddr>) -> bool {
    let peer = match peer {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(peer),
        v4 => v4,
    };
    peer.is_loopback()
        || peer == IpAddr::V6(std::net::Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 6))
        || Some(peer) == local.map(unmapped)
}

fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests;
