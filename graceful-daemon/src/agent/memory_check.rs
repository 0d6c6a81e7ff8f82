//! The agent's memory budget, checked at start and on every collection
//! round (its file descriptors are raised once at start: see
//! [`crate::kernel::nofile`]).

use tracing::{info, warn};

use crate::kernel::memcg::{self, Budget};

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
