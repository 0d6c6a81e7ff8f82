use std::{collections::BTreeSet, path::Path};

use super::ERROR_KINDS;

/// Every `.error("kind")` in the crate's sources.
fn called(dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            called(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("recorder/tests.rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for part in text.split(".error(\"").skip(1) {
                if let Some((kind, _)) = part.split_once("\")") {
                    out.insert(kind.to_string());
                }
            }
        }
    }
}

#[test]
fn every_error_kind_called_is_listed_and_starts_at_zero() {
    let mut kinds = BTreeSet::new();
    called(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut kinds);
    let listed: BTreeSet<String> = ERROR_KINDS.iter().map(|k| k.to_string()).collect();
    assert_eq!(
        kinds, listed,
        "ERROR_KINDS must list exactly the kinds passed to Recorder::error"
    );
}

/// A node that is gone: the registry encodes the recorder's families alone.
struct Gone;
impl crate::metrics::live::LiveSource for Gone {
    fn metrics_snapshot(&self) -> crate::metrics::live::MetricsSnapshot {
        unreachable!("the node is gone")
    }
}

fn encoded(r: &std::sync::Arc<super::Recorder>, pods: bool) -> String {
    let weak: std::sync::Weak<dyn crate::metrics::live::LiveSource> = std::sync::Weak::<Gone>::new();
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &r.registry(weak, pods)).unwrap();
    out
}

#[test]
fn workload_series_are_bounded_and_only_where_pods_are_named() {
    let r = std::sync::Arc::new(super::Recorder::new(&["drained", "exited", "deleted"], 2));
    r.termination("exited", "shop", "deployment/web");
    r.termination("drained", "shop", "deployment/web");
    r.termination("exited", "pay", "deployment/web");
    // Past the bound: the third workload, and any later one, count as _other.
    r.termination("exited", "shop", "statefulset/db");
    r.termination("exited", "tenant", "pod");
    r.unreported();
    let all = encoded(&r, true);
    for line in [
        "graceful_workload_terminations_total{namespace=\"shop\",workload=\"deployment/web\",outcome=\"exited\"} 1",
        "graceful_workload_terminations_total{namespace=\"shop\",workload=\"deployment/web\",outcome=\"drained\"} 1",
        "graceful_workload_terminations_total{namespace=\"pay\",workload=\"deployment/web\",outcome=\"exited\"} 1",
        "graceful_workload_terminations_total{namespace=\"_other\",workload=\"_other\",outcome=\"exited\"} 2",
        "graceful_terminations_total{outcome=\"exited\"} 4",
        "graceful_unreported_terminations_total 1",
    ] {
        assert!(all.lines().any(|l| l == line), "no {line} in\n{all}");
    }
    assert_eq!(
        all.matches("graceful_workload_terminations_total{").count(),
        4,
        "{all}"
    );
    let public = encoded(&r, false);
    assert!(!public.contains("workload_terminations"), "{public}");
    assert!(
        public.contains("graceful_unreported_terminations_total 1"),
        "{public}"
    );
}

/// What the docs (observe.md) say a full bound costs a scrape: 300
/// workloads on a node, each terminated with every outcome, at the
/// default bound (256).
#[test]
fn a_full_bound_of_workload_series_is_771_series_and_under_100_kb() {
    let r = std::sync::Arc::new(super::Recorder::new(&["drained", "exited", "deleted"], 256));
    let base = encoded(&r, true).len();
    for i in 0..300 {
        for o in ["drained", "exited", "deleted"] {
            r.termination(
                o,
                &format!("team-namespace-{i:03}"),
                &format!("deployment/service-name-{i:03}"),
            );
        }
    }
    let all = encoded(&r, true);
    let series = all.matches("graceful_workload_terminations_total{").count();
    let bytes = all.len() - base;
    eprintln!("{series} workload series: {bytes} bytes of text");
    assert_eq!(series, 256 * 3 + 3, "the bound's workloads and _other's three");
    assert!(bytes < 100_000, "{bytes} bytes");
}
