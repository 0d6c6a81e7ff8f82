//! `/v1/pods` (and `graceful pods`): live connections per pod and per
//! container, the pod's state, and the tables `graceful pods`, `graceful
//! pod` and `kubectl graceful pods` print.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::table::{dash, n, table};
use crate::is_zero;

/// Kubernetes QoS class, read from the kubepods sub-hierarchy the pod sits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// Container runtime, read from the prefix of the container cgroup name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Runtime {
    #[serde(rename = "containerd")]
    Containerd,
    #[serde(rename = "cri-o")]
    CriO,
    #[serde(rename = "docker")]
    Docker,
    /// No prefix (cgroupfs containerd/docker use bare ids) or one we don't know.
    #[serde(rename = "unknown")]
    Unknown,
}

/// Which kubelet cgroup driver produced the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    Systemd,
    Cgroupfs,
}

impl QosClass {
    pub const fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "guaranteed",
            QosClass::Burstable => "burstable",
            QosClass::BestEffort => "besteffort",
        }
    }
}

impl Runtime {
    pub const fn as_str(self) -> &'static str {
        match self {
            Runtime::Containerd => "containerd",
            Runtime::CriO => "cri-o",
            Runtime::Docker => "docker",
            Runtime::Unknown => "unknown",
        }
    }
}

impl Driver {
    pub const fn as_str(self) -> &'static str {
        match self {
            Driver::Systemd => "systemd",
            Driver::Cgroupfs => "cgroupfs",
        }
    }
}

impl fmt::Display for QosClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inbound_ignored: u64,
}

impl Live {
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
    /// What no container holds: the pod cgroup itself and pod overhead.
    pub fn outside_containers(&self) -> Live {
        self.containers.iter().fold(self.live, |acc, c| acc.minus(c.live))
    }
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

pub fn pods_table(pods: &[PodView], wide: bool) -> String {
    let mut out = table(&pods_rows(pods, wide));
    out.push_str(&warnings(pods));
    out
}

/// The table's rows, its head first (`kubectl graceful pods` adds a NODE
/// column in front).
pub fn pods_rows(pods: &[PodView], wide: bool) -> Vec<Vec<String>> {
    let mut head = vec!["NAMESPACE", "POD"];
    if wide {
        head.extend(["UID", "QOS"]);
    }
    head.extend(["CONTAINERS", "INBOUND"]);
    if wide {
        head.push("IGNORED");
    }
    head.extend(["OUTBOUND", "LISTEN", "STATE"]);
    if wide {
        head.extend(["CGROUP", "PATH"]);
    }
    let mut rows = vec![head.into_iter().map(String::from).collect::<Vec<_>>()];
    for p in pods {
        let mut r = vec![
            dash(&p.namespace),
            p.name.clone().unwrap_or_else(|| p.uid.clone()),
        ];
        if wide {
            r.extend([p.uid.clone(), p.qos.to_string()]);
        }
        r.extend([p.containers.len().to_string(), n(p.live.inbound_live)]);
        if wide {
            r.push(ignored(p.live));
        }
        r.extend([n(p.live.outbound_live), n(p.live.listeners), state(p)]);
        if wide {
            r.extend([p.cgroup_id.map_or("-".into(), |c| c.to_string()), dash(&p.path)]);
        }
        rows.push(r);
    }
    rows
}

/// A `warning:` line for each pod whose gate a mesh would cut.
pub fn warnings(pods: &[PodView]) -> String {
    let mut out = String::new();
    for p in pods {
        if let Some(w) = &p.gate_warning {
            out.push_str(&format!(
                "\nwarning: {}/{}: {w}",
                dash(&p.namespace),
                p.name.as_deref().unwrap_or(&p.uid)
            ));
        }
    }
    out
}

/// IGNORED: a dash for none, as most pods have.
fn ignored(l: Live) -> String {
    match l.inbound_ignored {
        0 => "-".into(),
        v => n(v),
    }
}

/// The inbound count, with the part left out when there is one.
fn inbound(l: Live) -> String {
    match l.inbound_ignored {
        0 => format!("{} inbound", n(l.inbound_live)),
        v => format!(
            "{} inbound ({} left out by the drain's exclusions)",
            n(l.inbound_live),
            n(v)
        ),
    }
}

/// STATE, with the time since deletion for a terminating pod.
fn state(p: &PodView) -> String {
    match p.since_deletion_s {
        Some(s) => format!("{} ({s:.1}s)", p.state.as_str()),
        None => p.state.as_str().to_string(),
    }
}

/// `graceful pod`: the pod, then container by container. The `(pod)` row
/// is what no container holds: the pod cgroup itself (a pause process or
/// anything placed directly in it) and pod overhead such as CRI-O's conmon.
pub fn pod_detail(p: &PodView) -> String {
    let mut out = String::new();
    let l = p.live;
    for (k, v) in [
        ("UID", p.uid.clone()),
        ("Namespace", dash(&p.namespace)),
        ("Name", dash(&p.name)),
        ("QoS", p.qos.to_string()),
        ("State", state(p)),
        (
            "Cgroup",
            format!(
                "{} {}",
                p.cgroup_id.map_or("-".into(), |c| c.to_string()),
                dash(&p.path)
            ),
        ),
        (
            "Connections",
            format!(
                "{}, {} outbound, {} listening",
                inbound(l),
                n(l.outbound_live),
                n(l.listeners)
            ),
        ),
    ] {
        out.push_str(&format!("{:<13}{v}\n", format!("{k}:")));
    }
    out.push('\n');
    let head = [
        "CONTAINER",
        "NAME",
        "RUNTIME",
        "CGROUP",
        "INBOUND",
        "OUTBOUND",
        "LISTEN",
        "PATH",
    ];
    let mut rows = vec![head.map(String::from).to_vec()];
    let row = |id: String, name: String, rt: String, cg: String, l: Live, path: String| {
        vec![
            id,
            name,
            rt,
            cg,
            n(l.inbound_live),
            n(l.outbound_live),
            n(l.listeners),
            path,
        ]
    };
    if p.cgroup_id.is_some() || p.outside_containers() != Live::default() {
        rows.push(row(
            "(pod)".into(),
            "-".into(),
            "-".into(),
            p.cgroup_id.map_or("-".into(), |c| c.to_string()),
            p.outside_containers(),
            dash(&p.path),
        ));
    }
    for c in &p.containers {
        rows.push(row(
            c.id.chars().take(12).collect(),
            dash(&c.name),
            c.runtime.to_string(),
            c.cgroup_id.to_string(),
            c.live,
            c.path.clone(),
        ));
    }
    out.push_str(&table(&rows));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests;
