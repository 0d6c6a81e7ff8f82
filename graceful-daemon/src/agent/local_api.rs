//! The local API, started: its listeners (the loopback address, the
//! metrics address, the unix socket), each with the budget its callers
//! share.

use std::{path::Path, sync::Arc};

use tracing::{error, info, warn};

use super::{tasks::Tasks, Settings};
use crate::{
    metrics::Recorder,
    node::addrs::NodeAddrs,
    node::resolver::watch::Watcher,
    serve::local_api::{
        self,
        node::Node,
        routes::{Api, Scope},
        server::{Budget, ProbeBudget},
    },
    share::{Limits, Shares},
};

/// The local API over the node's view: the metrics registries (the full
/// one, and the one the metrics address serves, per-pod series or not).
pub fn over(node: Node, recorder: &Arc<Recorder>, watcher: &Watcher, metrics_pods: bool) -> Arc<Api> {
    let node = Arc::new(node);
    Arc::new(Api {
        registry: recorder.registry(Arc::<Node>::downgrade(&node), true),
        public_registry: recorder.registry(Arc::<Node>::downgrade(&node), metrics_pods),
        node,
        resolver: watcher.resolver().clone(),
    })
}

/// Where the API's listeners count their connections.
pub struct ApiBudgets {
    /// The loopback address and the unix socket.
    pub local: Budget,
    /// The metrics address.
    pub metrics: Budget,
}

impl ApiBudgets {
    /// From the process's limit on open files.
    pub fn new(node: Option<Arc<NodeAddrs>>, watcher: &Watcher, nofile: u64) -> ApiBudgets {
        ApiBudgets {
            local: Budget::One(Shares::new(Limits::api_for_nofile(nofile))),
            metrics: metrics_budget(node, watcher, nofile),
        }
    }
}

/// The metrics address's budget: the kubelet's probes apart, when the
/// node's sockets can be told apart (its namespace opened); else one
/// public table, by peer.
fn metrics_budget(node: Option<Arc<NodeAddrs>>, watcher: &Watcher, nofile: u64) -> Budget {
    let public = Shares::new(ProbeBudget::PUBLIC.within(Limits::api_for_nofile(nofile)));
    let Some(node) = node else {
        warn!("the node's sockets cannot be looked up: the probes share the metrics address's budget with every peer");
        return Budget::One(public);
    };
    let index = watcher.resolver().shared();
    Budget::Probes(Arc::new(ProbeBudget {
        node,
        owner: Box::new(move |id| crate::sync::read(&index).owner(id)),
        reserved: Shares::new(ProbeBudget::RESERVED),
        public,
    }))
}

/// Binds the local API's listeners. An address that cannot be bound
/// stops the start, naming it: the probes and Prometheus ask that
/// address, and an agent that ran on without it would fail them with
/// nothing in its log a platform engineer would look for (the port taken
/// by another process, an address not on this node); a crash loop with
/// this one line says it. A socket that cannot be bound is one error line
/// and the agent goes on: only the CLI asks it, and falls back to the pins.
pub async fn start(
    tasks: &mut Tasks,
    settings: &Settings,
    socket: &Path,
    api: Arc<Api>,
    budgets: ApiBudgets,
) -> anyhow::Result<()> {
    for (addr, flag, scope, budget) in [
        (&settings.api_addr, "--api-addr", Scope::Full, &budgets.local),
        (
            &settings.metrics_addr,
            "--metrics-addr",
            Scope::Metrics,
            &budgets.metrics,
        ),
    ] {
        if addr == "off" {
            continue;
        }
        let listener = crate::listen::tcp(addr).await.map_err(|e| {
            anyhow::anyhow!("cannot serve the local API on {addr}: {e} (set {flag}, or `off`)")
        })?;
        let bound = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        match scope {
            Scope::Full => info!(addr = %bound, "local API listening"),
            Scope::Metrics => info!(addr = %bound, "metrics and probes listening"),
        }
        tasks.spawn(
            "api tcp",
            local_api::server::serve(listener, api.clone(), scope, budget.clone()),
        );
    }
    match local_api::server::bind_unix(socket) {
        Ok(listener) => {
            info!(socket = %socket.display(), "local API listening");
            tasks.spawn(
                "api socket",
                local_api::server::serve(listener, api, Scope::Full, budgets.local),
            );
        }
        Err(e) => error!("{e:#}; going on without the API socket (the CLI reads the pins instead)"),
    }
    Ok(())
}
