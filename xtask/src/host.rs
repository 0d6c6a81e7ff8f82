//! What a run leaves on the host: the entries of the directories a node,
//! the tests and the tools they run write to, compared before and after.
//! `cargo xtask test` checks that its whole run leaves none (the kernel
//! tests' agents and the node included), and `cluster down` that the node
//! left none; what the tools themselves make on any machine that ever ran
//! them is [`ORDINARY`], written here once for both.

use std::{collections::BTreeSet, fs, path::Path};

/// Directories whose entries a run may add to.
pub const WATCHED: &[&str] = &["/run", "/var/lib", "/var/log", "/etc", "/opt", "/sys/fs/bpf"];

/// Entries that the tools a run uses make on first use, on any machine that
/// ever ran them: the machine's ordinary state, not traces of the run.
/// Found by running the README's two commands on a machine that had run
/// none of them.
/// - `/run/netns`, `/run/mount`: `ip netns` (a mount at /run/netns that
///   `ip netns add` made is still compared, as a mount, by `cluster down`);
/// - `/run/xtables.lock`: iptables' lock, made by its first run (kube-proxy's,
///   the CNI plugins' masquerade, the mesh tests' istio-iptables);
/// - `/sys/fs/bpf/maps.debug`, `/sys/fs/bpf/progs.debug`: the kernel's own
///   files in a bpffs, there once one is mounted at /sys/fs/bpf (the agent
///   mounts one where nobody has, as systemd does at boot).
pub const ORDINARY: &[&str] = &[
    "/run/netns",
    "/run/mount",
    "/run/xtables.lock",
    "/sys/fs/bpf/maps.debug",
    "/sys/fs/bpf/progs.debug",
];

/// The entries of every [`WATCHED`] directory now.
pub fn entries() -> BTreeSet<String> {
    WATCHED
        .iter()
        .flat_map(|d| fs::read_dir(Path::new(d)).into_iter().flatten().flatten())
        .map(|e| e.path().display().to_string())
        .collect()
}

/// What `after` has that `before` had not, [`ORDINARY`] left out.
pub fn added(before: &BTreeSet<String>, after: &BTreeSet<String>) -> Vec<String> {
    after
        .difference(before)
        .filter(|e| !ORDINARY.contains(&e.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests;
