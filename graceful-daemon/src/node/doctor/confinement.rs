//! What confines this process beyond its capabilities: the LSMs (AppArmor,
//! SELinux, the kernel's lockdown) and seccomp. Each can refuse what the
//! agent does with every capability it needs, and each shows up after an
//! install as a pod in CrashLoop; here, as one line that names the setting.

use super::{Level, Report};

/// The runtimes' default AppArmor profiles, which deny what the agent
/// does (mount, writes under /sys/fs/bpf, reads of other processes'
/// namespaces): containerd's, CRI-O's, Docker's and Podman's.
const DEFAULT_PROFILES: &[&str] = &[
    "cri-containerd.apparmor.d",
    "crio-default",
    "docker-default",
    "containers-default",
];

/// How an LSM label reads, from `/proc/thread-self/attr/...`.
#[derive(Debug, PartialEq, Eq)]
pub enum Label {
    /// AppArmor: `unconfined`, or a profile and its mode.
    AppArmor { profile: String, mode: Option<String> },
    /// SELinux: `user:role:type:level`, with whether the node enforces it.
    SeLinux { context: String, enforcing: bool },
}

/// An AppArmor label as the kernel writes it: `unconfined`, or
/// `PROFILE (MODE)`.
pub fn apparmor(text: &str) -> Label {
    let text = text.trim_end_matches(['\0', '\n']).trim();
    match text.rsplit_once(" (") {
        Some((profile, mode)) => Label::AppArmor {
            profile: profile.to_string(),
            mode: Some(mode.trim_end_matches(')').to_string()),
        },
        None => Label::AppArmor {
            profile: text.to_string(),
            mode: None,
        },
    }
}

/// The line for one label.
pub fn judge(label: &Label) -> (Level, String) {
    match label {
        Label::AppArmor { profile, .. } if profile == "unconfined" => {
            (Level::Ok, "AppArmor: unconfined".to_string())
        }
        Label::AppArmor { profile, mode } if mode.as_deref() != Some("enforce") => (
            Level::Ok,
            format!(
                "AppArmor: profile {profile} in {} mode, which denies nothing",
                mode.as_deref().unwrap_or("no")
            ),
        ),
        Label::AppArmor { profile, .. } if DEFAULT_PROFILES.iter().any(|d| profile.starts_with(d)) => (
            Level::Fail,
            format!(
                "AppArmor enforces the runtime's default profile {profile} here, which denies mount, \
                 pinning under /sys/fs/bpf and reading other processes' namespaces: set the container's \
                 appArmorProfile to Unconfined (the chart's and deploy/base's default; below Kubernetes \
                 1.30 the annotation container.apparmor.security.beta.kubernetes.io/agent: unconfined)"
            ),
        ),
        Label::AppArmor { profile, .. } => (
            Level::Warn,
            format!(
                "AppArmor enforces profile {profile} here: it must allow bpf, mount of a bpffs, writes \
                 under /sys/fs/bpf and ptrace read of every process, or set appArmorProfile Unconfined"
            ),
        ),
        Label::SeLinux { context, enforcing } => {
            let kind = context.split(':').nth(2).unwrap_or_default();
            if *enforcing && kind.starts_with("container_") {
                (
                    Level::Fail,
                    format!(
                        "SELinux enforces {context} here, a container type that may not call bpf() or \
                         write to the bpffs: set the container's seLinuxOptions type to spc_t (the \
                         chart's agent.seLinuxOptions, with openshift.scc.enabled on OpenShift)"
                    ),
                )
            } else {
                let mode = if *enforcing { "enforcing" } else { "permissive" };
                (
                    Level::Ok,
                    format!("SELinux {mode}: this process runs as {context}"),
                )
            }
        }
    }
}

/// The kernel's lockdown mode, from `[none] integrity confidentiality`.
pub fn lockdown(text: &str) -> Option<&str> {
    let start = text.find('[')? + 1;
    let len = text[start..].find(']')?;
    Some(&text[start..start + len])
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .filter(|s| !s.trim_matches(['\0', '\n', ' ']).is_empty())
}

