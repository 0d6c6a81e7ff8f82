use http::{Method, StatusCode};

use super::Route;

#[test]
fn routes_by_path() {
    assert_eq!(Route::parse(&Method::GET, "/healthz"), Ok(Route::Healthz));
    assert_eq!(Route::parse(&Method::HEAD, "/metrics"), Ok(Route::Metrics));
    assert_eq!(Route::parse(&Method::GET, "/v1/pods"), Ok(Route::Pods));
    assert_eq!(
        Route::parse(&Method::GET, "/v1/pods/ns/web"),
        Ok(Route::Pod("ns/web"))
    );
    assert_eq!(Route::parse(&Method::GET, "/v1/pods/"), Ok(Route::Pod("")));
}

#[test]
fn read_only_and_unknown_paths_are_refused_in_one_line() {
    let (code, msg) = Route::parse(&Method::POST, "/v1/pods").unwrap_err();
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    assert!(msg.contains("read-only"));
    let long = format!("/{}", "x".repeat(10_000));
    let (code, msg) = Route::parse(&Method::GET, &long).unwrap_err();
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(msg.len() < 1024 && !msg.contains('\n'), "{msg}");
}

#[test]
fn the_metrics_address_serves_metrics_and_probes_only() {
    use super::Scope;
    for path in ["/metrics", "/healthz", "/readyz"] {
        let r = Route::parse(&Method::GET, path).unwrap();
        assert!(r.served_in(Scope::Metrics) && r.served_in(Scope::Full), "{path}");
    }
    for path in ["/v1/pods", "/v1/pods/ns/web", "/v1/drains", "/v1/events"] {
        let r = Route::parse(&Method::GET, path).unwrap();
        assert!(
            !r.served_in(Scope::Metrics),
            "{path} must not be served on the pod's address"
        );
        assert!(r.served_in(Scope::Full), "{path}");
    }
}
