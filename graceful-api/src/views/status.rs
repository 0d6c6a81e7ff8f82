//! `/readyz`: whether the agent is ready, and what that rests on; 200
//! with it when `ready`, else 503. The
//! field names and the values' spellings are a contract (probes, scripts
//! and dashboards read them).

use serde::{Deserialize, Serialize};

/// The kernel side: the programs attached and their pinned maps readable.
#[derive(PartialEq, Eq, Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Programs {
    Attached,
    /// Attached, but the pinned maps could not be read just now.
    Unreadable,
}

/// The agent's link to the Kubernetes API. Not a condition of readiness:
/// counts and drains work without it.
#[derive(PartialEq, Eq, Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KubeApi {
    Connected,
    Connecting,
    Lost,
    /// No API configured (`graceful daemon` outside a cluster).
    Standalone,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub ready: bool,
    pub programs: Programs,
    /// Pods the agent knows on this node.
    pub pods: usize,
    pub kube_api: KubeApi,
    /// The agent's version.
    pub version: String,
}

#[cfg(test)]
mod tests;
