//! The memory bench's workers: one process per cgroup, each holding its
//! share of the connections to itself.

use std::{
    process::{Child, ChildStdin, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::PORT;

/// The worker processes; dropping closes their stdin (they exit) and reaps them.
pub(super) struct Workers {
    pub(super) children: Vec<(Child, Option<ChildStdin>)>,
}

impl Workers {
    /// Closes every worker's stdin and waits for them all to exit.
    pub(super) fn stop(&mut self) {
        for (_, stdin) in &mut self.children {
            stdin.take();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for (child, _) in &mut self.children {
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
        self.children.clear();
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// 127.200.x.y, distinct per cgroup (up to 250 × 250).
pub(super) fn worker_addr(i: usize) -> String {
    format!("127.200.{}.{}:{PORT}", i / 250, i % 250 + 1)
}

pub(super) fn spawn_worker(dir: &std::path::Path, addr: &str, connections: usize) -> anyhow::Result<Child> {
    // This very binary, even if a rebuild has replaced it on disk since.
    let mut cmd = Command::new("/proc/self/exe");
    cmd.args(["bench", "memory-worker", "--listen", addr, "--connections"])
        .arg(connections.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    graceful_test_support::cgroup::start_in(&mut cmd, dir)?;
    cmd.spawn()
        .with_context(|| format!("start a worker in {}", dir.display()))
}

pub(super) fn raise_own_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointers to an rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
