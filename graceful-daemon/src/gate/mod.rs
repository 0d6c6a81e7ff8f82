//! The drain gate: a unix socket that a pod's `preStop` hook
//! (`graceful-wait`) calls to wait until the pod's traffic has drained.
//!
//! - [`api`]: what the socket accepts and answers;
//! - [`identity`]: who is calling (SO_PEERCRED → pod, container);
//! - [`server`]: the HTTP/1.1 server and the drain handler;
//! - [`settings`]: a drain's settings from annotations, flags and the grace period;
//! - [`pod_api`]: what the gate takes from the Kubernetes API, and its Events.
pub mod api;
pub mod identity;
pub mod pod_api;
pub mod server;
pub mod settings;
