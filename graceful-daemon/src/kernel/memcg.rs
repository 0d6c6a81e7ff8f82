//! The agent's memory budget. The kernel charges graceful's maps, and the
//! storage of the sockets the state programs count, to the memory cgroup
//! of the process that created the maps: the agent's container. Under the
//! default sock_ops design nothing is stored per socket (but for the
//! sockets older than the agent's first start, on kernels before 6.12);
//! under the tracepoint design every TCP socket on the node carries
//! storage, and the agent's memory limit must grow with the node's
//! sockets: about 313 bytes each (`cargo xtask bench memory` on 6.18), on
//! top of about 30 MiB for the agent and its maps at rest.
//!
//! When the limit is reached, the kernel does not refuse a socket's
//! storage (it is allocated from softirq, where a memory cgroup may go over
//! its limit); the agent's own next allocation then fails, and the agent
//! is OOM-killed. [`Budget`] tells before that happens.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

/// Kernel memory charged per tracked TCP socket, rounded up from the
/// memory bench's 313 bytes.
pub const BYTES_PER_SOCKET: u64 = 320;

/// Above this share of its limit, the memory cgroup is reported as short.
pub const SHORT_PCT: u64 = 85;

/// What the agent's memory cgroup holds, against its limit, and the node's
/// TCP sockets that drive it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Charged now, in bytes.
    pub usage: u64,
    /// The tightest limit of the cgroup and its ancestors; `None`: none.
    pub limit: Option<u64>,
    /// TCP sockets allocated on the node, every network namespace.
    pub tcp_sockets: Option<u64>,
}

impl Budget {
    /// The calling process's budget; `None` if its memory cgroup cannot be
    /// found or read (no memory controller).
    pub fn own() -> Option<Self> {
        let Own { mount, dir, v2 } = own()?;
        let (usage, limit) = if *v2 {
            (
                read_u64(&dir.join("memory.current"))?,
                tightest(mount, dir, "memory.max"),
            )
        } else {
            (
                read_u64(&dir.join("memory.usage_in_bytes"))?,
                tightest(mount, dir, "memory.limit_in_bytes"),
            )
        };
        let tcp_sockets = std::fs::read_to_string("/proc/net/sockstat")
            .ok()
            .and_then(|s| tcp_allocated(&s));
        Some(Self {
            usage,
            limit,
            tcp_sockets,
        })
    }

    /// Over [`SHORT_PCT`] of the limit.
    pub fn is_short(&self) -> bool {
        self.limit
            .is_some_and(|l| self.usage.saturating_mul(100) > l.saturating_mul(SHORT_PCT))
    }

    /// More TCP sockets the node can open before the limit is reached, if
    /// each carried storage (the tracepoint design).
    pub fn sockets_left(&self) -> Option<u64> {
        self.limit
            .map(|l| l.saturating_sub(self.usage) / BYTES_PER_SOCKET)
    }

    /// One line for logs and `graceful doctor`.
    pub fn describe(&self) -> String {
        let mib = |b: u64| b as f64 / 1048576.0;
        let sockets = self
            .tcp_sockets
            .map_or("an unknown number of".into(), |n| n.to_string());
        match (self.limit, self.sockets_left()) {
            (Some(limit), Some(left)) => format!(
                "memory cgroup at {:.1} of its {:.1} MiB limit; {sockets} TCP sockets on the node, which cost it nothing under the sock_ops design and about {BYTES_PER_SOCKET} bytes each under the tracepoint design (room for about {left} more then)",
                mib(self.usage),
                mib(limit)
            ),
            _ => format!(
                "memory cgroup at {:.1} MiB, no limit; {sockets} TCP sockets on the node, which cost it nothing under the sock_ops design and about {BYTES_PER_SOCKET} bytes each under the tracepoint design",
                mib(self.usage)
            ),
        }
    }
}

