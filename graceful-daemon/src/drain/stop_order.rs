//! The order in which the kubelet stops a pod's containers, and the
//! `after-containers` it makes impossible.
//!
//! When a pod with native sidecars (init containers with `restartPolicy:
//! Always`) terminates, the kubelet runs every container's preStop hook at
//! once, then sends SIGTERM to the regular containers, and to each sidecar
//! only once every regular container and every sidecar after it in the
//! spec has exited (1.37's `killContainersWithSyncResult` and
//! `terminationOrdering`). So a hook that waits for a container the
//! kubelet stops after its own (a regular container waiting for a native
//! sidecar; a sidecar waiting for one before it in the spec) waits for an
//! exit that cannot come before its own: its drain could only end at its
//! deadline. Such names are left out of the drain, with a warning. The
//! opposite (a native sidecar waiting for the app) is redundant, the
//! kubelet's order already gives it, and harmless.

use std::collections::BTreeMap;

/// When the kubelet stops each container: the regular ones first and
/// together (rank 0), then the native sidecars, the last in the spec first
/// (rank 1, 2, ...). Init containers that ran to completion and ephemeral
/// containers have no rank.
pub type Ranks = BTreeMap<String, u32>;

/// The ranks of a pod whose regular containers are `apps` and whose
/// native sidecars are `sidecars`, in spec order.
pub fn ranks<'a>(apps: impl IntoIterator<Item = &'a str>, sidecars: &[&str]) -> Ranks {
    let mut r: Ranks = apps.into_iter().map(|a| (a.to_string(), 0)).collect();
    let n = sidecars.len() as u32;
    for (i, s) in sidecars.iter().enumerate() {
        r.insert(s.to_string(), n - i as u32);
    }
    r
}

/// Splits `after` (names, or id prefixes) for a hook in `caller`: the ones
/// it may wait for, and warnings for those the kubelet stops only after
/// `caller` has exited.
pub fn check(after: Vec<String>, caller: Option<&str>, ranks: &Ranks) -> (Vec<String>, Vec<String>) {
    let Some(mine) = caller.and_then(|c| ranks.get(c)) else {
        return (after, Vec::new());
    };
    let caller = caller.unwrap_or_default();
    let mut warnings = Vec::new();
    let kept = after
        .into_iter()
        .filter(|name| match ranks.get(name) {
            Some(theirs) if theirs > mine => {
                warnings.push(format!(
                    "misconfiguration: after-containers names {name}, a native sidecar that the kubelet \
                     stops only after {caller} has exited: the drain would wait for its deadline; {name} \
                     left out (a native sidecar already outlives the app: give its hook no \
                     after-containers)"
                ));
                false
            }
            _ => true,
        })
        .collect();
    (kept, warnings)
}

#[cfg(test)]
mod tests;
