//! A released drain's report, built once by the drainer and fanned out to
//! its sinks: first the hook's last line (the transport writes it, as the
//! release is what the hook waits for), then the Event on the pod, the
//! metrics, the log line and the table's history and feed.

use std::sync::Arc;

use tracing::{info, Span};

use graceful_api::drain::DrainReport;

use super::{pod_kube::PodKube, table::Active};
use crate::metrics::Recorder;

/// The sinks of a released drain other than the hook.
pub(super) struct Sinks {
    pub pod_kube: Option<PodKube>,
    pub metrics: Arc<Recorder>,
    /// The container's name, once the API has told it (for the Event).
    pub container_name: Option<String>,
    /// The drain's deadline, which its Event carries.
    pub max_ms: u64,
    pub active: Active,
    /// The drain's span, for its log line.
    pub span: Span,
}

/// A drain's report, not yet published to the sinks after the hook's.
/// [`publish`](Self::publish) it once the hook's last line is written;
/// dropped, it publishes too.
pub struct Released {
    pub report: DrainReport,
    sinks: Option<Sinks>,
}

impl Released {
    pub(super) fn new(report: DrainReport, sinks: Sinks) -> Released {
        Released {
            report,
            sinks: Some(sinks),
        }
    }

    /// To every sink after the hook, and the drain out of the table.
    pub fn publish(mut self) {
        self.flush();
    }

    fn flush(&mut self) {
        let Some(s) = self.sinks.take() else { return };
        let report = &self.report;
        if let Some(api) = &s.pod_kube {
            api.released(report, s.container_name.as_deref(), s.max_ms);
        }
        let r = &report.report;
        s.metrics.drain_released(r.reason, r.waited_ms);
        s.span.in_scope(|| {
            info!(
                reason = r.reason.as_str(),
                waited_ms = r.waited_ms,
                inbound_at_start = r.inbound_at_start,
                peak_inbound = r.peak_inbound,
                new_connections = r.new_connections,
                "drain released"
            )
        });
        s.active.released(report.clone());
    }
}

impl Drop for Released {
    fn drop(&mut self) {
        self.flush();
    }
}
