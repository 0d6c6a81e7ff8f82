//! The daemon's local API: read-only, for operators, the CLI and
//! Prometheus. HTTP/1.1 on a TCP address (`--api-addr`, loopback by
//! default), on a unix socket (what the `graceful` CLI asks), and, when
//! asked, on a metrics address (`--metrics-addr`) that serves only
//! `/metrics`, `/healthz` and `/readyz`: the DaemonSet puts that one on the
//! pod's address for Prometheus and the probes, and keeps everything that
//! names pods and drains on loopback, which `kubectl port-forward` (and so
//! `kubectl graceful`) reaches with the user's own RBAC.
//!
//! | path | what |
//! |---|---|
//! | `GET /v1/pods` | every pod with its counts and state ([`PodView`](crate::node::resolver::counts::PodView)) |
//! | `GET /v1/pods/{uid, uid prefix, or namespace/name}` | one pod |
//! | `GET /v1/drains` | drains in progress and released, terminating pods ([`Drains`](node::Drains)) |
//! | `GET /v1/events` | NDJSON stream: pod snapshots as they change, drain and termination events |
//! | `GET /v1/cgroups` | every cgroup's pinned counts (`graceful cgroups -o json`) |
//! | `GET /v1/doctor` | `graceful doctor`'s checks, from inside the agent ([`Finding`](crate::node::doctor::Finding)s) |
//! | `GET /healthz` | 200 while the agent serves |
//! | `GET /readyz` | 200 once the programs are attached and the resolver has synced |
//! | `GET /metrics` | Prometheus (OpenMetrics text) |
//!
//! - [`node`]: what the agent knows, gathered for the API;
//! - [`routes`]: the handlers;
//! - [`feed`]: the event stream;
//! - [`server`]: the listeners.
pub mod feed;
pub mod node;
pub mod routes;
pub mod server;

/// Where the CLI finds the running daemon.
pub const DEFAULT_SOCKET: &str = "/run/graceful/api.sock";
/// The default TCP address: loopback, so nothing is exposed unless asked.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9464";
/// The DaemonSet's ports: the metrics address on the pod's own address,
/// the whole API on the pod's loopback.
pub const POD_METRICS_PORT: u16 = 9464;
pub use graceful_api::POD_API_PORT;
