//! `/metrics`, in the OpenMetrics text format Prometheus scrapes.
//!
//! Two kinds of figures:
//! - [`Recorder`]: what happens (drains by outcome, their durations by
//!   reason, termination reports, the agent's own errors), counted by the
//!   tasks it happens in;
//! - [`live`]: what is (connections per pod, kernel counters, map sizes,
//!   adoption), read at scrape time from a [`LiveSource`] (the agent's
//!   view of its node: the pinned maps, the index and the gate), so a
//!   scrape never sees a stale copy.
//!
//! Per-pod series are labelled `namespace` and `pod` (the uid until the
//! API has named the pod). Their number is bounded: past `max_pods` the
//! remaining pods are summed into one `pod="_other"` series. They name
//! every pod of the node, so the metrics address on the pod network leaves
//! them out unless `--metrics-pods on` (the loopback API always has them).
//!
//! Both take plain values and import none of the rooms that count in
//! them (adopt, gate, api), so each of those can.
//!
//! - [`recorder`]: the counters and histograms;
//! - [`live`]: the scrape-time figures and their collector;
//! - [`text`]: the Prometheus text format, for scrapers that do not ask
//!   for OpenMetrics;
//! - `workloads`: terminations by namespace and workload, bounded;
//! - `label`: the one-label sets of the series.
mod label;
pub mod live;
pub mod recorder;
pub mod text;
mod workloads;

pub use live::{AdoptionFigures, KernelFigures, LiveSource, MemoryFigures, MetricsSnapshot, PodFigures};
pub use recorder::Recorder;
