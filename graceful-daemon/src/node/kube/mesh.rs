//! Which service mesh a pod is in, read from its spec alone, and what the
//! mesh does to the httpGet gate's hook. Each mesh changes the address the
//! kubelet's request arrives from, so the gate must know it to tell the
//! kubelet's hook from another caller:
//!
//! - **Istio, sidecar mode** (`sidecar.istio.io/status`, or a container
//!   `istio-proxy`): its rules redirect every inbound port to Envoy, which
//!   connects to the gate from 127.0.0.6 (`::6`); with `rewriteAppHTTPProbers`
//!   (on by default since 1.25) the kubelet calls pilot-agent's
//!   `:15020/app-lifecycle/<container>/prestopz`, and pilot-agent calls the
//!   gate from 127.0.0.6 too. Either way the request is a proxy's, from
//!   inside the pod.
//! - **Linkerd** (`linkerd.io/proxy-version`, or a container
//!   `linkerd-proxy`): proxy-init redirects every inbound port to 4143, and
//!   the proxy connects to the gate from the pod's own address.
//! - **Istio, ambient mode** (`ambient.istio.io/redirection: enabled`, which
//!   istio-cni writes on each pod it enrolls): istio-cni SNATs every
//!   connection from a process of the node to the pod to 169.254.7.127
//!   (`fd16:9254:7127:1337:ffff:ffff:ffff:ffff`), the kubelet's included,
//!   and the request reaches the gate directly.
//!
//! What the httpGet gate then admits, and why it is safe, is in
//! [`crate::serve::httpgate::peers`]. The proxy's own ports (status, health,
//! metrics) carry no app traffic, but the kubelet's hooks and probes to
//! them are the pod's inbound connections: a drain leaves them out
//! ([`own_ports`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::PodInfo;

/// The address istio-cni SNATs the node's connections to an ambient pod to
/// (Istio's `HOST_PROBE_SNAT_IP`, and its IPv6 twin).
pub const AMBIENT_PROBE_V4: Ipv4Addr = Ipv4Addr::new(169, 254, 7, 127);
pub const AMBIENT_PROBE_V6: Ipv6Addr =
    Ipv6Addr::new(0xfd16, 0x9254, 0x7127, 0x1337, 0xffff, 0xffff, 0xffff, 0xffff);

/// A pod's mesh, as far as the gate's hook is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mesh {
    IstioSidecar {
        /// The gate's port is left out of the capture
        /// (`traffic.sidecar.istio.io/excludeInboundPorts`, or not in
        /// `includeInboundPorts`): the kubelet reaches it directly.
        port_excluded: bool,
        /// pilot-agent relays the hook (`sidecar.istio.io/rewriteAppHTTPProbers`
        /// not `"false"`); it ignores the port's exclusion.
        rewritten: bool,
        /// `istio-proxy` is a native sidecar (stopped after the app).
        native: bool,
    },
    IstioAmbient,
    Linkerd {
        /// `config.linkerd.io/skip-inbound-ports` names the gate's port.
        port_skipped: bool,
        native: bool,
    },
}

