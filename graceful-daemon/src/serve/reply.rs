//! HTTP responses shared by the gate socket and the local API: JSON bodies
//! ending in a newline, errors as one line `{"error": "..."}`, NDJSON
//! streams.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde::Serialize;
use tokio_stream::{wrappers::ReceiverStream, StreamExt as _};

pub type Body = BoxBody<Bytes, Infallible>;

/// Every error body: one line a person can act on.
pub use graceful_api::drain::ErrorBody;

/// `v` as one JSON line.
pub fn line_bytes<T: Serialize>(v: &T) -> Bytes {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

pub fn json<T: Serialize>(status: StatusCode, body: &T) -> Response<Body> {
    bytes(status, "application/json", line_bytes(body))
}

pub fn error(status: StatusCode, msg: impl Into<String>) -> Response<Body> {
    json(status, &ErrorBody { error: msg.into() })
}

pub fn bytes(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()).boxed())
        .expect("static response parts")
}

/// A 200 whose body is the lines sent on `rx`, as they come; it ends when
/// every sender is dropped.
pub fn ndjson(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Response<Body> {
    let stream = ReceiverStream::new(rx).map(|b| Ok::<_, Infallible>(Frame::data(b)));
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/x-ndjson")
        .header("cache-control", "no-store")
        .body(BodyExt::boxed(StreamBody::new(stream)))
        .expect("static response parts")
}
