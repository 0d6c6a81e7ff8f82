//! The terminating report's latency after the last inbound close, by the
//! kernel's clock, over many pods: each with its own agent watching the
//! fake API, deleted while it holds one connection, which its app then
//! closes.

use super::stats::summary;
use graceful_tests::k8s::terminating::{field, num, scene, Reach};

/// `n` pods, one after the other.
pub fn run(n: usize) {
    let mut ms = Vec::with_capacity(n);
    for _ in 0..n {
        let mut s = scene(1, Reach::OptedIn);
        s.delete(1);
        s.app.as_mut().unwrap().cmd("close-in 1 fin");
        let line = s.report();
        assert_eq!(field(&line, "outcome"), Some("drained"), "{line}");
        let last_close = num(&line, "last_inbound_close_ns");
        ms.push(num(&line, "report_ns").saturating_sub(last_close) as f64 / 1e6);
    }
    println!("terminating report after the pod's last inbound close (every terminating pod, gated or not):");
    let (p50, p99) = summary("graceful (kernel close event)", ms);
    println!("{{\"bench\":\"terminating-report-latency\",\"p50_ms\":{p50:.3},\"p99_ms\":{p99:.3}}}");
}
