//! What the agent takes from a Pod object.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::{
    api::core::v1::{ContainerStatus, Pod, PodSpec},
    jiff::Timestamp,
};

use crate::node::resolver::index::PodMeta;

/// Which list of the pod spec a container comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerKind {
    /// `spec.containers`.
    App,
    /// `spec.initContainers`, run to completion before the app starts.
    Init,
    /// `spec.initContainers` with `restartPolicy: Always`: a native sidecar,
    /// running beside the app and stopped after it.
    Sidecar,
    /// `spec.ephemeralContainers` (`kubectl debug`).
    Ephemeral,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ContainerInfo {
    pub name: String,
    pub kind: ContainerKind,
    /// The current container's id as the cgroup names it (the status's
    /// `containerd://<id>` without its scheme); `None` before it is created.
    pub id: Option<String>,
    /// The runtime scheme of the id: `containerd`, `cri-o`, `docker`.
    pub runtime: Option<String>,
    /// Ids of earlier instances (`lastState.terminated`), whose cgroups may
    /// still linger for a moment after a restart.
    pub previous_ids: Vec<String>,
    pub running: bool,
}

/// A pod as the API last told it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PodInfo {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub resource_version: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Spec order: init containers (sidecars among them), app containers,
    /// ephemeral containers.
    pub containers: Vec<ContainerInfo>,
    /// When the API will give up waiting for the pod: the time deletion was
    /// requested plus `deletion_grace_period_seconds` (RFC 3339, seconds).
    pub deletion_timestamp: Option<Timestamp>,
    pub deletion_grace_period_seconds: Option<i64>,
    pub termination_grace_period_seconds: Option<i64>,
    pub phase: Option<String>,
    pub node_name: Option<String>,
    /// `spec.hostNetwork`: the pod shares the node's network namespace.
    pub host_network: bool,
    /// Every container's declared ports (`containerPort`, any protocol):
    /// (container name, port).
    pub container_ports: Vec<(String, u16)>,
    /// The `preStop: httpGet` hooks the spec declares (Istio's rewritten
    /// ones as pilot-agent sends them).
    pub http_hooks: Vec<super::hooks::SpecHook>,
    /// The pod carries anything of graceful's ([`super::adoption`]).
    pub opted_in: bool,
    /// Its controller, `kind/name` ([`super::adoption::workload`]).
    pub workload: String,
}

/// Splits `containerd://<id>` into (`containerd`, `<id>`). An id without a
/// scheme is taken as is.
pub fn split_container_id(raw: &str) -> Option<(Option<&str>, &str)> {
    let (scheme, id) = match raw.split_once("://") {
        Some((s, id)) => (Some(s), id),
        None => (None, raw),
    };
    (!id.is_empty()).then_some((scheme, id))
}

impl PodInfo {
    /// `None` for an object without uid, namespace or name (not a real pod).
    pub fn from_pod(pod: &Pod) -> Option<PodInfo> {
        let md = &pod.metadata;
        let uid = md.uid.clone().filter(|u| !u.is_empty())?;
        let name = md.name.clone().filter(|n| !n.is_empty())?;
        let namespace = md.namespace.clone().unwrap_or_else(|| "default".into());
        let spec = pod.spec.as_ref();
        let status = pod.status.as_ref();
        fn statuses(s: Option<&Vec<ContainerStatus>>) -> &[ContainerStatus] {
            s.map(Vec::as_slice).unwrap_or(&[])
        }

        let mut containers = Vec::new();
        let mut add = |name: &str, kind: ContainerKind, statuses: &[ContainerStatus]| {
            let st = statuses.iter().find(|s| s.name == name);
            containers.push(container(name, kind, st));
        };
        if let Some(spec) = spec {
            let init_st = statuses(status.and_then(|s| s.init_container_statuses.as_ref()));
            for c in spec.init_containers.iter().flatten() {
                let kind = if c.restart_policy.as_deref() == Some("Always") {
                    ContainerKind::Sidecar
                } else {
                    ContainerKind::Init
                };
                add(&c.name, kind, init_st);
            }
            let app_st = statuses(status.and_then(|s| s.container_statuses.as_ref()));
            for c in &spec.containers {
                add(&c.name, ContainerKind::App, app_st);
            }
            let eph_st = statuses(status.and_then(|s| s.ephemeral_container_statuses.as_ref()));
            for c in spec.ephemeral_containers.iter().flatten() {
                add(&c.name, ContainerKind::Ephemeral, eph_st);
            }
        }
        Some(PodInfo {
            uid,
            namespace,
            name,
            resource_version: md.resource_version.clone(),
            labels: md.labels.clone().unwrap_or_default(),
            annotations: md.annotations.clone().unwrap_or_default(),
            containers,
            deletion_timestamp: md.deletion_timestamp.as_ref().map(|t| t.0),
            deletion_grace_period_seconds: md.deletion_grace_period_seconds,
            termination_grace_period_seconds: spec.and_then(|s| s.termination_grace_period_seconds),
            phase: status.and_then(|s| s.phase.clone()),
            node_name: spec.and_then(|s| s.node_name.clone()),
            host_network: spec.and_then(|s| s.host_network).unwrap_or(false),
            container_ports: spec.map(declared_ports).unwrap_or_default(),
            http_hooks: spec.map(super::hooks::of).unwrap_or_default(),
            opted_in: super::adoption::opted_in(md, spec),
            workload: super::adoption::workload(md),
        })
    }

