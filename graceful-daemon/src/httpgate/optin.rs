//! Which pods get a listener, on which port, and why a pod that asked for
//! one does not: everything here is read from the pod spec alone.

use super::{ANNOTATION, DEFAULT_PORT, PORT_ANNOTATION};
use crate::kube::PodInfo;

/// What a pod asks of the httpGet gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// Not opted in, or finished: no listener.
    Nothing,
    /// A listener on this port.
    Port(u16),
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
    if gate.trim() != "http" {
        return Want::Refused(format!(
            "{ANNOTATION}: {:?} is not a gate: the annotation takes `http` (the exec hook, graceful-wait, needs no annotation)",
            graceful_api::clip(gate, graceful_api::MAX_ECHO)
        ));
    }
    if pod.host_network {
        return Want::Refused(
            "a hostNetwork pod shares the node's network namespace, so the httpGet gate cannot listen for it alone: use the exec hook (graceful-wait) for this pod".into(),
        );
    }
    let port = match pod.annotations.get(PORT_ANNOTATION) {
        None => DEFAULT_PORT,
        Some(raw) => match raw.trim().parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => {
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
    Want::Port(port)
}

#[cfg(test)]
mod tests;
