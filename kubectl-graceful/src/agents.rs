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
    /// Its local API's port on the pod's loopback (see [`api_port`]).
    pub api_port: u16,
    /// Why it cannot be asked (not running, being deleted, its API off), if so.
    pub unavailable: Option<String>,
}

/// The container that runs the agent (deploy/base, deploy/helm).
const CONTAINER: &str = "agent";

/// The port of the agent's local API in `pod`, as its own container says:
/// `--api-addr` (the chart's `ports.api`), then `GRACEFUL_API_ADDR`, then
/// the agent's default. One line if the API is off or names no port.
pub fn api_port(pod: &Pod) -> Result<u16, String> {
    let Some(c) = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == CONTAINER))
    else {
        return Ok(graceful_api::POD_API_PORT);
    };
    let args = c.args.as_deref().unwrap_or_default();
    let flag = args
        .iter()
        .enumerate()
        .find_map(|(i, a)| match a.strip_prefix("--api-addr") {
            Some("") => args.get(i + 1).cloned(),
            Some(v) => v.strip_prefix('=').map(str::to_string),
            None => None,
        });
    let env = || {
        c.env
            .as_deref()?
            .iter()
            .find(|e| e.name == "GRACEFUL_API_ADDR")?
            .value
            .clone()
    };
    match flag.or_else(env).as_deref() {
        None => Ok(graceful_api::POD_API_PORT),
        Some("off") => Err("its local API is off (--api-addr off)".into()),
        Some(v) => v
            .parse::<std::net::SocketAddr>()
            .map(|a| a.port())
            .ok()
            .or_else(|| v.strip_prefix(':')?.parse().ok())
            .ok_or_else(|| format!("its --api-addr {v:?} names no port")),
    }
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
            let api_port = api_port(&p);
            let unavailable = if p.metadata.deletion_timestamp.is_some() {
                Some("being deleted".to_string())
            } else if let Err(why) = &api_port {
                Some(why.clone())
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
                api_port: api_port.unwrap_or(graceful_api::POD_API_PORT),
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

#[cfg(test)]
mod tests;
