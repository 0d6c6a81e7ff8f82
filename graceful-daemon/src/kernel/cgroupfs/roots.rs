//! Where the kubelet's pod cgroups may be: the pod cgroup roots. A cgroup
//! is a pod's only if its pod component sits directly under one of them
//! (or under its QoS level: `kubepods/burstable`, `kubepods-burstable.slice`).
//! Elsewhere a pod-shaped name is just a name: a host user with a
//! delegated subtree (`/user.slice/user-1000.slice/user@1000.service/...`)
//! could make `kubepods/pod<uid>` there, and be taken for that pod.
//!
//! The defaults are the kubelet's with either cgroup driver, at the top of
//! the hierarchy, and with kind's `--cgroup-root=/kubelet`; the colon form
//! of a runtime that takes systemd's notation for a directory sits in
//! containerd's own cgroup. Other setups (rootless k3s, a kind node seen
//! from its host) name theirs with `--pod-cgroup-root`; a `*` component
//! in a component matches any run of characters, once
//! (`/system.slice/docker-*.scope/kubepods`, `/*/kubepods`). Only
//! root can make a cgroup at the top of the hierarchy or in a service's.

use std::{fmt, sync::OnceLock};

/// The roots this process was given (`--pod-cgroup-root`), once.
static CONFIGURED: OnceLock<PodRoots> = OnceLock::new();

/// Sets this process's roots, which every [`PodRoots::default`] gives from
/// now on; a second call changes nothing.
pub fn configure(roots: PodRoots) {
    let _ = CONFIGURED.set(roots);
}

/// The kubelet's pod cgroup roots when none is named.
pub const DEFAULT: [&str; 5] = [
    "/kubepods.slice",
    "/kubepods",
    "/kubelet.slice/kubelet-kubepods.slice",
    "/kubelet/kubepods",
    "/system.slice/containerd.service",
];

/// The pod cgroup roots, as patterns of path components.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRoots {
    patterns: Vec<Vec<String>>,
}

impl Default for PodRoots {
    /// The roots this process was given, else the kubelet's ([`DEFAULT`]).
    fn default() -> Self {
        CONFIGURED
            .get()
            .cloned()
            .unwrap_or_else(|| PodRoots::parse(&DEFAULT).expect("the default roots parse"))
    }
}

impl PodRoots {
    /// Roots from `--pod-cgroup-root` values: absolute cgroup paths
    /// (relative to the cgroup2 mount), `*` standing for any one name.
    pub fn parse<S: AsRef<str>>(roots: &[S]) -> Result<PodRoots, String> {
        let mut patterns = Vec::new();
        for r in roots {
            let r = r.as_ref();
            let comps: Vec<String> = r.split('/').filter(|c| !c.is_empty()).map(String::from).collect();
            if !r.starts_with('/') || comps.is_empty() || comps.iter().any(|c| c == "." || c == "..") {
                return Err(format!(
                    "--pod-cgroup-root {:?}: a cgroup path from the hierarchy's top, like /kubepods.slice",
                    graceful_api::clip(r, 128)
                ));
            }
            patterns.push(comps);
        }
        if patterns.is_empty() {
            return Err("--pod-cgroup-root: at least one root".into());
        }
        Ok(PodRoots { patterns })
    }

    /// Whether a pod component found after `before` (the path's components
    /// above it) sits under a root: directly, or under one QoS level.
    pub fn admits(&self, before: &[&[u8]]) -> bool {
        self.patterns.iter().any(|p| {
            (before.len() == p.len() || before.len() == p.len() + 1)
                && p.iter().zip(before).all(|(want, got)| glob(want.as_bytes(), got))
        })
    }
}

/// Whether `name` matches `pattern`, whose one `*` (if any) stands for any
/// run of characters: `*`, `docker-*.scope`.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.iter().position(|&b| b == b'*') {
        None => pattern == name,
        Some(i) => {
            let (head, tail) = (&pattern[..i], &pattern[i + 1..]);
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
    }
}

impl fmt::Display for PodRoots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all: Vec<String> = self
            .patterns
            .iter()
            .map(|p| format!("/{}", p.join("/")))
            .collect();
        f.write_str(&all.join(", "))
    }
}

#[cfg(test)]
mod tests;
