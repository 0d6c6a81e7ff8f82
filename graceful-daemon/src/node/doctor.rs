//! Can this node run graceful? Each check is one [`Finding`] that says what
//! to do: the kernel, the capabilities, the LSMs and seccomp
//! ([`confinement`]), BTF, cgroup v2, the bpffs and the pins, memory, the
//! addresses `:PORT` listens on ([`network`]), the programs (a trial load),
//! and what a mesh does to the pods' gates. `graceful doctor` prints them;
//! the agent serves them on `/v1/doctor`; `kubectl graceful preflight` runs
//! `graceful doctor --json` in a pod like the agent's on every node before
//! an install.

mod confinement;
mod network;

use crate::{
    kernel::bpf::{
        bpffs::{self, Residence},
        btf::Btf,
        layout, loader,
        paths::PinDir,
        query,
    },
    kernel::cgroupfs,
    kernel::version,
};

pub use graceful_api::views::doctor::{verdict, Finding, Level};

struct Report {
    findings: Vec<Finding>,
}

impl Report {
    fn line(&mut self, level: Level, what: &str, msg: impl AsRef<str>) {
        self.findings.push(Finding {
            level,
            check: what.to_string(),
            message: msg.as_ref().to_string(),
        });
    }
}

/// Capabilities the agent uses, and the call that needs each.
const CAPS: &[(u32, &str, &str)] = &[
    (39, "CAP_BPF", "load programs and create maps"),
    (
        38,
        "CAP_PERFMON",
        "attach tracing programs and read kernel memory from them",
    ),
    (
        21,
        "CAP_SYS_ADMIN",
        "mount the bpffs, pin objects and enter network namespaces (setns) for adoption",
    ),
    (
        12,
        "CAP_NET_ADMIN",
        "attach cgroup_skb programs to draining pods' cgroups",
    ),
    (
        19,
        "CAP_SYS_PTRACE",
        "read /proc/<pid>/ns/net of other processes to find every network namespace",
    ),
];

/// What the checks look at: the pin directory, the running agent's view
/// of its pods if one answers, and whether to try loading the programs.
struct Ctx<'a> {
    pins: &'a PinDir,
    pods: Option<&'a [crate::node::resolver::counts::PodView]>,
    load: bool,
}

/// Every check, in the order `graceful doctor` prints them.
const CHECKS: [fn(&Ctx, &mut Report); 13] = [
    kernel_floor,
    capabilities,
    |_, r| confinement::lsm(r),
    |_, r| confinement::seccomp(r),
    btf_members,
    cgroup_v2,
    bpffs_residence,
    pin_layout,
    counters_room,
    memory_budget,
    |_, r| network::network(r),
    trial_load,
    mesh_gates,
];

/// Every check, in order. `pods`: the agent's view of its pods, if one
/// answers; `load`: try loading the programs (root only).
pub fn findings(
    pins: &PinDir,
    pods: Option<&[crate::node::resolver::counts::PodView]>,
    load: bool,
) -> Vec<Finding> {
    let c = Ctx { pins, pods, load };
    let mut r = Report { findings: Vec::new() };
    for check in CHECKS {
        check(&c, &mut r);
    }
    r.findings
}

/// The kernel against the floor graceful supports.
fn kernel_floor(_: &Ctx, r: &mut Report) {
    match version::check_floor() {
        Ok(rel) => r.line(
            Level::Ok,
            "kernel",
            format!("{rel} (floor {}.{})", version::FLOOR.0, version::FLOOR.1),
        ),
        Err(e) => r.line(Level::Fail, "kernel", e),
    }
}

/// The capabilities the agent uses, each with the call that needs it.
fn capabilities(_: &Ctx, r: &mut Report) {
    let caps = version::effective_caps();
    let missing: Vec<String> = CAPS
        .iter()
        .filter(|(bit, _, _)| caps & (1u64 << bit) == 0)
        .map(|(_, name, why)| format!("{name} ({why})"))
        .collect();
    if missing.is_empty() {
        r.line(Level::Ok, "privileges", "all needed capabilities are effective");
    } else {
        r.line(
            Level::Fail,
            "privileges",
            format!(
                "missing {}: run as root or grant these capabilities",
                missing.join(", ")
            ),
        );
    }
}

/// BTF, with the members the programs read.
fn btf_members(_: &Ctx, r: &mut Report) {
    match Btf::from_sys_fs().and_then(|b| b.member_offset("sock_common", "skc_state").map(|o| (b, o))) {
        Ok((b, off)) => match b.member_offset("sock", "sk_protocol") {
            Ok(p) => r.line(
                Level::Ok,
                "btf",
                format!("/sys/kernel/btf/vmlinux (skc_state at {off}, sk_protocol at {p})"),
            ),
            Err(e) => r.line(Level::Fail, "btf", e.to_string()),
        },
        Err(e) => r.line(Level::Fail, "btf", e.to_string()),
    }
}

/// The cgroup v2 mount.
fn cgroup_v2(_: &Ctx, r: &mut Report) {
    match cgroupfs::mount_point() {
        Ok(m) => r.line(Level::Ok, "cgroup2", format!("mounted at {}", m.display())),
        Err(e) => r.line(Level::Fail, "cgroup2", e.to_string()),
    }
}

/// The bpffs that holds the pin directory, and whether it outlives this
/// container (see bpf::bpffs::residence).
fn bpffs_residence(c: &Ctx, r: &mut Report) {
    let residence = bpffs::residence(c.pins.root());
    let level = match &residence {
        Residence::Uncontained { bpffs: Some(_) } => Level::Ok,
        Residence::Uncontained { bpffs: None } => Level::Warn,
        Residence::Host { propagated: true, .. } => Level::Ok,
        Residence::Host { .. } => Level::Warn,
        Residence::Own { .. } | Residence::Missing | Residence::NotBpffs { .. } => Level::Fail,
    };
    r.line(level, "bpffs", residence.describe());
}

