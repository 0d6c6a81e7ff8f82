//! Every transport the agent answers on. Each decodes its requests and
//! encodes its answers; what a held hook does is the drain's
//! ([`crate::drain::hook`]).
//!
//! - [`gate`]: the gate socket, which `graceful-wait` calls (exec hooks),
//!   and the pods' own socket gates;
//! - [`httpgate`]: the kubelet's httpGet hook on a pod's own address;
//! - [`local_api`]: the local API, read-only, `/metrics` included;
//! - [`http_conn`]: one HTTP/1.1 connection, for every transport;
//! - [`reply`]: the responses they share.

pub mod gate;
pub mod http_conn;
pub mod httpgate;
pub mod local_api;
pub mod reply;
