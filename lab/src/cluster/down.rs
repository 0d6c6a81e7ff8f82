//! `cluster down`: removes everything the cluster made, in an order that
//! works after a failed or half-finished `up` too, and says what, if
//! anything, it could not remove.
//!
//! 1. the kubelet, so that it restarts nothing;
//! 2. every container process (the `kubepods` cgroups of each hierarchy);
//! 3. every other process of the cluster's cgroup and pidfiles: containerd
//!    and its shims, the control plane, etcd, the door;
//! 4. the agent's pins, which keep its programs attached;
//! 5. the mounts: the kubelet's volumes, containerd's rootfs and shm mounts,
//!    the pods' network namespace files;
//! 6. the network namespaces: the pods' and the node's (its iptables rules,
//!    conntrack entries, bridge and veths go with it);
//! 7. the cgroups, 8. the directories, 9. what `up` changed on the host.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    thread::sleep,
    time::{Duration, Instant},
};

use super::{
    daemons::{self, ORDER},
    footprint::Footprint,
    node::{self, HostChanges},
    Paths, AGENT_PINS, GATE_DIR, NETNS, RUN_DIR,
};
use crate::mounts;
use xtask::util;

/// Directories outside the target directory that the node's processes make.
const NODE_DIRS: &[&str] = &[
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/var/lib/cni",
    "/run/containerd",
    RUN_DIR,
];

pub fn run(paths: &Paths) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let changes = HostChanges::load(paths);
    let before = Footprint::load(paths);
    let mut left = Vec::new();

    // Every process this stops, to see each one gone before saying so.
    let mut stopped = Vec::new();
    if let Some(pid) = daemons::running(paths, "kubelet") {
        terminate(&[pid], Duration::from_secs(5));
        stopped.push(pid);
    }
    let containers = kubepods_pids();
    stopped.extend(&containers);
    if !containers.is_empty() {
        println!(
            "{:<10} {:<34} {}",
            "killed",
            "container processes",
            containers.len()
        );
    }
    kill_until_empty(kubepods_pids);

    let mut pids: Vec<u32> = ORDER
        .iter()
        .rev()
        .filter_map(|n| daemons::running(paths, n))
        .collect();
    pids.extend(daemons::cgroup_pids());
    pids.sort_unstable();
    pids.dedup();
    if !pids.is_empty() {
        terminate(&pids, Duration::from_secs(10));
        println!("{:<10} {:<34} {}", "stopped", "node processes", pids.len());
    }
    kill_until_empty(daemons::cgroup_pids);
    stopped.extend(&pids);
    // SIGKILL is sent, not done: a 2 GB API server takes a moment to go.
    for pid in wait_gone(&stopped, Duration::from_secs(30)) {
        left.push(format!(
            "process {pid} ({}): still alive after SIGKILL",
            comm(pid)
        ));
    }

    if Path::new(AGENT_PINS).exists() {
        remove_pins(Path::new(AGENT_PINS), &mut left);
    }

    let mut points: Vec<PathBuf> = mounts::all()?
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|p| is_cluster_mount(p, paths))
        .collect();
    points.sort();
    points.dedup();
    let n = points.len();
    for p in points.iter().rev() {
        unmount(p, &mut left);
    }
    if n > 0 {
        println!("{:<10} {:<34} {n}", "unmounted", "mounts");
    }

    let mut netns = 0;
    if let Ok(rd) = fs::read_dir("/run/netns") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("cni-") {
                if let Err(err) = fs::remove_file(e.path()) {
                    left.push(format!("{}: {err}", e.path().display()));
                }
                netns += 1;
            }
        }
    }
    if node::exists() {
        match util::output(Command::new("ip").args(["netns", "del", NETNS])) {
            Ok(_) => netns += 1,
            Err(e) => left.push(format!("network namespace {NETNS}: {e:#}")),
        }
    }
    if netns > 0 {
        println!("{:<10} {:<34} {netns}", "removed", "network namespaces");
    }

    let mut cgroups = 0;
    for root in cgroup_roots() {
        for top in [root.join("kubepods"), root.join(super::CGROUP)] {
            cgroups += rmdir_tree(&top, &mut left);
        }
    }
    if cgroups > 0 {
        println!("{:<10} {:<34} {cgroups}", "removed", "cgroups");
    }

    let mut dirs: Vec<PathBuf> = NODE_DIRS.iter().map(PathBuf::from).collect();
    dirs.push(paths.root.clone());
    if changes.gate_dir_created {
        dirs.push(PathBuf::from(GATE_DIR));
    }
    for d in dirs.iter().filter(|d| d.exists()) {
        if let Err(e) = fs::remove_dir_all(d) {
            left.push(format!("{}: {e}", d.display()));
        }
    }

    if let Err(e) = node::restore_bpffs(&changes) {
        left.push(format!("/sys/fs/bpf: {e:#}"));
    }

    // What the host has now that it had not before the first `up`.
    if let Some(before) = before {
        let netns_empty = fs::read_dir("/run/netns")
            .map(|mut d| d.next().is_none())
            .unwrap_or(true);
        if !before.had_netns_mount() && netns_empty && mounts::at(Path::new("/run/netns")).is_some() {
            // `ip netns add` made /run/netns a mount of itself for the node's namespace.
            unmount(Path::new("/run/netns"), &mut left);
        }
        for x in before.added_in(&Footprint::take()) {
            left.push(format!("{x} (not there before the cluster)"));
        }
    }

    if left.is_empty() {
        println!(
            "==> the cluster is down, nothing of it is left ({:.1} s)",
            t0.elapsed().as_secs_f64()
        );
        Ok(())
    } else {
        anyhow::bail!(
            "the cluster is down, but these are left:\n  {}",
            left.join("\n  ")
        )
    }
}

