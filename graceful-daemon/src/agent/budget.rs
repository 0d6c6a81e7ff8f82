//! The agent's budgets: its memory, checked at start and on every
//! collection round, and its file descriptors, raised once at start.

use tracing::{info, warn};

use crate::memcg::{self, Budget};

/// Logs the agent's memory budget on the first call, then warns once when
/// its memory cgroup gets short (see `memcg`): the kernel charges it for
/// every socket on the node, and past its limit the agent is OOM-killed.
/// Says so again when it is no longer short. `was_short`: None before the
/// first call.
pub fn check(was_short: &mut Option<bool>) {
    let Some(b) = Budget::own() else { return };
    let short = b.is_short();
    let (usage_bytes, limit_bytes, tcp_sockets) = (b.usage, b.limit, b.tcp_sockets);
    match (*was_short, short) {
        (None | Some(false), true) => warn!(
            usage_bytes,
            limit_bytes,
            tcp_sockets,
            "{}: raise the agent's memory limit (deploy/base/daemonset.yaml), or the kernel will OOM-kill it as the node's sockets grow",
            b.describe()
        ),
        (None, false) => info!(usage_bytes, limit_bytes, tcp_sockets, "{}", b.describe()),
        (Some(true), false) => info!(
            usage_bytes,
            limit_bytes,
            "memory cgroup back under {} % of its limit",
            memcg::SHORT_PCT
        ),
        (Some(_), _) => {}
    }
    *was_short = Some(short);
}

/// Raises the soft limit on open files to the hard one (which a container
/// runtime usually sets far above the soft 1024), and returns the limit in
/// effect: the gate's bounds are taken from it.
pub fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live rlimit for the kernel to fill, then read.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: as above; a refusal leaves the old limit, which is read back.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        } else {
            warn!(soft = lim.rlim_cur, hard = lim.rlim_max, error = %std::io::Error::last_os_error(), "cannot raise the open-file limit");
        }
    }
    lim.rlim_cur
}
