//! The agent pods: the DaemonSet's pods in their namespace, one per node,
//! by the labels deploy/base and the chart give them.

use k8s_openapi::api::core::v1::Pod;
use kube::{api::ListParams, Api};

/// The selector of the agent's pods (deploy/base, deploy/helm).
pub const SELECTOR: &str = "app.kubernetes.io/name=graceful,app.kubernetes.io/component=agent";

/// A kube error as one line: the API server's message where there is one.
pub fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.reason),
        other => other.to_string(),
    }
}

/// One node's agent.
pub struct Agent {
    pub node: String,
    pub pod: String,
    /// Why it cannot be asked (not running, being deleted), if so.
    pub unavailable: Option<String>,
}

/// The agents, by node name; `node` alone if given (an error if it has none).
pub async fn list(pods: &Api<Pod>, namespace: &str, node: Option<&str>) -> anyhow::Result<Vec<Agent>> {
    let mut lp = ListParams::default().labels(SELECTOR);
    if let Some(n) = node {
        lp = lp.fields(&format!("spec.nodeName={n}"));
    }
    let list = pods.list(&lp).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot list the agent pods in {namespace}: {} (needs `list` on pods there)",
            said(&e)
        )
    })?;
    let mut agents: Vec<Agent> = list
        .items
        .into_iter()
        .filter_map(|p| {
            let name = p.metadata.name.clone()?;
            let node = p.spec.as_ref()?.node_name.clone().unwrap_or_default();
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            let unavailable = if p.metadata.deletion_timestamp.is_some() {
                Some("being deleted".to_string())
            } else if phase != "Running" {
                Some(format!(
                    "{} (not running)",
                    if phase.is_empty() { "Pending" } else { &phase }
                ))
            } else {
                None
            };
            Some(Agent {
                node,
                pod: name,
                unavailable,
            })
        })
        .collect();
    // During a handover two agents run on a node: the one being deleted
    // has retired; ask the other.
    agents.sort_by(|a, b| (&a.node, a.unavailable.is_some()).cmp(&(&b.node, b.unavailable.is_some())));
    agents.dedup_by(|later, first| later.node == first.node && later.unavailable.is_some());
    if agents.is_empty() {
        match node {
            Some(n) => anyhow::bail!("no graceful agent on node {n} (pods labelled {SELECTOR} in {namespace})"),
            None => anyhow::bail!("no graceful agent in {namespace} (pods labelled {SELECTOR}): is graceful installed, and is --agent-namespace right?"),
        }
    }
    Ok(agents)
}
