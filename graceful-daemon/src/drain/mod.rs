//! The drains: when a terminating container may receive its SIGTERM, from
//! its pod's live inbound connections. Transports (the gate socket) hand a
//! request in; a report comes out, published to every sink.
//!
//! - [`settings`]: a drain's settings from annotations, the request and the
//!   grace period;
//! - [`scope`]: the cgroups a drain counts, and who it is for;
//! - [`drainer`]: one drain from request to report;
//! - [`hook`]: one held hook's life, for every transport: admitted, held,
//!   run, released, published, and resumed after a handover or a crash;
//! - [`engine`]: one drain's wait, event-driven from start to release;
//! - [`policy`]: when a drain is done (pure, testable without a kernel);
//! - [`exclusions`]: connections a drain leaves out, as the programs match them;
//! - [`exits`]: containers a drain must outlive;
//! - [`stop_order`]: the order the kubelet stops a pod's containers in
//!   (native sidecars last), and the waits it makes impossible;
//! - [`table`]: the drains in progress, the history and their feed;
//! - a drain as every client reads it (its report, in progress, the feed) is
//!   the contract's: `graceful_api::drain`;
//! - [`publish`]: a released drain's report to its sinks;
//! - [`pod_kube`]: what drains take from the Kubernetes API, and their Events;
//! - [`terminations`]: the report every terminating pod gets, gated or not:
//!   when its inbound count reaches zero after its deletion.
pub mod drainer;
pub mod engine;
pub mod exclusions;
pub mod exits;
pub mod hook;
pub mod pod_kube;
pub mod policy;
pub mod publish;
pub mod scope;
pub mod settings;
pub mod stop_order;
pub mod table;
pub mod terminations;