/// A process's memory cgroup.
#[derive(Debug, PartialEq, Eq)]
struct Own {
    /// The hierarchy's mount.
    mount: PathBuf,
    dir: PathBuf,
    v2: bool,
}

pub use graceful_common::mountinfo::memory_hierarchy;

/// The calling process's memory cgroup, found once: a process does not
/// change cgroups, and the search below may walk the tree.
fn own() -> Option<&'static Own> {
    static OWN: OnceLock<Option<Own>> = OnceLock::new();
    OWN.get_or_init(|| {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let own = own_dir(&mountinfo, &cgroups)?;
        let pid = std::process::id();
        if lists(&own.dir, pid) {
            return Some(own);
        }
        // In a private cgroup namespace (a pod's default on cgroup v2)
        // /proc/self/cgroup says `/`, while the tree the DaemonSet mounts
        // is the host's: find the cgroup that lists this process.
        let dir = find_by_pid(&own.mount, pid)?;
        Some(Own { dir, ..own })
    })
    .as_ref()
}

/// Whether `dir`'s cgroup.procs lists `pid`.
fn lists(dir: &Path, pid: u32) -> bool {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .is_ok_and(|procs| procs.lines().any(|l| l.trim().parse() == Ok(pid)))
}

/// The cgroup under `mount` whose cgroup.procs lists `pid`, depth first.
/// A node has hundreds to a few thousand cgroups; the walk stops at 100,000.
fn find_by_pid(mount: &Path, pid: u32) -> Option<PathBuf> {
    let mut stack = vec![mount.to_path_buf()];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        seen += 1;
        if seen > 100_000 {
            return None;
        }
        if lists(&dir, pid) {
            return Some(dir);
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        stack.extend(
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path()),
        );
    }
    None
}

/// The calling process's memory cgroup, on [`memory_hierarchy`], as
/// /proc/self/cgroup names it.
fn own_dir(mountinfo: &str, cgroups: &str) -> Option<Own> {
    let (mount, v2) = memory_hierarchy(mountinfo)?;
    // /proc/self/cgroup: `hierarchy-id:controllers:path`.
    let path_of = |pred: &dyn Fn(&str, &str) -> bool| {
        cgroups.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, ctrl, path) = (f.next()?, f.next()?, f.next()?);
            pred(id, ctrl).then(|| path.trim_start_matches('/').to_string())
        })
    };
    let path = if v2 {
        path_of(&|id, ctrl| id == "0" && ctrl.is_empty())?
    } else {
        path_of(&|_, ctrl| ctrl.split(',').any(|c| c == "memory"))?
    };
    Some(Own {
        dir: mount.join(path),
        mount,
        v2,
    })
}

/// The smallest limit in `file` from `dir` up to the hierarchy's root
/// `mount`: a parent's limit binds its children.
fn tightest(mount: &Path, dir: &Path, file: &str) -> Option<u64> {
    let mut best: Option<u64> = None;
    let mut d = Some(dir);
    while let Some(cur) = d.filter(|c| c.starts_with(mount)) {
        if let Some(l) = std::fs::read_to_string(cur.join(file))
            .ok()
            .and_then(|s| parse_limit(&s))
        {
            best = Some(best.map_or(l, |b| b.min(l)));
        }
        d = cur.parent();
    }
    best
}

/// A limit file: `max` (v2) or a page-rounded 2^63 (v1) means none.
fn parse_limit(s: &str) -> Option<u64> {
    let s = s.trim();
    if s == "max" {
        return None;
    }
    s.parse::<u64>().ok().filter(|&v| v < 1 << 62)
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `alloc` of the `TCP:` line of /proc/net/sockstat: full TCP sockets
/// allocated on the node, counted across every network namespace (the
/// other figures of that file are the reader's namespace only).
fn tcp_allocated(sockstat: &str) -> Option<u64> {
    let line = sockstat.lines().find(|l| l.starts_with("TCP:"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == "alloc")?;
    words.get(at + 1)?.parse().ok()
}

#[cfg(test)]
mod tests;
