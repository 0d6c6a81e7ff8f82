//! Who is calling: SO_PEERCRED gives the pid, /proc/<pid>/cgroup the pod
//! and container. Nothing the caller says about itself is believed.

use crate::{
    kernel::cgroupfs::roots::PodRoots,
    node::resolver::index::{for_pid, Owner},
};

/// The calling pod and container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub pid: i32,
    pub pod: String,
    pub container: Option<String>,
}

#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    #[error("the kernel gave no pid for this connection: call the gate from a process of the pod, over its unix socket")]
    NoPid,
    #[error("caller pid {0} has vanished")]
    Gone(i32),
    /// The agent could not read what the kernel says of the caller (out
    /// of descriptors, of memory): a fact about the agent, not the caller.
    #[error("the agent cannot identify caller pid {pid} now ({error}): retry shortly")]
    Internal { pid: i32, error: String },
    #[error("caller pid {pid} (cgroup {path}) is not in a Kubernetes pod: the gate serves only pods' own preStop hooks")]
    NotAPod { pid: i32, path: String },
    /// On a pod's socket gate: a process of another pod (which only a
    /// process that entered this pod's network namespace can be).
    #[error("caller pid {pid} is of pod {pod}: this socket gate serves only pod {gate}'s own hooks")]
    OtherPod { pid: i32, pod: String, gate: String },
}

impl IdentityError {
    /// The key the caller's share is counted under: its cgroup, where the
    /// kernel gave one.
    pub fn share_key(&self) -> String {
        match self {
            IdentityError::NotAPod { path, .. } => path.clone(),
            IdentityError::OtherPod { pod, .. } => pod.clone(),
            IdentityError::NoPid => "(no pid)".into(),
            IdentityError::Gone(_) => "(vanished)".into(),
            IdentityError::Internal { .. } => "(unidentified)".into(),
        }
    }
}

/// Identifies the process at the other end of a gate connection: a pod's
/// only if its cgroup is under one of `roots`.
pub fn identify(pid: Option<i32>, roots: &PodRoots) -> Result<Caller, IdentityError> {
    let pid = pid.ok_or(IdentityError::NoPid)?;
    let owner = for_pid(pid as u32, roots).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT | libc::ESRCH) => IdentityError::Gone(pid),
        _ if e.kind() == std::io::ErrorKind::NotFound => IdentityError::Gone(pid),
        _ => IdentityError::Internal {
            pid,
            error: e.to_string(),
        },
    })?;
    match owner {
        Owner::Pod { uid, container } => Ok(Caller {
            pid,
            pod: uid,
            container,
        }),
        Owner::Other { path } => Err(IdentityError::NotAPod { pid, path }),
    }
}