/// The pins: none yet, or of this layout.
fn pin_layout(c: &Ctx, r: &mut Report) {
    match layout::check(c.pins) {
        Ok(layout::PinState::Empty) => r.line(
            Level::Ok,
            "pins",
            format!("none at {} (agent not installed yet)", c.pins.root().display()),
        ),
        Ok(layout::PinState::Compatible) => {
            let links = std::fs::read_dir(c.pins.links()).map(|d| d.count()).unwrap_or(0);
            r.line(
                Level::Ok,
                "pins",
                format!(
                    "{} holds maps of this layout and {links} attached program link(s)",
                    c.pins.root().display()
                ),
            )
        }
        Err(e) => r.line(Level::Fail, "pins", e.to_string()),
    }
}

/// The counters map: a cgroup that got no entry (the map full) had its
/// connections go uncounted, and its drains are held to their deadline.
fn counters_room(c: &Ctx, r: &mut Report) {
    if let Ok(stats) = crate::kernel::bpf::maps::read_stats(c.pins) {
        let full = stats[graceful_common::stat::COUNTERS_FULL as usize];
        if full > 0 {
            r.line(
                Level::Warn,
                "counters",
                format!(
                    "the counters map ({} cgroups) was full {full} time(s): those connections were not counted, \
                     and drains of pods made before it are held to their deadline; find what makes so many \
                     cgroups (`graceful cgroups`), then `graceful uninstall` and start the agent again to recount",
                    graceful_common::MAX_CGROUPS
                ),
            );
        } else {
            r.line(
                Level::Ok,
                "counters",
                "every cgroup with a connection got its counters",
            );
        }
    }
}

/// The agent's memory budget.
fn memory_budget(_: &Ctx, r: &mut Report) {
    match crate::kernel::memcg::Budget::own() {
        Some(b) if b.is_short() => r.line(
            Level::Warn,
            "memory",
            format!(
                "{}: raise the agent's memory limit, or the kernel OOM-kills it as sockets grow",
                b.describe()
            ),
        ),
        Some(b) => r.line(Level::Ok, "memory", format!("this process's {}", b.describe())),
        None => r.line(
            Level::Ok,
            "memory",
            "no memory cgroup readable here: no memory limit applies to this process",
        ),
    }
}

/// A trial load of the programs (`load`, root only), how the agent will
/// count, other sock_ops programs, and container exits.
fn trial_load(c: &Ctx, r: &mut Report) {
    if c.load {
        if !version::is_root() {
            r.line(
                Level::Fail,
                "programs",
                "not root: cannot try loading the programs; run `sudo graceful doctor`",
            );
        } else {
            let root = cgroupfs::mount_point();
            match root
                .as_ref()
                .map_err(|e| e.to_string())
                .and_then(|root| loader::trial(root).map_err(|e| e.to_string()))
            {
                Ok(loader::Trial { exits, sock_ops }) => {
                    r.line(
                        Level::Ok,
                        "programs",
                        "tp_btf/inet_sock_set_state attaches; iter/tcp and cgroup_skb/ingress load",
                    );
                    match sock_ops {
                        None => r.line(
                            Level::Ok,
                            "counting",
                            "sockops attaches at the cgroup v2 root: new connections are counted by it",
                        ),
                        Some(e) => r.line(
                            Level::Warn,
                            "counting",
                            format!(
                                "{e}; the agent counts with the tracepoint design instead \
                                 (about three times the CPU per connection)"
                            ),
                        ),
                    }
                    let others = root
                        .as_ref()
                        .map(|root| query::foreign_sock_ops(root))
                        .unwrap_or_default();
                    if !others.is_empty() {
                        r.line(
                            Level::Warn,
                            "sock_ops",
                            format!(
                                "other sock_ops programs run for every socket ({}): graceful counts by the \
                                 sockets' STATE_CB and RTO_CB callback flags, and a program that sets a \
                                 socket's flags without keeping those would make it miss changes",
                                others.join(", ")
                            ),
                        );
                    }
                    match exits {
                        None => r.line(Level::Ok, "exits", "tp_btf/cgroup_notify_populated attaches"),
                        Some(e) => r.line(
                            Level::Warn,
                            "exits",
                            format!("{e}; --after-containers sees exits through inotify, up to 10 ms later"),
                        ),
                    }
                }
                Err(e) => r.line(Level::Fail, "programs", e),
            }
        }
    }
}

/// The running agent's view of the pods: what a mesh does to their gate.
fn mesh_gates(c: &Ctx, r: &mut Report) {
    if let Some(pods) = c.pods {
        let meshed: Vec<String> = pods
            .iter()
            .filter(|p| p.gate_warning.is_some())
            .map(|p| {
                format!(
                    "{}/{}",
                    p.namespace.as_deref().unwrap_or("-"),
                    p.name.as_deref().unwrap_or(&p.uid)
                )
            })
            .collect();
        if meshed.is_empty() {
            r.line(
                Level::Ok,
                "mesh",
                "no pod's httpGet gate hook is relayed by a sidecar proxy that would cut it",
            );
        } else {
            r.line(
                Level::Warn,
                "mesh",
                format!(
                    "{} pods' httpGet gate hooks are relayed by a mesh's sidecar proxy, which cuts them when it stops ({}): `graceful pods` says what to annotate",
                    meshed.len(),
                    meshed.join(", ")
                ),
            );
        }
    }
}
