//! A pod's live counts: the sum over all its cgroups (its own, where the
//! pause process or anything placed directly in the pod runs; its
//! containers'; pod overhead such as CRI-O's conmon), and each container's
//! over its own cgroups, as the views the local API serves (their types
//! and tables are the contract's: [`graceful_api::views::pods`]).

use std::collections::BTreeMap;

pub use graceful_api::views::pods::{sort_pods, ContainerView, Live, PodState, PodView};
use graceful_api::{clip, MAX_ECHO};
use graceful_common::CgroupCounters;

use super::{
    index::{Container, Pod, PodIndex},
    path::canonical_uid,
};

/// The sum over the cgroups `ids`; a cgroup with no entry (no socket
/// ever) counts zero. Wrapping, like the kernel's counters: a sum is
/// read from several map entries at slightly different times, and must
/// not panic in debug builds if one of them reads transiently low.
fn live_sum<'a>(ids: impl IntoIterator<Item = &'a u64>, counters: &BTreeMap<u64, CgroupCounters>) -> Live {
    ids.into_iter()
        .filter_map(|id| counters.get(id))
        .fold(Live::default(), |acc, c| Live {
            inbound_live: acc.inbound_live.wrapping_add(c.inbound_live),
            outbound_live: acc.outbound_live.wrapping_add(c.outbound_live),
            listeners: acc.listeners.wrapping_add(c.listeners),
            inbound_ignored: acc.inbound_ignored.wrapping_add(c.inbound_ignored_live),
        })
}

/// One pod of the index with its counts.
fn pod_view(pod: &Pod, counters: &BTreeMap<u64, CgroupCounters>) -> PodView {
    PodView {
        uid: pod.uid.clone(),
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        qos: pod.qos,
        state: PodState::Running,
        since_deletion_s: None,
        live: live_sum(&pod.cgroups, counters),
        containers: pod
            .containers
            .iter()
            .map(|c| container_view(c, counters))
            .collect(),
        driver: pod.driver,
        cgroup_id: pod.cgroup_id,
        path: pod.path.clone(),
        gate_warning: None,
    }
}

fn container_view(c: &Container, counters: &BTreeMap<u64, CgroupCounters>) -> ContainerView {
    ContainerView {
        id: c.id.clone(),
        name: c.name.clone(),
        runtime: c.runtime,
        cgroup_id: c.cgroup_id,
        path: c.path.clone(),
        live: live_sum(&c.cgroups, counters),
    }
}

/// Every pod of the index with its counts, in uid order.
pub fn views(index: &PodIndex, counters: &BTreeMap<u64, CgroupCounters>) -> Vec<PodView> {
    index.pods().map(|p| pod_view(p, counters)).collect()
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
