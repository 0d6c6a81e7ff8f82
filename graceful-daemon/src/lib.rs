//! graceful: per-cgroup TCP connection counts from eBPF, and the drain gate
//! built on them.
//!
//! - [`bpf`]: the kernel programs, their pins and maps;
//! - [`adopt`]: adopting sockets that predate the agent (sock_diag, netns);
//! - [`cgroupfs`]: the cgroup v2 hierarchy, ids and paths;
//! - [`resolver`]: which pod and container a cgroup belongs to;
//! - [`kube`]: names, deletions and Events from the Kubernetes API;
//! - [`node_addrs`]: the node's own addresses (the httpGet gate's only
//!   peers, and `ignore-peers: node`);
//! - [`gate`]: the drain gate's socket, which `graceful-wait` calls;
//! - [`metrics`]: what the agent counts and what `/metrics` reads at scrape time;
//! - [`api`]: the local API, `/metrics` included;
//! - [`memcg`]: the agent's memory budget, which grows with the node's sockets;
//! - [`drain`]: the drains: settings, engine, table and reports;
//! - [`handover`]: a new agent takes over the listeners and held hooks of
//!   the running one, and nothing is cut;
//! - [`keeper`]: a process that outlives the agent and keeps its
//!   listeners and held hooks, so that a crash cuts none;
//! - [`agent`]: the node agent, which starts and owns every task;
//! - [`counted`]: the pinned counts per cgroup path (`graceful cgroups`,
//!   `/v1/cgroups`);
//! - [`doctor`]: can this node run graceful, check by check;
//! - [`cli`]: the `graceful` command line.

// The bound on a function's length (the workspace's lints) is for the
// product; a unit test is a script, read top to bottom.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod adopt;

/// `graceful --version`: the crate's version and the commit it was built
/// from (`build.rs`).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("GRACEFUL_COMMIT"), ")");

pub mod agent;
pub mod api;
pub mod bpf;
pub mod cgroupfs;
pub mod cli;
pub mod counted;
pub mod doctor;
pub mod drain;
pub mod duration;
pub mod gate;
pub mod handover;
pub mod http_conn;
pub mod httpgate;
pub mod keeper;
pub mod kernel;
pub mod kube;
pub mod logging;
pub mod memcg;
pub mod metrics;
pub mod node_addrs;
pub mod nofile;
pub mod reply;
pub mod resolver;
pub mod share;
pub mod sync;

/// For `skip_serializing_if`: a tally of zero is left out of the JSON.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}
