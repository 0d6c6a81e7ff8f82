//! The host as the first `up` found it, so that `down` can show that it
//! left nothing behind: mounts, network namespaces, cgroups, interfaces,
//! the host's iptables rules, the cluster's processes and the entries of
//! the directories a node writes to (`xtask::host`, whose rule of what
//! the tools make on any machine applies here too).

use std::{collections::BTreeSet, fs, path::Path, process::Command};

use serde::{Deserialize, Serialize};

use super::Paths;
use crate::mounts;

/// The cluster's programs, as their process names show.
const PROGRAMS: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-controller",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim",
];

#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Footprint {
    mounts: BTreeSet<String>,
    netns: BTreeSet<String>,
    cgroups: BTreeSet<String>,
    links: BTreeSet<String>,
    iptables: BTreeSet<String>,
    processes: BTreeSet<String>,
    entries: BTreeSet<String>,
}

fn lines(cmd: &mut Command) -> BTreeSet<String> {
    cmd.output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn names(dir: &Path) -> impl Iterator<Item = String> {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().display().to_string())
}

impl Footprint {
    pub fn take() -> Footprint {
        let all = mounts::all().unwrap_or_default();
        let cgroups = all
            .iter()
            .filter(|m| m.fstype == "cgroup" || m.fstype == "cgroup2")
            .flat_map(|m| names(&m.mount_point).filter(|p| Path::new(p).is_dir()))
            .collect();
        let processes = fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            // Zombies are gone already: only their parent's wait is missing.
            .filter(|e| {
                fs::read_to_string(e.path().join("stat"))
                    .ok()
                    .and_then(|s| s.rfind(')').map(|i| !s[i + 2..].starts_with('Z')))
                    .unwrap_or(false)
            })
            .filter_map(|e| fs::read_to_string(e.path().join("comm")).ok())
            .map(|c| c.trim().to_string())
            .filter(|c| PROGRAMS.iter().any(|p| c.starts_with(p)))
            .collect();
        Footprint {
            mounts: all.iter().map(|m| m.mount_point.display().to_string()).collect(),
            netns: names(Path::new("/run/netns")).collect(),
            cgroups,
            links: lines(Command::new("ip").args(["-o", "link", "show"]))
                .iter()
                .filter_map(|l| l.split(':').nth(1).map(|n| n.trim().to_string()))
                .collect(),
            // Rules, not counters or the generator's comment lines.
            iptables: lines(&mut Command::new("iptables-save"))
                .into_iter()
                .filter(|l| !l.starts_with('#') && !l.starts_with(':'))
                .collect(),
            processes,
            entries: xtask::host::entries(),
        }
    }

    fn file(paths: &Paths) -> std::path::PathBuf {
        paths.run().join("footprint.json")
    }

    /// Records the host once, before the first `up` changes anything.
    pub fn record_once(paths: &Paths) -> anyhow::Result<()> {
        let f = Self::file(paths);
        if !f.exists() {
            let before = Footprint::take();
            fs::create_dir_all(paths.run())?;
            fs::write(&f, serde_json::to_string(&before)?)?;
        }
        Ok(())
    }

    pub fn load(paths: &Paths) -> Option<Footprint> {
        serde_json::from_str(&fs::read_to_string(Self::file(paths)).ok()?).ok()
    }

    /// What `now` has that `self` (the host before the cluster) had not.
    pub fn added_in(&self, now: &Footprint) -> Vec<String> {
        let mut out = Vec::new();
        let mut diff = |what: &str, before: &BTreeSet<String>, after: &BTreeSet<String>| {
            for x in after.difference(before) {
                out.push(format!("{what} {x}"));
            }
        };
        diff("mount", &self.mounts, &now.mounts);
        diff("network namespace", &self.netns, &now.netns);
        diff("cgroup", &self.cgroups, &now.cgroups);
        diff("interface", &self.links, &now.links);
        diff("iptables rule", &self.iptables, &now.iptables);
        diff("process", &self.processes, &now.processes);
        for x in xtask::host::added(&self.entries, &now.entries) {
            out.push(format!("path {x}"));
        }
        out
    }

    /// Whether `/run/netns` was a mount before the cluster.
    pub fn had_netns_mount(&self) -> bool {
        self.mounts.contains("/run/netns")
    }
}

#[cfg(test)]
mod tests;
