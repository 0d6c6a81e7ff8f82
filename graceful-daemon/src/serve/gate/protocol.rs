//! What the gate socket accepts and answers. HTTP/1.1 with JSON bodies, so
//! `curl --unix-socket /graceful/gate.sock` works for debugging.
//!
//! - `POST /v1/drain` with a [`DrainRequest`]: drains the *caller's* pod
//!   or container and streams NDJSON lines: `{"type":"accepted",...}`,
//!   `{"type":"progress",...}`, then one `{"type":"report",...}`.
//! - `GET /v1/self`: the caller's pod, container and counts.
//!
//! The caller is who SO_PEERCRED says it is; there is no way to name
//! another pod.

pub use graceful_api::{
    drain::{DrainReport, ErrorBody, Line, SelfView},
    Accepted, DrainRequest, Scope, MAX_BODY,
};
