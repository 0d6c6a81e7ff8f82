//! The local API's handlers. Everything is read-only: GET (and HEAD, which
//! hyper answers from GET) only.

use std::sync::Arc;

use graceful_api::{clip, MAX_ECHO};
use http::{Method, Request, StatusCode};
use prometheus_client::registry::Registry;

use super::{feed, node::Node};
use crate::{
    reply::{bytes, error, json, Body},
    resolver::{counts::find, watch::Resolver},
};

/// What every connection's handler shares.
pub struct Api {
    pub node: Arc<Node>,
    pub registry: Registry,
    /// The resolver, whose changes wake the event stream.
    pub resolver: Resolver,
}

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const ENDPOINTS: &str =
    "GET /v1/pods, /v1/pods/{uid|namespace/name}, /v1/drains, /v1/events, /healthz, /readyz, /metrics";

pub async fn handle<B>(api: Arc<Api>, req: Request<B>) -> http::Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("the local API is read-only: {ENDPOINTS}"),
        );
    }
    let path = req.uri().path();
    match path {
        "/healthz" => match api.node.health() {
            Ok(()) => bytes(StatusCode::OK, "text/plain", "ok\n"),
            Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e),
        },
        "/readyz" => {
            let s = api.node.status();
            let code = if s.ready {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            json(code, &s)
        }
        "/metrics" => metrics(&api),
        "/v1/pods" => json(StatusCode::OK, &api.node.pods()),
        "/v1/drains" => json(StatusCode::OK, &api.node.drains()),
        "/v1/events" => feed::stream(api.node.clone(), api.resolver.subscribe()),
        _ => match path.strip_prefix("/v1/pods/") {
            Some(want) => {
                let pods = api.node.pods();
                match find(&pods, want) {
                    Ok(p) => json(StatusCode::OK, p),
                    Err(e) => error(StatusCode::NOT_FOUND, e),
                }
            }
            None => error(
                StatusCode::NOT_FOUND,
                format!("no such endpoint {}: {ENDPOINTS}", clip(path, MAX_ECHO)),
            ),
        },
    }
}

fn metrics(api: &Api) -> http::Response<Body> {
    let mut text = String::with_capacity(16 * 1024);
    match prometheus_client::encoding::text::encode(&mut text, &api.registry) {
        Ok(()) => bytes(StatusCode::OK, OPENMETRICS, text),
        Err(_) => {
            api.node.metrics.error("metrics_encode");
            error(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode the metrics")
        }
    }
}
