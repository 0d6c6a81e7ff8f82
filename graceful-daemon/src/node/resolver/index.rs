//! The pods on this node as the cgroup tree shows them: pod uid → pod
//! cgroup and container cgroups, and every cgroup id → its owner.
//!
//! The index is built from one walk of the cgroup2 mount and then kept
//! current one cgroup at a time ([`PodIndex::insert`] / [`PodIndex::remove`],
//! driven by the watcher). Each cgroup is classified from its own path (and
//! its parent's) with [`parse_rooted`]: a pod's only where the kubelet makes
//! pods, under the pod cgroup roots ([`super::roots`]; nested roots, such as
//! a kind node seen from its host, are named there). Cgroups that are not a
//! pod's are kept with their path only, so any id can be reported.
//!
//! Names come from the Kubernetes API, later and possibly never: they are
//! `Option`s here, filled from [`PodMeta`] given to [`PodIndex::set_meta`].

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    io,
    os::unix::ffi::OsStrExt,
    path::Path,
    sync::Arc,
};

use super::{
    path::{parse, parse_rooted, Driver, PodCgroup, QosClass, Runtime},
    tree,
};
use crate::kernel::cgroupfs::{roots::PodRoots, Hierarchy};

/// A container of a pod: the pause/sandbox container is one like any other
/// (the cgroup tree cannot tell them apart; the API can).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    pub id: String,
    /// From the API (`status.containerStatuses`); `None` until known.
    pub name: Option<String>,
    pub runtime: Runtime,
    /// The container's own cgroup (`cri-containerd-<id>.scope`, `<id>`, ...).
    pub cgroup_id: u64,
    /// Its path relative to the cgroup2 mount.
    pub path: String,
    /// Every cgroup that is this container's: its own, and any below it
    /// (CRI-O's nested `container` child, cgroups a container made for
    /// itself). Its sockets may be counted to any of them.
    pub cgroups: BTreeSet<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    /// Canonical: lowercase with dashes (32 hex for static pods).
    pub uid: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub qos: QosClass,
    pub driver: Driver,
    /// The pod-level cgroup. `None` when there is none: runc's literal
    /// `pod.slice:prefix:id` form puts containers straight under the runtime.
    pub cgroup_id: Option<u64>,
    pub path: Option<String>,
    /// Sorted by id.
    pub containers: Vec<Container>,
    /// Every cgroup of the pod: its own (where anything placed directly in
    /// the pod runs), its containers' and pod overhead (CRI-O's conmon). A
    /// pod's counts are the sum over these.
    pub cgroups: BTreeSet<u64>,
}

impl Pod {
    pub fn container(&self, id: &str) -> Option<&Container> {
        self.containers
            .binary_search_by(|c| c.id.as_str().cmp(id))
            .ok()
            .map(|i| &self.containers[i])
    }
}

/// Whose a cgroup is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A pod's: its own cgroup or overhead (`container: None`), or a container's.
    Pod { uid: String, container: Option<String> },
    /// Not a pod's (system services, the agent itself): reported by path.
    Other { path: String },
}

/// What an insert, a removal or a rescan changed, in the order it happened:
/// a pod is added before its containers and removed after them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    PodAdded { uid: String },
    PodRemoved { uid: String },
    ContainerAdded { uid: String, id: String },
    ContainerRemoved { uid: String, id: String },
}

/// Names from the Kubernetes API for one pod uid. Kept apart from the
/// cgroups so they survive rescans and can arrive before the pod's cgroup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodMeta {
    pub namespace: String,
    pub name: String,
    /// Container id (as in the cgroup name) → container name.
    pub containers: HashMap<String, String>,
}

struct Entry {
    path: Arc<Path>,
    /// Pod uid and container id, for a pod's cgroup.
    pod: Option<(String, Option<String>)>,
}

pub struct PodIndex {
    /// Where pod cgroups may be.
    roots: PodRoots,
    pods: BTreeMap<String, Pod>,
    cgroups: HashMap<u64, Entry>,
    /// Deletions are reported by name: the inode is gone by then.
    by_path: HashMap<Arc<Path>, u64>,
    meta: HashMap<String, PodMeta>,
}

impl Default for PodIndex {
    fn default() -> Self {
        PodIndex::with_roots(PodRoots::default())
    }
}

impl PodIndex {
    /// An empty index whose pods are those under `roots`.
    pub fn with_roots(roots: PodRoots) -> Self {
        PodIndex {
            roots,
            pods: BTreeMap::new(),
            cgroups: HashMap::new(),
            by_path: HashMap::new(),
            meta: HashMap::new(),
        }
    }

