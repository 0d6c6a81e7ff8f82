//! What the node is: which pod and container each cgroup belongs to, what
//! the Kubernetes API says of those pods, the node's own addresses, and
//! whether the node can run graceful at all.
//!
//! - [`resolver`]: which pod and container a cgroup belongs to;
//! - [`kube`]: names, deletions and Events from the Kubernetes API;
//! - [`addrs`]: the node's own addresses (the httpGet gate's only peers,
//!   and `ignore-peers: node`);
//! - [`doctor`]: can this node run graceful, check by check.

pub mod addrs;
pub mod doctor;
pub mod kube;
pub mod resolver;
