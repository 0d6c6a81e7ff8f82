//! A pod's own gate, inside its network namespace: the httpGet gate, or
//! the socket gate.
//!
//! The httpGet gate: a drain gate with nothing in the pod. A pod annotated
//! `graceful.dev/gate: http` gets a listening socket of the agent's inside
//! its own network namespace, on `graceful.dev/gate-port` (default
//! [`DEFAULT_PORT`]). Its `preStop: httpGet` hook (no `host`: allowed
//! under Pod Security's restricted level) is sent by the kubelet to the
//! pod's own IP, so it lands on that socket: the listener says which pod
//! asks. `GET /drain?...` is held until the drain releases, then answered
//! 200 with the report. With no agent nothing listens, the kubelet's
//! connection is refused, and it sends SIGTERM at once: fail-open.
//!
//! The socket gate: a pod annotated `graceful.dev/gate: socket` gets the
//! abstract unix socket [`graceful_api::POD_SOCKET`] bound in its network
//! namespace instead, served as the node's gate socket is
//! ([`crate::serve::gate::server::serve_pod`]): its exec hook, `graceful-wait`
//! from an image volume of graceful's image, reaches it with no hostPath
//! and no port (nothing for a mesh to capture).
//!
//! - [`optin`]: which pods, on which port (or the socket), and why one is
//!   refused;
//! - [`sandbox`]: a pod's network namespace, through its processes;
//! - [`bind`]: a listener (TCP, or the abstract socket) bound inside it;
//! - [`gates`]: the listeners, opened and closed with their pods;
//! - [`peers`]: whom a gate answers: the node's own addresses
//!   ([`crate::node::addrs`]), and what a mesh makes of the kubelet's hook
//!   ([`crate::node::kube::mesh`]);
//! - [`server`]: one listener's connections, and `GET /drain`;
//! - [`resume`]: a held hook handed over by the previous agent, answered.
//!
//! The agent's sockets are created by its own threads, so they belong to
//! its cgroup: neither the listener nor the kubelet's hook connection is
//! ever counted as the pod's traffic.

pub mod bind;
pub mod gates;
pub mod http_resume;
pub mod optin;
pub mod peers;
pub mod sandbox;
pub mod server;

/// The annotation that opts a pod in: `graceful.dev/gate: http`.
pub const ANNOTATION: &str = "graceful.dev/gate";
/// The annotation that moves the gate's port.
pub const PORT_ANNOTATION: &str = graceful_api::GATE_PORT_ANNOTATION;
/// The gate's port when the pod names none: outside the ranges common
/// servers, meshes and exporters default to.
pub const DEFAULT_PORT: u16 = graceful_api::DEFAULT_GATE_PORT;
/// The Warning Event's reason when a pod's opt-in cannot be honoured.
pub const REFUSED_REASON: &str = "HttpGateRefused";
/// The Warning Event's reason when a pod's mesh stands between the
/// kubelet's hook and the gate: before the deletion, when its sidecar
/// proxy relays the hook and would cut it; during it, when the gate
/// refused a hook the mesh made unrecognisable.
pub const MESH_REASON: &str = "HttpGateMeshed";