impl Mesh {
    /// The mesh's name, for logs and Events.
    pub fn name(&self) -> &'static str {
        match self {
            Mesh::IstioSidecar { .. } => "Istio (sidecar mode)",
            Mesh::IstioAmbient => "Istio (ambient mode)",
            Mesh::Linkerd { .. } => "Linkerd",
        }
    }

    /// Whether the kubelet's hook reaches the gate through the mesh's proxy
    /// in the pod (and so from inside the pod, as the proxy).
    pub fn proxied(&self) -> bool {
        match self {
            Mesh::IstioSidecar {
                port_excluded,
                rewritten,
                ..
            } => *rewritten || !port_excluded,
            Mesh::Linkerd { port_skipped, .. } => !port_skipped,
            Mesh::IstioAmbient => false,
        }
    }

    /// Whether `ip` is the address the mesh makes the kubelet's hook come
    /// from, outside the pod (ambient's SNAT).
    pub fn node_alias(&self, ip: IpAddr) -> bool {
        matches!(self, Mesh::IstioAmbient)
            && match ip {
                IpAddr::V4(v4) => v4 == AMBIENT_PROBE_V4,
                IpAddr::V6(v6) => v6 == AMBIENT_PROBE_V6 || v6.to_ipv4_mapped() == Some(AMBIENT_PROBE_V4),
            }
    }

    /// What the mesh does to the hook that no rule of the gate can mend,
    /// in one line with what to set; `None` when the hook works as it is.
    /// Two things:
    /// - a classic sidecar proxy that relays the hook gets its SIGTERM at
    ///   the deletion, with the app's hook, and cuts the hook when it exits
    ///   (measured on the node: Istio's, 0.6 s after the deletion);
    /// - a hook relayed through the proxy's inbound port (Istio's 15006
    ///   with the rewrite off, Linkerd's 4143) is a connection the drain
    ///   cannot tell from the app's traffic, which it shares the port with:
    ///   the drain counts it and runs to its deadline. (Istio's rewritten
    ///   hook comes in on the status port, which a drain leaves out.)
    pub fn warning(&self, port: u16) -> Option<String> {
        match *self {
            Mesh::IstioSidecar { native: false, .. } if self.proxied() => Some(format!(
                "Istio's sidecar relays this pod's preStop hook to the httpGet gate (port {port}); it stops at the deletion and cuts the hook it relays: run istio-proxy as a native sidecar, annotate the pod traffic.sidecar.istio.io/excludeInboundPorts: \"{port}\" and sidecar.istio.io/rewriteAppHTTPProbers: \"false\", or use graceful.dev/gate: socket"
            )),
            Mesh::IstioSidecar {
                rewritten: false,
                port_excluded: false,
                ..
            } => Some(format!(
                "Istio captures the httpGet gate's port {port} and Envoy passes the kubelet's hook through its inbound port, where the drain counts it as the app's traffic: the drain runs to its deadline; leave sidecar.istio.io/rewriteAppHTTPProbers on, annotate the pod traffic.sidecar.istio.io/excludeInboundPorts: \"{port}\", or use graceful.dev/gate: socket"
            )),
            Mesh::Linkerd { port_skipped: false, native } => Some(format!(
                "Linkerd's proxy relays this pod's preStop hook to the httpGet gate (port {port}) through its inbound port, {}: annotate the pod config.linkerd.io/skip-inbound-ports: \"{port}\", or use graceful.dev/gate: socket",
                if native {
                    "where the drain counts it as the app's traffic and runs to its deadline"
                } else {
                    "and cuts it when it stops at the deletion"
                }
            )),
            _ => None,
        }
    }

    /// What to add when a peer was refused from a meshed pod.
    pub fn remedy(&self, port: u16) -> String {
        match self {
            Mesh::IstioSidecar { .. } => format!(
                "annotate the pod traffic.sidecar.istio.io/excludeInboundPorts: \"{port}\" and sidecar.istio.io/rewriteAppHTTPProbers: \"false\", or use graceful.dev/gate: socket"
            ),
            Mesh::Linkerd { .. } => format!(
                "annotate the pod config.linkerd.io/skip-inbound-ports: \"{port}\", or use graceful.dev/gate: socket"
            ),
            Mesh::IstioAmbient => format!(
                "set it back to {AMBIENT_PROBE_V4}, or use graceful.dev/gate: socket"
            ),
        }
    }
}

/// The mesh `pod` is in, if any: ambient wins over a sidecar's traces (a
/// pod enrolled in ambient has no sidecar).
pub fn of(pod: &PodInfo, port: u16) -> Option<Mesh> {
    let ann = |k: &str| pod.annotations.get(k).map(|v| v.trim());
    if ann("ambient.istio.io/redirection") == Some("enabled") {
        return Some(Mesh::IstioAmbient);
    }
    let container = |name: &str| pod.containers.iter().find(|c| c.name == name);
    let native = |name: &str| container(name).is_some_and(|c| c.kind == super::pod::ContainerKind::Sidecar);
    if ann("sidecar.istio.io/status").is_some() || container("istio-proxy").is_some() {
        let excluded = ann("traffic.sidecar.istio.io/excludeInboundPorts").is_some_and(|l| names(l, port));
        let included = match ann("traffic.sidecar.istio.io/includeInboundPorts") {
            None => true,
            Some(l) => l == "*" || names(l, port),
        };
        return Some(Mesh::IstioSidecar {
            port_excluded: excluded || !included,
            rewritten: ann("sidecar.istio.io/rewriteAppHTTPProbers") != Some("false"),
            native: native("istio-proxy"),
        });
    }
    if ann("linkerd.io/proxy-version").is_some() || container("linkerd-proxy").is_some() {
        return Some(Mesh::Linkerd {
            port_skipped: ann("config.linkerd.io/skip-inbound-ports").is_some_and(|l| names(l, port)),
            native: native("linkerd-proxy"),
        });
    }
    None
}

/// The ports of `pod`'s sidecar proxy that carry no app traffic: Istio's
/// status port (15020: the kubelet's rewritten probes and hooks), Envoy's
/// health (15021) and metrics (15090); Linkerd's admin port (4191: probes
/// and metrics). Ambient has no proxy in the pod.
pub fn own_ports(pod: &PodInfo) -> &'static [u16] {
    match of(pod, 0) {
        Some(Mesh::IstioSidecar { .. }) => &[15020, 15021, 15090],
        Some(Mesh::Linkerd { .. }) => &[4191],
        _ => &[],
    }
}

/// Whether a mesh's port list (`9711,8080`, ranges `9000-9999`) names `port`.
fn names(list: &str, port: u16) -> bool {
    list.split(',').map(str::trim).any(|p| match p.split_once('-') {
        Some((lo, hi)) => matches!((lo.trim().parse::<u16>(), hi.trim().parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&port)),
        None => p.parse::<u16>() == Ok(port),
    })
}

#[cfg(test)]
mod tests;