    /// The index of the whole hierarchy, from one walk.
    pub fn build(hier: &Hierarchy) -> Self {
        let mut index = Self::with_roots(hier.pod_roots().clone());
        tree::walk(hier.mount(), Path::new("/"), |_, rel, id| {
            index.insert(id, rel);
            true
        });
        index
    }

    /// An empty index that keeps this one's names, for a rescan to fill.
    pub fn fresh(&self) -> Self {
        Self {
            meta: self.meta.clone(),
            ..Self::with_roots(self.roots.clone())
        }
    }

    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.values()
    }

    pub fn pod(&self, uid: &str) -> Option<&Pod> {
        self.pods.get(uid)
    }

    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// How many cgroups are known, pods' or not.
    pub fn cgroup_count(&self) -> usize {
        self.cgroups.len()
    }

    /// Whose the cgroup `id` is; `None` for an id not in the tree.
    pub fn owner(&self, id: u64) -> Option<Owner> {
        let e = self.cgroups.get(&id)?;
        Some(match &e.pod {
            Some((uid, container)) => Owner::Pod {
                uid: uid.clone(),
                container: container.clone(),
            },
            None => Owner::Other {
                path: e.path.to_string_lossy().into_owned(),
            },
        })
    }

    pub fn id_of(&self, rel: &Path) -> Option<u64> {
        self.by_path.get(rel).copied()
    }

    /// Adds the cgroup `id` at `rel` (relative to the mount, with a leading
    /// `/`). Idempotent; a path now holding another id (removed and made
    /// again) replaces the old one.
    pub fn insert(&mut self, id: u64, rel: &Path) -> Vec<Change> {
        let mut out = Vec::new();
        match self.by_path.get(rel) {
            Some(&old) if old == id => return out,
            Some(&old) => out.extend(self.remove(old)),
            None => {}
        }
        if self.cgroups.contains_key(&id) {
            out.extend(self.remove(id));
        }
        let pod = parse_rooted(rel.as_os_str().as_bytes(), &self.roots)
            .map(|pc| self.attach(id, rel, &pc, &mut out));
        let path: Arc<Path> = Arc::from(rel);
        self.by_path.insert(path.clone(), id);
        self.cgroups.insert(id, Entry { path, pod });
        out
    }

    /// Files a pod cgroup under its pod (and container), creating them as
    /// needed. What the cgroup is follows from its parent: the pod cgroup is
    /// the outermost one of its pod, a container's own cgroup the outermost
    /// one of its container.
    fn attach(
        &mut self,
        id: u64,
        rel: &Path,
        pc: &PodCgroup,
        out: &mut Vec<Change>,
    ) -> (String, Option<String>) {
        let parent = rel
            .parent()
            .and_then(|p| parse(p.as_os_str().as_bytes()))
            .filter(|p| p.pod_uid == pc.pod_uid);
        let display = rel.to_string_lossy().into_owned();
        let meta = self.meta.get(&pc.pod_uid);
        let pod = self.pods.entry(pc.pod_uid.clone()).or_insert_with(|| {
            out.push(Change::PodAdded {
                uid: pc.pod_uid.clone(),
            });
            Pod {
                uid: pc.pod_uid.clone(),
                namespace: meta.map(|m| m.namespace.clone()),
                name: meta.map(|m| m.name.clone()),
                qos: pc.qos,
                driver: pc.driver,
                cgroup_id: None,
                path: None,
                containers: Vec::new(),
                cgroups: BTreeSet::new(),
            }
        });
        pod.cgroups.insert(id);
        let Some(c) = &pc.container else {
            if parent.is_none() {
                pod.cgroup_id = Some(id);
                pod.path = Some(display);
            }
            // Otherwise overhead below the pod cgroup (CRI-O's conmon).
            return (pc.pod_uid.clone(), None);
        };
        let nested = parent.and_then(|p| p.container).is_some_and(|pcn| pcn.id == c.id);
        let i = match pod.containers.binary_search_by(|x| x.id.as_str().cmp(&c.id)) {
            Ok(i) => i,
            Err(i) => {
                out.push(Change::ContainerAdded {
                    uid: pc.pod_uid.clone(),
                    id: c.id.clone(),
                });
                // A nested cgroup seen before its container's own (only if
                // events were missed) stands in for it until that arrives.
                let ctr = Container {
                    id: c.id.clone(),
                    name: meta.and_then(|m| m.containers.get(&c.id).cloned()),
                    runtime: c.runtime,
                    cgroup_id: id,
                    path: display.clone(),
                    cgroups: BTreeSet::new(),
                };
                pod.containers.insert(i, ctr);
                i
            }
        };
        let ctr = &mut pod.containers[i];
        if !nested {
            ctr.cgroup_id = id;
            ctr.path = display;
        }
        ctr.cgroups.insert(id);
        (pc.pod_uid.clone(), Some(c.id.clone()))
    }

    /// Forgets the cgroup `id`. A container goes with its last cgroup, a
    /// pod with its last one (the kernel removes children first, so that is
    /// the pod cgroup itself).
    pub fn remove(&mut self, id: u64) -> Vec<Change> {
        let mut out = Vec::new();
        let Some(entry) = self.cgroups.remove(&id) else {
            return out;
        };
        self.by_path.remove(&entry.path);
        let Some((uid, container)) = entry.pod else {
            return out;
        };
        let Some(pod) = self.pods.get_mut(&uid) else {
            return out;
        };
        pod.cgroups.remove(&id);
        if pod.cgroup_id == Some(id) {
            pod.cgroup_id = None;
            pod.path = None;
        }
        if let Some(cid) = container {
            if let Ok(i) = pod.containers.binary_search_by(|x| x.id.cmp(&cid)) {
                pod.containers[i].cgroups.remove(&id);
                if pod.containers[i].cgroups.is_empty() {
                    pod.containers.remove(i);
                    out.push(Change::ContainerRemoved {
                        uid: uid.clone(),
                        id: cid,
                    });
                }
            }
        }
        if pod.cgroups.is_empty() {
            self.pods.remove(&uid);
            out.push(Change::PodRemoved { uid });
        }
        out
    }

    /// [`remove`](Self::remove) by path, as inotify reports deletions.
    pub fn remove_path(&mut self, rel: &Path) -> Vec<Change> {
        match self.by_path.get(rel) {
            Some(&id) => self.remove(id),
            None => Vec::new(),
        }
    }

    /// Sets (or with `None` clears) the API's names for pod `uid`. They
    /// apply now if the pod's cgroups are known, or when they appear.
    pub fn set_meta(&mut self, uid: &str, meta: Option<PodMeta>) {
        match meta {
            Some(m) => {
                self.meta.insert(uid.to_string(), m);
            }
            None => {
                self.meta.remove(uid);
            }
        }
        let meta = self.meta.get(uid);
        if let Some(pod) = self.pods.get_mut(uid) {
            pod.namespace = meta.map(|m| m.namespace.clone());
            pod.name = meta.map(|m| m.name.clone());
            for c in &mut pod.containers {
                c.name = meta.and_then(|m| m.containers.get(&c.id).cloned());
            }
        }
    }

    /// What changed from `old` to `new` (after a rescan), as if each change
    /// had been seen as it happened.
    pub fn diff(old: &PodIndex, new: &PodIndex) -> Vec<Change> {
        let mut out = Vec::new();
        for (uid, was) in &old.pods {
            let now = new.pods.get(uid);
            for c in &was.containers {
                if now.and_then(|p| p.container(&c.id)).is_none() {
                    out.push(Change::ContainerRemoved {
                        uid: uid.clone(),
                        id: c.id.clone(),
                    });
                }
            }
            if now.is_none() {
                out.push(Change::PodRemoved { uid: uid.clone() });
            }
        }
        for (uid, now) in &new.pods {
            let was = old.pods.get(uid);
            if was.is_none() {
                out.push(Change::PodAdded { uid: uid.clone() });
            }
            for c in &now.containers {
                if was.and_then(|p| p.container(&c.id)).is_none() {
                    out.push(Change::ContainerAdded {
                        uid: uid.clone(),
                        id: c.id.clone(),
                    });
                }
            }
        }
        out
    }
}

