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

use serde::{Deserialize, Serialize};

pub use crate::drain::report::DrainReport;
pub use crate::serve::reply::ErrorBody;
pub use graceful_api::{Accepted, DrainRequest, Scope, MAX_BODY};

/// One line of the drain stream.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line {
    /// First: the settings in effect.
    Accepted(Box<Accepted>),
    Progress {
        ms: u64,
        inbound: u64,
    },
    Report(Box<DrainReport>),
}

/// The caller, as `GET /v1/self` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SelfView {
    pub pod: String,
    pub container: Option<String>,
    pub pod_cgroups: Vec<u64>,
    pub inbound_live: u64,
    pub outbound_live: u64,
    pub listeners: u64,
}
