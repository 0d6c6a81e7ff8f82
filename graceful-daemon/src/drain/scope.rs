//! What a drain counts: the cgroups of its subject's pod or container, the
//! directory of the scope's top cgroup (where the ingress program goes),
//! and the containers it must outlive. Looked up in the watcher's index,
//! or by a fresh walk for a container started a moment ago.

use std::{path::PathBuf, sync::RwLock};

use graceful_api::Scope;

use crate::{
    kernel::adopt::netns::NetNs,
    kernel::cgroupfs::Hierarchy,
    node::resolver::index::{Pod, PodIndex},
    sync,
};

/// Who a drain is for: a pod, and the container that asked, if any.
/// Transports identify it (the gate socket from SO_PEERCRED); nothing
/// here believes what a caller says of itself.
pub struct Subject {
    pub pod: String,
    pub container: Option<String>,
    /// The pod's network namespace, for the repair pass before the first
    /// look; `None` when it could not be opened.
    pub netns: Option<NetNs>,
}

/// A drain's cgroups, resolved.
pub struct Target {
    pub cgroups: Vec<u64>,
    /// The scope's top cgroup directory.
    pub dir: Option<PathBuf>,
    /// The cgroup directories of `--after-containers`.
    pub exit_dirs: Vec<PathBuf>,
}

/// Why a drain cannot start: which of the caller's facts is wrong.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The pod or container has no cgroups here.
    #[error("{0}")]
    NotFound(String),
    /// The request names something the pod does not have.
    #[error("{0}")]
    Invalid(String),
}

/// The subject's pod, from the watcher's index, or from a fresh walk for a
/// container started a moment ago that the watcher has not filed yet.
/// The index's lock is released before that walk: the resolver must not
/// wait for it.
pub fn pod_of(index: &RwLock<PodIndex>, hier: &Hierarchy, uid: &str) -> Result<Pod, Refusal> {
    if let Some(p) = sync::read(index).pod(uid) {
        return Ok(p.clone());
    }
    PodIndex::build(hier)
        .pod(uid)
        .cloned()
        .ok_or_else(|| Refusal::NotFound(format!("pod {uid} has no cgroups on this node")))
}

/// The cgroups a drain of `scope` by `who` counts, and the directory of the
/// scope's top cgroup.
pub fn cgroups_of(
    hier: &Hierarchy,
    pod: &Pod,
    who: &Subject,
    scope: Scope,
) -> Result<(Vec<u64>, Option<PathBuf>), Refusal> {
    match scope {
        Scope::Pod => Ok((
            pod.cgroups.iter().copied().collect(),
            pod.path.as_deref().map(|p| hier.dir(p)),
        )),
        Scope::Container => {
            let id = who.container.as_deref().ok_or_else(|| {
                Refusal::NotFound(
                    "--scope container: the caller runs in the pod's own cgroup, not a container's".into(),
                )
            })?;
            let c = pod
                .container(id)
                .ok_or_else(|| Refusal::NotFound(format!("container {id} is not in pod {}", who.pod)))?;
            Ok((c.cgroups.iter().copied().collect(), Some(hier.dir(&c.path))))
        }
    }
}

/// The cgroup directories of the containers named in `--after-containers`:
/// by name (once the Kubernetes API has told them) or by id (a prefix of
/// at least 12 characters, as `crictl ps` shows them).
pub fn after_dirs(
    hier: &Hierarchy,
    pod: &Pod,
    who: &Subject,
    wanted: &[String],
) -> Result<Vec<PathBuf>, Refusal> {
    let mut dirs = Vec::new();
    for w in wanted {
        let found = pod.containers.iter().find(|c| {
            c.name.as_deref() == Some(w.as_str()) || (w.len() >= 12 && c.id.starts_with(w.as_str()))
        });
        match found {
            Some(c) => dirs.push(hier.dir(&c.path)),
            None => {
                return Err(Refusal::Invalid(format!(
                    "--after-containers: no container {w:?} in pod {} (give a container name, or an id of 12+ characters)",
                    who.pod
                )))
            }
        }
    }
    Ok(dirs)
}
