//! The agent's stop, once told to: the httpGet drains in progress
//! finished first (their hooks cannot reconnect), the last Events posted,
//! every task stopped within a bound, the API's socket removed. The
//! claim goes last, with the process's end (see `services`).

use std::{path::Path, time::Duration};

use tokio::signal::unix::Signal;
use tracing::{info, warn};

use super::{tasks::Tasks, Settings, STOP_LIMIT};
use crate::{continuity::handover::retire, drain::hook::Hooks, node::kube::events::EventPoster};

/// The stop: the httpGet drains in progress finished (within
/// `--stop-hold`), the last Events posted, every task stopped within the
/// bound, the API's socket removed.
pub async fn stop(
    tasks: Tasks,
    hooks: &Hooks,
    events: Option<&EventPoster>,
    settings: &Settings,
    api_socket: &Path,
    term: &mut Signal,
    int: &mut Signal,
) {
    retire::STOPPING.store(true, std::sync::atomic::Ordering::Release);
    hold_http_drains(hooks, settings.stop_hold, term, int).await;
    // The Events of the drains released last (a stopping agent's last
    // act for their pods).
    if let Some(events) = events {
        let left = events.flush(Duration::from_secs(2)).await;
        if left > 0 {
            warn!(
                events = left,
                "stopping with Events still being posted; they are lost"
            );
        }
    }
    let left = tasks.shutdown(STOP_LIMIT).await;
    if !left.is_empty() {
        warn!(tasks = ?left, limit_s = STOP_LIMIT.as_secs(), "agent tasks still ran past the stop limit");
    }
    // The API's socket goes with it; the gate's stays for pods that
    // mount its directory (the next agent binds it again).
    let _ = std::fs::remove_file(api_socket);
}

/// A stopping agent serves on (every task still runs) while httpGet
/// drains are in progress, for at most `limit`: their hooks' connections
/// would be cut, and the kubelet does not retry a hook. A second signal
/// stops it at once.
async fn hold_http_drains(hooks: &Hooks, limit: Duration, term: &mut Signal, int: &mut Signal) {
    let running = || hooks.held_for_good();
    if running() == 0 || limit.is_zero() {
        return;
    }
    info!(
        drains = running(),
        limit_s = limit.as_secs_f64(),
        "finishing the httpGet drains in progress before stopping: their hooks cannot reconnect"
    );
    let deadline = tokio::time::Instant::now() + limit;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    while running() > 0 {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::time::sleep_until(deadline) => {
                warn!(drains = running(), limit_s = limit.as_secs_f64(), "httpGet drains still ran at --stop-hold: their hooks fail open now");
                return;
            }
            _ = term.recv(), if running() > 0 => { warn!(drains = running(), "second SIGTERM: stopping now"); return }
            _ = int.recv(), if running() > 0 => { warn!(drains = running(), "SIGINT: stopping now"); return }
        }
    }
    info!("the httpGet drains in progress are finished");
}
