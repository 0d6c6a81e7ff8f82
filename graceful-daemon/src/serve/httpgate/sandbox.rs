//! A pod's network namespace, found through its processes: the sandbox
//! (pause) container's, or any other container's, since they all share it.
//! Nothing is opened for a pod with no process left: then there is no
//! namespace worth a listener.

use std::sync::RwLock;

use crate::{
    kernel::adopt::netns::NetNs, kernel::cgroupfs::Hierarchy, node::resolver::index::PodIndex, sync,
};

/// The network namespace of pod `uid`'s first process found in its
/// containers' cgroups; `None` when it has none (not started yet, or
/// every process has exited).
pub fn netns_of(index: &RwLock<PodIndex>, hier: &Hierarchy, uid: &str) -> Option<NetNs> {
    let dirs: Vec<_> = {
        let index = sync::read(index);
        let pod = index.pod(uid)?;
        pod.containers.iter().map(|c| hier.dir(&c.path)).collect()
    };
    dirs.iter().find_map(|dir| {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
        // A process may exit between the read and the open: try the next.
        procs
            .lines()
            .filter_map(|l| l.trim().parse::<u32>().ok())
            .find_map(|pid| NetNs::open(format!("/proc/{pid}/ns/net")).ok())
    })
}
