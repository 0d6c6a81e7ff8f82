use super::{from_openmetrics, wants_openmetrics};

#[test]
fn counters_are_named_with_total_and_the_end_marker_goes() {
    let om = "# HELP graceful_drains Drains.\n# TYPE graceful_drains counter\n\
              graceful_drains_total{outcome=\"drained\"} 3\n\
              # HELP graceful_pods Pods.\n# TYPE graceful_pods gauge\ngraceful_pods 2\n\
              # HELP graceful_d Seconds.\n# TYPE graceful_d histogram\n\
              graceful_d_bucket{le=\"+Inf\"} 1\ngraceful_d_sum 0.5\ngraceful_d_count 1\n\
              # HELP graceful_x X.\n# TYPE graceful_x unknown\ngraceful_x 1\n# EOF\n";
    let text = from_openmetrics(om);
    assert_eq!(
        text,
        "# HELP graceful_drains_total Drains.\n# TYPE graceful_drains_total counter\n\
         graceful_drains_total{outcome=\"drained\"} 3\n\
         # HELP graceful_pods Pods.\n# TYPE graceful_pods gauge\ngraceful_pods 2\n\
         # HELP graceful_d Seconds.\n# TYPE graceful_d histogram\n\
         graceful_d_bucket{le=\"+Inf\"} 1\ngraceful_d_sum 0.5\ngraceful_d_count 1\n\
         # HELP graceful_x X.\n# TYPE graceful_x untyped\ngraceful_x 1\n"
    );
}

#[test]
fn openmetrics_only_when_asked() {
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert!(wants_openmetrics(Some(prometheus)));
    assert!(wants_openmetrics(Some("application/openmetrics-text")));
    for other in [
        None,
        Some("*/*"),
        Some("text/plain"),
        Some("application/openmetrics-text;q=0"),
    ] {
        assert!(!wants_openmetrics(other), "{other:?}");
    }
}
