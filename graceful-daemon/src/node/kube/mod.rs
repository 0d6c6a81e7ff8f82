//! The Kubernetes API side of the agent: names for the pods the cgroup tree
//! shows, their deletion, and Events on them.
//!
//! - [`config`]: where the API is (`--kubeconfig`, `$KUBECONFIG`, in-cluster,
//!   `~/.kube/config`) and which node this is (`--node-name`, `NODE_NAME`);
//! - [`pod`]: what the agent takes from a Pod object ([`PodInfo`]);
//! - [`watch`]: list+watch of this node's pods, feeding
//!   [`PodIndex::set_meta`](crate::node::resolver::index::PodIndex::set_meta) and a
//!   richer [`PodStore`];
//! - [`events`]: posting core/v1 Events on pods;
//! - [`adoption`]: whether a pod opted in, and the workload it belongs to;
//! - [`report_scope`]: which terminating pods are reported (those that
//!   opted in, and those `--report-namespaces`/`--report-selector` name);
//! - [`hooks`]: the `preStop: httpGet` hooks a pod's spec declares;
//! - [`error`]: an API error and its causes on one line, for both;
//!
//! Nothing here can stop the agent: without a config it runs standalone,
//! and while the API is unreachable everything else keeps working, pods are
//! shown by uid (or by the names last seen) and the watch retries with
//! backoff.
//!
//! The RBAC the agent needs (a ClusterRole bound to its ServiceAccount):
//!
//! ```yaml
//! rules:
//!   - apiGroups: [""]
//!     resources: ["pods"]
//!     verbs: ["get", "list", "watch"]
//!   - apiGroups: [""]
//!     resources: ["events"]
//!     verbs: ["create", "patch"]
//! ```
//!
//! `get` is not used today; it is listed for `kubectl auth can-i` parity
//! with list/watch. Events are core/v1 (`""`), not `events.k8s.io`.

use std::sync::{Arc, RwLock};

use tokio::task::JoinHandle;

use crate::node::resolver::index::PodIndex;

pub mod adoption;
pub mod config;
pub mod error;
pub mod events;
pub mod hooks;
pub mod mesh;
pub mod pod;
pub mod report_scope;
pub mod watch;

pub use config::{KubeArgs, Source};
pub use events::{EventPoster, PodRef};
pub use pod::{ContainerInfo, ContainerKind, PodInfo};
pub use watch::{ApiState, PodEvent, PodStore, PodWatch, WatchOptions};

/// Everything the agent runs against the API, stopped on drop.
pub struct Kube {
    pub store: Arc<PodStore>,
    pub events: EventPoster,
    watch: JoinHandle<()>,
}

impl Kube {
    /// Starts the pod watch (feeding `index`). `None` in standalone mode:
    /// no config, or `--standalone`. Never fails: an API that cannot be
    /// reached is retried in the background.
    pub async fn start(args: &KubeArgs, index: Arc<RwLock<PodIndex>>) -> Option<Kube> {
        let source = config::resolve(args)?;
        let node = config::node_name(args);
        let opts = WatchOptions::new(source, node);
        Some(Self::start_with(opts, index))
    }

    /// [`start`](Self::start) with the options spelled out (tests: a short
    /// backoff, a kubeconfig of their own).
    pub fn start_with(opts: WatchOptions, index: Arc<RwLock<PodIndex>>) -> Kube {
        let (watch, store, events) = PodWatch::new(opts, index);
        let watch = tokio::spawn(watch.run());
        Kube { store, events, watch }
    }
}

impl Drop for Kube {
    fn drop(&mut self) {
        self.watch.abort();
    }
}