/// SIGTERM, then SIGKILL for whatever still lives after `grace`.
fn terminate(pids: &[u32], grace: Duration) {
    for &p in pids {
        // SAFETY: kill(2) with a plain signal.
        unsafe { libc::kill(p as i32, libc::SIGTERM) };
    }
    for p in wait_gone(pids, grace) {
        // SAFETY: as above.
        unsafe { libc::kill(p as i32, libc::SIGKILL) };
    }
}

/// Waits until none of `pids` lives (a zombie is gone already: only its
/// parent's wait is missing); returns those that still live after `limit`.
fn wait_gone(pids: &[u32], limit: Duration) -> Vec<u32> {
    let deadline = Instant::now() + limit;
    loop {
        let live: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if live.is_empty() || Instant::now() >= deadline {
            return live;
        }
        sleep(Duration::from_millis(50));
    }
}

fn comm(pid: u32) -> String {
    fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
        .is_some_and(|zombie| !zombie)
}

/// SIGKILLs what `pids` lists until it lists nothing (10 s at most).
fn kill_until_empty(pids: impl Fn() -> Vec<u32>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let live: Vec<u32> = pids().into_iter().filter(|&p| alive(p)).collect();
        if live.is_empty() || Instant::now() > deadline {
            return;
        }
        for p in live {
            // SAFETY: kill(2) with a plain signal.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
        sleep(Duration::from_millis(50));
    }
}

/// The cgroup2 tree and each v1 hierarchy.
fn cgroup_roots() -> Vec<PathBuf> {
    mounts::all()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.fstype == "cgroup2" || m.fstype == "cgroup")
        .map(|m| m.mount_point)
        .collect()
}

fn kubepods_pids() -> Vec<u32> {
    cgroup_roots()
        .iter()
        .flat_map(|r| graceful_test_support::cgroup::pids_in(&r.join("kubepods")))
        .collect()
}

fn is_cluster_mount(p: &Path, paths: &Paths) -> bool {
    let under = |prefix: &Path| p.starts_with(prefix) && p != prefix;
    NODE_DIRS.iter().any(|d| p.starts_with(d))
        || under(&paths.root)
        || p.parent() == Some(Path::new("/run/netns"))
            && p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("cni-"))
}

fn unmount(p: &Path, left: &mut Vec<String>) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).expect("a path without NUL");
    // SAFETY: umount2 with a valid C string.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        return;
    }
    // Busy: detach it, it goes once its last user does.
    // SAFETY: as above.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        left.push(format!(
            "mount {}: {}",
            p.display(),
            std::io::Error::last_os_error()
        ));
    }
}

/// Removes a cgroup and those below it, deepest first; returns how many.
fn rmdir_tree(dir: &Path, left: &mut Vec<String>) -> usize {
    if !dir.is_dir() {
        return 0;
    }
    let mut n = 0;
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                n += rmdir_tree(&e.path(), left);
            }
        }
    }
    // A cgroup whose last process just died may be busy for a moment.
    for attempt in 0..50 {
        match fs::remove_dir(dir) {
            Ok(()) => return n + 1,
            Err(e) if attempt == 49 => left.push(format!("cgroup {}: {e}", dir.display())),
            Err(_) => sleep(Duration::from_millis(20)),
        }
    }
    n
}

/// `graceful uninstall` on the agent's pin directory: its programs detach.
fn remove_pins(pins: &Path, left: &mut Vec<String>) {
    let bin = [
        "x86_64-unknown-linux-musl/release/graceful",
        "debug/graceful",
        "release/graceful",
    ]
    .iter()
    .map(|b| util::target_dir().join(b))
    .find(|b| b.is_file());
    let done = bin.is_some_and(|bin| {
        util::output(Command::new(bin).arg("--pin-dir").arg(pins).arg("uninstall"))
            .map(|out| println!("{:<10} {:<34} {}", "removed", "the agent's pins", out.trim()))
            .is_ok()
    });
    // Without a graceful binary: unlinking each pin drops it just the same.
    if !done {
        if let Err(e) = fs::remove_dir_all(pins) {
            left.push(format!("{}: {e}", pins.display()));
        }
    }
}