    /// What the cgroup index shows: names, and every container id known
    /// (current and previous instances) → its container's name.
    pub fn meta(&self) -> PodMeta {
        let mut containers = HashMap::new();
        for c in &self.containers {
            for id in c.id.iter().chain(&c.previous_ids) {
                containers.insert(id.clone(), c.name.clone());
            }
        }
        PodMeta {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            containers,
        }
    }

    /// When deletion was requested, by the API's clock:
    /// `deletionTimestamp - deletionGracePeriodSeconds`. Whole seconds: the
    /// API serializes timestamps without fractions.
    pub fn deletion_requested_at(&self) -> Option<Timestamp> {
        let at = self.deletion_timestamp?;
        let grace = self.deletion_grace_period_seconds.unwrap_or(0).max(0);
        Some(
            at.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(grace))
                .unwrap_or(at),
        )
    }

    /// The grace period the kubelet enforces: the deletion's own once
    /// deleted (`kubectl delete --grace-period`), else the spec's.
    pub fn grace_period_seconds(&self) -> Option<i64> {
        self.deletion_grace_period_seconds
            .or(self.termination_grace_period_seconds)
    }

    pub fn terminating(&self) -> bool {
        self.deletion_timestamp.is_some()
    }

    /// Succeeded or Failed: nothing runs any more.
    pub fn finished(&self) -> bool {
        matches!(self.phase.as_deref(), Some("Succeeded" | "Failed"))
    }

    /// The container whose current or previous instance has this id.
    pub fn container_by_id(&self, id: &str) -> Option<&ContainerInfo> {
        self.containers
            .iter()
            .find(|c| c.id.as_deref() == Some(id) || c.previous_ids.iter().any(|p| p == id))
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// What an Event on the pod names.
    pub fn pod_ref(&self) -> super::PodRef {
        super::PodRef {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            workload: Some(self.workload.clone()),
        }
    }
}

/// The ports the pod spec declares, container by container (init and
/// sidecar containers too: a sidecar's port is as taken as the app's).
fn declared_ports(spec: &PodSpec) -> Vec<(String, u16)> {
    let init = spec.init_containers.iter().flatten();
    let mut out = Vec::new();
    for c in init.chain(&spec.containers) {
        for p in c.ports.iter().flatten() {
            if let Ok(port) = u16::try_from(p.container_port) {
                out.push((c.name.clone(), port));
            }
        }
    }
    out
}

fn container(name: &str, kind: ContainerKind, st: Option<&ContainerStatus>) -> ContainerInfo {
    let current = st
        .and_then(|s| s.container_id.as_deref())
        .and_then(split_container_id);
    let previous_ids = st
        .and_then(|s| s.last_state.as_ref())
        .and_then(|l| l.terminated.as_ref())
        .and_then(|t| t.container_id.as_deref())
        .and_then(split_container_id)
        .map(|(_, id)| id.to_string())
        .filter(|id| Some(id.as_str()) != current.map(|(_, c)| c))
        .into_iter()
        .collect();
    ContainerInfo {
        name: name.to_string(),
        kind,
        id: current.map(|(_, id)| id.to_string()),
        runtime: current.and_then(|(s, _)| s.map(str::to_string)),
        previous_ids,
        running: st
            .and_then(|s| s.state.as_ref())
            .is_some_and(|s| s.running.is_some()),
    }
}

#[cfg(test)]
mod tests;
