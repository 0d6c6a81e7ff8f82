//! What graceful's integration tests (`graceful-tests`) and its tasks
//! (the lab, `lab/`) share, each once:
//!
//! - [`agent`]: `graceful daemon` as a child process on a pin directory of
//!   its own: started, stopped within a bound, uninstalled;
//! - [`cgroup`]: cgroup v2 directories made and removed, processes started
//!   inside one;
//! - [`http_response`]: one HTTP/1.1 response read from a kept connection;
//! - [`memcg`]: a memory cgroup (v2, or the v1 hierarchy of a hybrid host);
//! - [`process`]: children waited for within a bound, and children driven
//!   one line at a time (the tests' peers, the demo's client);
//! - [`sockets`]: an RST close, room for many descriptors, a mesh proxy's
//!   SO_ORIGINAL_DST and bound connect;
//! - [`ss`]: the kernel's own count of a cgroup's live connections;
//! - [`tinyfs`]: a 64 KiB tmpfs, a disk that fills;
//! - [`poll`]: the one polling loop;
//! - the programs' clock and the mountinfo parser, from graceful-common.
//!
//! Std and libc only: the lab builds the agent (through xtask), so nothing here depends on it.

pub mod agent;
pub mod cgroup;
pub mod http_response;
pub mod memcg;
pub mod process;
pub mod sockets;
pub mod ss;
pub mod tinyfs;

pub use graceful_common::{clock::monotonic_ns, mountinfo};

use std::sync::atomic::{AtomicU32, Ordering};

/// A name unique to this process and call: `graceful-test-<kind>-<pid>-<n>`.
pub fn unique(kind: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "graceful-test-{}-{}-{}",
        kind,
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// The first `name` on `PATH`.
pub fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Whether this process runs as root: what loading the programs, making
/// cgroups and network namespaces needs.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Calls `f` every `every` until it returns `Some`, for at most `limit`:
/// the one polling loop of the tests and the lab, which say in their own
/// way what they waited for.
pub fn poll<T>(
    limit: std::time::Duration,
    every: std::time::Duration,
    mut f: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}
