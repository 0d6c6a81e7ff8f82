//! Which pods get a listener, on which port (or the socket gate), and why a
//! pod that asked for one does not: everything here is read from the pod
//! spec alone.

use super::{ANNOTATION, DEFAULT_PORT, PORT_ANNOTATION};
use crate::{continuity::handover::wire::Endpoint, node::kube::PodInfo};

/// What a pod asks of its own gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// Not opted in, or finished: no listener.
    Nothing,
    /// A listener: the httpGet gate's port, or the socket gate.
    Listen(Endpoint),
    /// Opted in, but its spec rules it out: why, in one line that says
    /// what to change.
    Refused(String),
}

/// What `pod`'s annotations and spec ask.
pub fn want(pod: &PodInfo) -> Want {
    let Some(gate) = pod.annotations.get(ANNOTATION) else {
        return Want::Nothing;
    };
    if pod.finished() {
        return Want::Nothing;
    }
    let socket = match gate.trim() {
        "http" => false,
        "socket" => true,
        _ => {
            return Want::Refused(format!(
                "{ANNOTATION}: {:?} is not a gate: the annotation takes `http` (a preStop httpGet hook) or `socket` (graceful-wait --socket @{}); graceful-wait on the node's socket needs no annotation",
                graceful_api::clip(gate, graceful_api::MAX_ECHO),
                graceful_api::POD_SOCKET
            ))
        }
    };
    if pod.host_network {
        return Want::Refused(format!(
            "a hostNetwork pod shares the node's network namespace, so the {} gate cannot listen for it alone: use graceful-wait on the node's socket (the hostPath) for this pod",
            if socket { "socket" } else { "httpGet" }
        ));
    }
    if socket {
        return Want::Listen(Endpoint::Socket);
    }
    let port = match pod.annotations.get(PORT_ANNOTATION) {
        None => DEFAULT_PORT,
        Some(raw) => match graceful_api::gate_port(raw) {
            Some(p) => p,
            None => {
                return Want::Refused(format!(
                    "{PORT_ANNOTATION}: {:?} is not a port (1 to 65535)",
                    graceful_api::clip(raw, graceful_api::MAX_ECHO)
                ))
            }
        },
    };
    if let Some((container, _)) = pod.container_ports.iter().find(|(_, p)| *p == port) {
        return Want::Refused(format!(
            "port {port} is container {container}'s port: set {PORT_ANNOTATION} to a port no container of the pod uses"
        ));
    }
    Want::Listen(Endpoint::Port(port))
}

/// What `pod`'s mesh would do to its httpGet gate's hook, before any
/// deletion: [`Mesh::warning`](crate::node::kube::mesh::Mesh::warning), for a pod
/// opted in to the httpGet gate whose classic sidecar proxy relays the hook.
pub fn mesh_warning(pod: &PodInfo) -> Option<String> {
    match want(pod) {
        Want::Listen(Endpoint::Port(port)) => crate::node::kube::mesh::of(pod, port)?.warning(port),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
