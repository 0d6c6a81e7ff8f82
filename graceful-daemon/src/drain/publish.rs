//! A released drain's report, built once by the drainer, fanned out to
//! every sink but the hook: the Event on the pod, the metrics, the log
//! line and the table's history and feed. The transport writes the same
//! report as the hook's last line.

use tracing::info;

use super::{pod_api::PodApi, report::DrainReport, table::Active};
use crate::metrics::Recorder;

/// The sinks of a released drain.
pub struct Sinks<'a> {
    pub pod_api: Option<&'a PodApi>,
    pub metrics: &'a Recorder,
    /// The container's name, once the API has told it (for the Event).
    pub container_name: Option<&'a str>,
}

/// Publishes `report` to every sink and takes its drain out of the table.
pub fn released(sinks: Sinks<'_>, active: Active, report: &DrainReport) {
    if let Some(api) = sinks.pod_api {
        api.released(report, sinks.container_name);
    }
    let r = &report.report;
    sinks.metrics.drain_released(r.reason, r.waited_ms);
    info!(
        reason = r.reason.as_str(),
        waited_ms = r.waited_ms,
        inbound_at_start = r.inbound_at_start,
        peak_inbound = r.peak_inbound,
        new_connections = r.new_connections,
        "drain released"
    );
    active.released(report.clone());
}