/// Whose the cgroup at `path` is, from the path alone (a pod's only under
/// one of `roots`).
pub fn owner_of_path(path: &[u8], roots: &PodRoots) -> Owner {
    match parse_rooted(path, roots) {
        Some(pc) => Owner::Pod {
            uid: pc.pod_uid,
            container: pc.container.map(|c| c.id),
        },
        None => Owner::Other {
            path: String::from_utf8_lossy(path).into_owned(),
        },
    }
}

/// Which pod and container process `pid` runs in, from the `0::` line of
/// /proc/<pid>/cgroup: how the drain gate names its caller (SO_PEERCRED
/// gives the pid). It needs only the path, so a container started a moment
/// ago that the watcher has not filed yet resolves all the same.
///
/// The path is as seen from the agent's cgroup namespace: the agent enters
/// the node's at its start (`crate::kernel::cgroupfs::enter_nodes_namespace`), so
/// that it is the path from the hierarchy's top, which `roots` are.
pub fn for_pid(pid: u32, roots: &PodRoots) -> io::Result<Owner> {
    let text = std::fs::read(format!("/proc/{pid}/cgroup"))?;
    text.split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"0::"))
        .map(|p| owner_of_path(p, roots))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "process has no cgroup v2 membership"))
}

#[cfg(test)]
mod tests;
