//! The local API's handlers. Everything is read-only: GET (and HEAD, which
//! hyper answers from GET) only.

use std::sync::Arc;

use graceful_api::{clip, MAX_ECHO};
use http::{Method, Request, StatusCode};
use prometheus_client::registry::Registry;

use super::{feed, node::Node};
use crate::{
    metrics::text,
    node::resolver::{counts::find, watch::Resolver},
    serve::reply::{bytes, error, json, Body},
};

/// What every connection's handler shares.
pub struct Api {
    pub node: Arc<Node>,
    /// Every metric, per-pod series included: the loopback address's and
    /// the unix socket's `/metrics`.
    pub registry: Registry,
    /// The metrics address's: per-pod series only with `--metrics-pods on`.
    pub public_registry: Registry,
    /// The resolver, whose changes wake the event stream.
    pub resolver: Resolver,
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const ENDPOINTS: &str = "GET /v1/pods, /v1/pods/{uid|namespace/name}, /v1/drains, /v1/events, /v1/cgroups, \
                         /v1/doctor, /healthz, /readyz, /metrics";

/// What a listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything: `--api-addr` (loopback by default) and the unix socket.
    Full,
    /// `/metrics`, `/healthz` and `/readyz` only: `--metrics-addr`, the
    /// pod's own address in the DaemonSet, which any pod of the cluster can
    /// reach. Nothing that names a pod or a drain is read there (the
    /// per-pod series only with `--metrics-pods on`).
    Metrics,
}

/// What a request asks for, from its method and path alone: the part of
/// [`handle`] that needs nothing of the agent (fuzzed by
/// `fuzz/fuzz_targets/api_request.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    Healthz,
    Readyz,
    Metrics,
    Pods,
    Drains,
    Events,
    /// The pinned counts of every cgroup, as `graceful cgroups -o json`.
    Cgroups,
    /// `graceful doctor`'s checks, run in the agent (no trial load: its
    /// programs are loaded).
    Doctor,
    /// `/v1/pods/{want}`: a uid, uid prefix or namespace/name, for [`find`].
    Pod(&'a str),
}

impl Route<'_> {
    /// Whether a listener of `scope` answers this route.
    pub fn served_in(self, scope: Scope) -> bool {
        scope == Scope::Full || matches!(self, Route::Healthz | Route::Readyz | Route::Metrics)
    }
}

impl<'a> Route<'a> {
    /// The route `method` and `path` ask for, or the status and one-line
    /// message to answer with.
    pub fn parse(method: &Method, path: &'a str) -> Result<Route<'a>, (StatusCode, String)> {
        if method != Method::GET && method != Method::HEAD {
            return Err((
                StatusCode::METHOD_NOT_ALLOWED,
                format!("the local API is read-only: {ENDPOINTS}"),
            ));
        }
        Ok(match path {
            "/healthz" => Route::Healthz,
            "/readyz" => Route::Readyz,
            "/metrics" => Route::Metrics,
            "/v1/pods" => Route::Pods,
            "/v1/drains" => Route::Drains,
            "/v1/events" => Route::Events,
            "/v1/cgroups" => Route::Cgroups,
            "/v1/doctor" => Route::Doctor,
            _ => match path.strip_prefix("/v1/pods/") {
                Some(want) => Route::Pod(want),
                None => {
                    return Err((
                        StatusCode::NOT_FOUND,
                        format!("no such endpoint {}: {ENDPOINTS}", clip(path, MAX_ECHO)),
                    ))
                }
            },
        })
    }
}

pub async fn handle<B>(api: Arc<Api>, scope: Scope, req: Request<B>) -> http::Response<Body> {
    let route = match Route::parse(req.method(), req.uri().path()) {
        Ok(r) => r,
        Err((code, message)) => return error(code, message),
    };
    if !route.served_in(scope) {
        return error(
            StatusCode::FORBIDDEN,
            "this address serves /metrics, /healthz and /readyz only: pods and drains are on the agent's \
             --api-addr (loopback) and unix socket (`kubectl graceful`, or `graceful pods` in the agent's pod)",
        );
    }
    match route {
        Route::Healthz => match api.node.health() {
            Ok(()) => bytes(StatusCode::OK, "text/plain", "ok\n"),
            Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e),
        },
        Route::Readyz => {
            let s = api.node.status();
            let code = if s.ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            json(code, &s)
        }
        Route::Metrics => {
            let accept = req
                .headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let registry = match scope {
                Scope::Full => &api.registry,
                Scope::Metrics => &api.public_registry,
            };
            metrics(&api, registry, text::wants_openmetrics(accept))
        }
        Route::Pods => json(StatusCode::OK, &api.node.pods()),
        Route::Drains => json(StatusCode::OK, &api.node.drains()),
        Route::Events => feed::stream(api.node.clone(), api.resolver.subscribe()),
        Route::Cgroups => {
            let node = api.node.clone();
            blocking(move || node.cgroups()).await
        }
        Route::Doctor => {
            let node = api.node.clone();
            blocking(move || Ok(node.doctor())).await
        }
        Route::Pod(want) => {
            let pods = api.node.pods();
            match find(&pods, want) {
                Ok(p) => json(StatusCode::OK, p),
                Err(e) => error(StatusCode::NOT_FOUND, e),
            }
        }
    }
}

/// A JSON answer computed off the runtime's threads (a walk of the
/// cgroup tree, the doctor's checks).
async fn blocking<T: serde::Serialize + Send + 'static>(
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> http::Response<Body> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => json(StatusCode::OK, &v),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the request's task failed"),
    }
}

/// `/metrics`: OpenMetrics when the scraper asks for it, else the
/// Prometheus text format.
fn metrics(api: &Api, registry: &Registry, openmetrics: bool) -> http::Response<Body> {
    let mut om = String::with_capacity(16 * 1024);
    match prometheus_client::encoding::text::encode(&mut om, registry) {
        Ok(()) if openmetrics => bytes(StatusCode::OK, OPENMETRICS, om),
        Ok(()) => bytes(StatusCode::OK, text::CONTENT_TYPE, text::from_openmetrics(&om)),
        Err(_) => {
            api.node.metrics.error("metrics_encode");
            error(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode the metrics")
        }
    }
}

#[cfg(test)]
mod tests;