/// This process's labels: AppArmor's if it is on, SELinux's if it is.
fn labels() -> Vec<Label> {
    let mut out = Vec::new();
    let apparmor_on = read("/sys/module/apparmor/parameters/enabled").is_some_and(|v| v.trim() == "Y");
    if apparmor_on {
        if let Some(t) = read("/proc/thread-self/attr/apparmor/current") {
            out.push(apparmor(&t));
        }
    }
    // SELinux shows its context in attr/selinux/current on kernels with
    // per-LSM directories, else in attr/current where it is the major LSM.
    let selinux = read("/proc/thread-self/attr/selinux/current").or_else(|| {
        read("/proc/thread-self/attr/current").filter(|c| c.matches(':').count() >= 3 && !apparmor_on)
    });
    if let Some(context) = selinux {
        let enforcing = read("/sys/fs/selinux/enforce").is_some_and(|v| v.trim() == "1");
        out.push(Label::SeLinux {
            context: context.trim_end_matches(['\0', '\n']).to_string(),
            enforcing,
        });
    }
    out
}

/// The LSMs that confine this process, and the kernel's lockdown.
pub fn lsm(r: &mut Report) {
    let mut lines: Vec<(Level, String)> = labels().iter().map(judge).collect();
    // securityfs is not mounted in most containers; on a host it is.
    if let Some(mode) = read("/sys/kernel/security/lockdown")
        .as_deref()
        .and_then(lockdown)
    {
        if mode == "confidentiality" {
            lines.push((
                Level::Fail,
                "the kernel is locked down for confidentiality (lockdown=confidentiality): BPF programs \
                 may not read kernel memory, which counting needs; boot with lockdown=integrity or none"
                    .to_string(),
            ));
        }
    }
    if lines.is_empty() {
        r.line(
            Level::Ok,
            "lsm",
            "no AppArmor or SELinux label confines this process",
        );
        return;
    }
    let level = lines.iter().map(|(l, _)| *l).max().unwrap_or(Level::Ok);
    let text: Vec<String> = lines.into_iter().map(|(_, t)| t).collect();
    r.line(level, "lsm", text.join("; "));
}

/// `Seccomp:` and `Seccomp_filters:` of /proc/self/status.
pub fn seccomp_mode(status: &str) -> (u32, u32) {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("Seccomp:"), field("Seccomp_filters:"))
}

/// What a filter answers `call`, made so that the kernel itself refuses
/// it with `expect`: anything else (EPERM, ENOSYS) is the filter's answer.
fn probe(call: impl FnOnce() -> libc::c_long, expect: i32) -> Result<(), i32> {
    if call() == -1 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if errno == expect {
            return Ok(());
        }
        return Err(errno);
    }
    Ok(())
}

/// Whether the seccomp filter on this process lets the agent's system
/// calls through: bpf() with a command no kernel has (EINVAL past any
/// filter), setns() on no descriptor (EBADF past any filter).
pub fn seccomp(r: &mut Report) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let (mode, filters) = seccomp_mode(&status);
    if mode == 0 {
        r.line(Level::Ok, "seccomp", "no seccomp filter on this process");
        return;
    }
    // SAFETY: bpf() with no attribute pointer and size 0, and setns()
    // with an invalid descriptor: neither reads or writes memory.
    let bpf = probe(
        || unsafe { libc::syscall(libc::SYS_bpf, 0x7fff_i32, std::ptr::null::<u8>(), 0u32) },
        libc::EINVAL,
    );
    let setns = probe(
        || unsafe { libc::syscall(libc::SYS_setns, -1_i32, libc::CLONE_NEWNET) },
        libc::EBADF,
    );
    let refused: Vec<String> = [("bpf()", bpf), ("setns()", setns)]
        .into_iter()
        .filter_map(|(name, r)| {
            r.err()
                .map(|e| format!("{name} ({})", std::io::Error::from_raw_os_error(e)))
        })
        .collect();
    let has_bpf = crate::kernel::version::effective_caps() & (1 << 39) != 0;
    if refused.is_empty() {
        r.line(
            Level::Ok,
            "seccomp",
            format!("{filters} filter(s), which let bpf() and setns() through"),
        );
    } else if !has_bpf {
        r.line(
            Level::Warn,
            "seccomp",
            format!(
                "refused: {}; without CAP_BPF the kernel may be the one refusing, so run this check \
                 with the agent's capabilities",
                refused.join(", ")
            ),
        );
    } else {
        r.line(
            Level::Fail,
            "seccomp",
            format!(
                "the seccomp profile refuses {}, calls the agent makes: set the container's \
                 seccompProfile to Unconfined (the chart's agent.seccompProfile), or use a runtime \
                 whose default profile allows them with CAP_SYS_ADMIN (containerd's and CRI-O's do)",
                refused.join(" and ")
            ),
        );
    }
}

#[cfg(test)]
mod tests;
