//! After a handover the giver retires: it replaces itself (execve) with
//! `graceful __retired`, which holds nothing of the node. Every descriptor
//! of the agent is close-on-exec, so the exec closes them all at once and
//! runs no destructor: no drain of the agent cleans up what the taker now
//! runs, no connection is shut down (the taker holds each one), and the
//! agent's locks are free for the taker.
//!
//! Its pod may be restarted before it is deleted (a probe, a crash of the
//! retired process): a marker beside the API socket, in the pod's own
//! directory, says the node was handed over; an agent that starts, finds
//! it, and sees another agent holding the pins retires at once instead of
//! taking the node back.

use std::{
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    time::Duration,
};

use tracing::{error, info};

use crate::kernel::bpf::paths::PinDir;

/// Set once the agent is told to stop: retired then, it exits at once
/// (its pod is going anyway) instead of waiting for a signal it already had.
pub static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The marker's name beside the API socket.
const MARKER: &str = "handed-over";

/// What the retired process needs.
#[derive(Clone, Debug)]
pub struct Plan {
    pub api_socket: PathBuf,
    /// Where the kubelet's probes ask (the metrics address, else the API's).
    pub probe_addr: String,
    pub pins: PinDir,
}

fn marker(api_socket: &Path) -> PathBuf {
    api_socket.with_file_name(MARKER)
}

impl Plan {
    /// Writes the marker and becomes `graceful __retired`. Returns only
    /// if the exec failed, and then ends the process: the taker serves.
    pub fn exec(&self, taker: u32) -> ! {
        let _ = std::fs::write(marker(&self.api_socket), format!("{taker}\n"));
        let _ = std::fs::remove_file(&self.api_socket);
        let exe = std::env::current_exe().unwrap_or_else(|_| "/proc/self/exe".into());
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("--api-socket")
            .arg(&self.api_socket)
            .arg("--pin-dir")
            .arg(self.pins.root())
            .args(["__retired", "--probe-addr", &self.probe_addr]);
        if STOPPING.load(std::sync::atomic::Ordering::Acquire) {
            cmd.arg("--stopping");
        }
        let e = cmd.exec();
        error!(error = %e, "cannot become the retired process; exiting (the successor serves)");
        std::process::exit(0)
    }
}

/// Whether an agent starting with `api_socket` should retire at once: its
/// pod handed the node over, and another agent (`pins_held`) holds the
/// pins. A stale marker is removed.
pub fn handed_over(api_socket: &Path, pins_held: bool) -> bool {
    let m = marker(api_socket);
    if !m.exists() {
        return false;
    }
    if !pins_held {
        let _ = std::fs::remove_file(&m);
    }
    pins_held
}

/// `graceful __retired`: holds nothing, serves nothing of the node. In a
/// pod, it answers the probes on the API address (live, not ready) so the
/// kubelet does not restart it while its pod is being replaced. Ends on
/// SIGTERM or SIGINT, removing the marker.
pub fn run(api_socket: &Path, probe_addr: &str, stopping: bool) -> anyhow::Result<i32> {
    if stopping {
        info!("retired: this node's agent runs in its successor; this one was stopping, and stops");
        return Ok(0);
    }
    info!("retired: this node's agent runs in its successor; waiting for this pod's deletion");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let in_pod = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
        let probes = if in_pod && probe_addr != "off" {
            match crate::listen::tcp(probe_addr).await {
                Ok(l) => Some(tokio::spawn(probes(l))),
                Err(e) => {
                    error!(addr = probe_addr, error = %e, "retired: cannot answer the probes");
                    None
                }
            }
        } else {
            None
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        if let Some(p) = probes {
            p.abort();
        }
        let _ = std::fs::remove_file(marker(api_socket));
        info!("retired: stopped");
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(0)
}

/// Connections the retired process answers at once; past them, the next
/// waits in the listener's queue (a flood holds no more of the node).
const RETIRED_CONNECTIONS: usize = 32;

/// `/healthz` 200 and everything else 503, one request per connection.
async fn probes(l: tokio::net::TcpListener) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(RETIRED_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let Ok((mut s, _)) = l.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        tokio::spawn(async move {
            let _slot = slot;
            let mut buf = [0u8; 1024];
            let n = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf))
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or(0);
            let live = buf[..n].starts_with(b"GET /healthz");
            let (status, body) = if live {
                ("200 OK", "retired: handed over to this node's new agent\n")
            } else {
                (
                    "503 Service Unavailable",
                    "retired: handed over to this node's new agent\n",
                )
            };
            let resp = format!(
                "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(resp.as_bytes()).await;
        });
    }
}
