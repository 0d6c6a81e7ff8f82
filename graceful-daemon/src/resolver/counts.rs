//! A pod's live counts: the sum over all its cgroups (its own, where the
//! pause process or anything placed directly in the pod runs; its
//! containers'; pod overhead such as CRI-O's conmon), and each container's
//! over its own cgroups. Also the rows `graceful pods` prints and the
//! daemon's API will serve.

use std::collections::BTreeMap;

use graceful_api::{clip, MAX_ECHO};
use graceful_common::CgroupCounters;
use serde::{Deserialize, Serialize};

use super::{
    index::{Container, Pod, PodIndex},
    path::{canonical_uid, Driver, QosClass, Runtime},
};

/// Live figures of one cgroup or a sum of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Live {
    pub inbound_live: u64,
    pub outbound_live: u64,
    pub listeners: u64,
    /// Of `inbound_live`, those a drain's exclusions (`ignore-ports`,
    /// `ignore-peers`) leave out: matched as they opened while the pod
    /// drained, and counted until they close. Absent when zero, so JSON
    /// from before it reads the same.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub inbound_ignored: u64,
}

impl Live {
    /// The sum over the cgroups `ids`; a cgroup with no entry (no socket
    /// ever) counts zero. Wrapping, like the kernel's counters: a sum is
    /// read from several map entries at slightly different times, and must
    /// not panic in debug builds if one of them reads transiently low.
    pub fn sum<'a>(ids: impl IntoIterator<Item = &'a u64>, counters: &BTreeMap<u64, CgroupCounters>) -> Live {
        ids.into_iter()
            .filter_map(|id| counters.get(id))
            .fold(Live::default(), |acc, c| Live {
                inbound_live: acc.inbound_live.wrapping_add(c.inbound_live),
                outbound_live: acc.outbound_live.wrapping_add(c.outbound_live),
                listeners: acc.listeners.wrapping_add(c.listeners),
                inbound_ignored: acc.inbound_ignored.wrapping_add(c.inbound_ignored_live),
            })
    }

    pub fn minus(self, o: Live) -> Live {
        Live {
            inbound_live: self.inbound_live.wrapping_sub(o.inbound_live),
            outbound_live: self.outbound_live.wrapping_sub(o.outbound_live),
            listeners: self.listeners.wrapping_sub(o.listeners),
            inbound_ignored: self.inbound_ignored.wrapping_sub(o.inbound_ignored),
        }
    }
}

/// What `graceful pods` shows in STATE. Only `Running` comes from the
/// cgroup tree; `Terminating` needs the API's deletionTimestamp and
/// `Draining` the drain engine, which set it on the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PodState {
    Running,
    Terminating,
    Draining,
}

impl PodState {
    pub const fn as_str(self) -> &'static str {
        match self {
            PodState::Running => "Running",
            PodState::Terminating => "Terminating",
            PodState::Draining => "Draining",
        }
    }
}

/// One pod in `graceful pods -o json` (and the API). The names of the
/// fields are a contract; `namespace` and `name` are null while unknown.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PodView {
    pub uid: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub qos: QosClass,
    pub state: PodState,
    /// Seconds since the pod's deletion was requested, once the API has
    /// told it (Terminating or Draining); null otherwise.
    #[serde(default)]
    pub since_deletion_s: Option<f64>,
    #[serde(flatten)]
    pub live: Live,
    pub containers: Vec<ContainerView>,
    pub driver: Driver,
    /// The pod-level cgroup, null when the layout has none.
    pub cgroup_id: Option<u64>,
    pub path: Option<String>,
    /// What stands between the kubelet's hook and the pod's httpGet gate
    /// (its mesh's classic sidecar proxy), once the API has told it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_warning: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ContainerView {
    pub id: String,
    pub name: Option<String>,
    pub runtime: Runtime,
    pub cgroup_id: u64,
    pub path: String,
    #[serde(flatten)]
    pub live: Live,
}

impl PodView {
    pub fn new(pod: &Pod, counters: &BTreeMap<u64, CgroupCounters>) -> Self {
        PodView {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            qos: pod.qos,
            state: PodState::Running,
            since_deletion_s: None,
            live: Live::sum(&pod.cgroups, counters),
            containers: pod
                .containers
                .iter()
                .map(|c| ContainerView::new(c, counters))
                .collect(),
            driver: pod.driver,
            cgroup_id: pod.cgroup_id,
            path: pod.path.clone(),
            gate_warning: None,
        }
    }

    /// What no container holds: the pod cgroup itself and pod overhead.
    pub fn outside_containers(&self) -> Live {
        self.containers.iter().fold(self.live, |acc, c| acc.minus(c.live))
    }
}

impl ContainerView {
    pub fn new(c: &Container, counters: &BTreeMap<u64, CgroupCounters>) -> Self {
        ContainerView {
            id: c.id.clone(),
            name: c.name.clone(),
            runtime: c.runtime,
            cgroup_id: c.cgroup_id,
            path: c.path.clone(),
            live: Live::sum(&c.cgroups, counters),
        }
    }
}

/// Every pod of the index with its counts, in uid order.
pub fn views(index: &PodIndex, counters: &BTreeMap<u64, CgroupCounters>) -> Vec<PodView> {
    index.pods().map(|p| PodView::new(p, counters)).collect()
}

/// Named pods first, by namespace and name; then unnamed ones, by uid.
pub fn sort_pods(pods: &mut [PodView]) {
    pods.sort_by(|a, b| {
        (a.namespace.is_none(), &a.namespace, &a.name, &a.uid).cmp(&(
            b.namespace.is_none(),
            &b.namespace,
            &b.name,
            &b.uid,
        ))
    });
}

/// The pod `want` names: a uid, a unique uid prefix (cgroup spelling with
/// `_` is fine), or namespace/name. Errors are one line.
pub fn find<'a>(pods: &'a [PodView], want: &str) -> Result<&'a PodView, String> {
    // The caller's value, as the messages quote it.
    let said = |w: &str| clip(w, MAX_ECHO);
    if let Some((ns, name)) = want.split_once('/') {
        return pods
            .iter()
            .find(|p| p.namespace.as_deref() == Some(ns) && p.name.as_deref() == Some(name))
            .ok_or_else(|| {
                format!(
                    "no pod {} on this node (names need the Kubernetes API: give the pod's uid instead)",
                    said(want)
                )
            });
    }
    let want = canonical_uid(want).unwrap_or_else(|| want.to_ascii_lowercase().replace('_', "-"));
    let matches: Vec<_> = pods.iter().filter(|p| p.uid.starts_with(&want)).collect();
    match matches[..] {
        [one] => Ok(one),
        [] => Err(format!(
            "no pod with uid {} on this node ({} pods: see `graceful pods`)",
            said(&want),
            pods.len()
        )),
        _ if want.is_empty() => Err("give a pod uid or namespace/name".into()),
        _ => Err(format!(
            "{} pods have a uid starting with {}: give more of it",
            matches.len(),
            said(&want)
        )),
    }
}

#[cfg(test)]
mod tests;
