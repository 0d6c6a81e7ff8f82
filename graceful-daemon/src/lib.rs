//! graceful: per-cgroup TCP connection counts from eBPF, and the drain gate
//! built on them.
//!
//! The agent is six rooms, in the order data flows, and the wiring that
//! starts them; a room imports only the rooms above it in this list
//! (`cargo xtask layout` checks it, and draws the house in
//! `docs/architecture.md`):
//!
//! - [`kernel`]: the kernel side: the programs, their pins and maps, the
//!   sockets older than the agent, the cgroup tree, the agent's memory and
//!   file limits, the running kernel's version;
//! - [`node`]: what the node is: which pod a cgroup belongs to, the
//!   Kubernetes API's names and Events, the node's own addresses, and the
//!   doctor's checks;
//! - [`continuity`]: what outlives one agent process: the handover to a
//!   successor and the keeper that holds everything through a crash;
//! - [`drain`]: the drains: one hook lifecycle, the engine, the settings,
//!   the table and the reports;
//! - [`serve`]: every transport: the gate socket, the pods' httpGet and
//!   socket gates, the local API, and their shared HTTP code;
//! - [`agent`]: the node agent, which starts every service in named phases;
//! - [`cli`]: the `graceful` command line.
//!
//! Beside them, small pieces every room may use: [`metrics`] (what the
//! agent counts), [`share`] (each caller's fair share of a server),
//! [`listen`] (a TCP listener, on every address for `:PORT`),
//! [`duration`], [`logging`] and [`sync`].

// The bound on a function's length (the workspace's lints) is for the
// product; a unit test is a script, read top to bottom.
#![cfg_attr(test, allow(clippy::too_many_lines))]

/// `graceful --version`: the crate's version and the commit it was built
/// from (`build.rs`).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GRACEFUL_COMMIT"), ")");

pub mod agent;
pub mod cli;
pub mod continuity;
pub mod drain;
pub mod duration;
pub mod kernel;
pub mod listen;
pub mod logging;
pub mod metrics;
pub mod node;
pub mod serve;
pub mod share;
pub mod sync;
