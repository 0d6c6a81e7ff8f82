//! The drain gate: a unix socket that a pod's `preStop` hook
//! (`graceful-wait`) calls to wait until the pod's traffic has drained. A
//! transport only: it identifies the caller, reads the request and streams
//! the lines; the drain itself is [`crate::drain`]'s.
//!
//! - [`api`]: what the socket accepts and answers;
//! - [`identity`]: who is calling (SO_PEERCRED → pod, container);
//! - [`listener`]: its socket, bound and kept bound;
//! - [`server`]: the HTTP/1.1 server and its two routes;
//! - [`resume`]: a held hook handed over by the previous agent, answered.
pub mod exec_resume;
pub mod identity;
pub mod listener;
pub mod protocol;
pub mod server;
