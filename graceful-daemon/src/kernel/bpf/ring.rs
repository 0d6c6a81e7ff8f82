//! The event ring: what the kernel says about the watched cgroups (an
//! inbound change, a container's exit), read by one task and fanned out to
//! every drain and terminating pod.

use aya::maps::{Map, MapData, RingBuf};
use graceful_common::{names, Event};
use tokio::{io::unix::AsyncFd, sync::broadcast, task::AbortHandle};
use tracing::warn;

use super::{error::MapError, open::open_path, paths::PinDir};

/// The reader task, stopped when this drops.
pub struct Reader {
    task: AbortHandle,
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the task that reads the event ring and broadcasts each event.
/// It wakes only when the kernel writes: no polling interval. Must be
/// called inside a tokio runtime.
pub fn spawn(pins: &PinDir) -> Result<(broadcast::Sender<Event>, Reader), MapError> {
    let path = pins.map(names::EVENTS);
    let ring = RingBuf::try_from(Map::RingBuf(open_path(&path)?))
        .map_err(|source| MapError::Open { path, source })?;
    // SAFETY: the ring owns its fd, which stays open for as long as the
    // AsyncFd (which owns the ring) is registered.
    let mut fd = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(|e| MapError::Poll(e.into()))?;
    let (tx, _) = broadcast::channel(4096);
    let out = tx.clone();
    let task = tokio::spawn(async move {
        loop {
            let mut guard = match fd.readable_mut().await {
                Ok(g) => g,
                Err(e) => {
                    warn!(error = %e, "event ring poll failed; drains fall back to their timers");
                    return;
                }
            };
            drain(guard.get_inner_mut(), &out);
            // Edge-triggered: a record committed between the drain above and
            // this clear would leave no wake-up behind, so drain once more
            // after clearing. Anything later wakes us again.
            guard.clear_ready();
            drain(guard.get_inner_mut(), &out);
        }
    });
    Ok((
        tx,
        Reader {
            task: task.abort_handle(),
        },
    ))
}

/// Reads every record in the ring and broadcasts it.
fn drain(ring: &mut RingBuf<MapData>, out: &broadcast::Sender<Event>) {
    while let Some(item) = ring.next() {
        if item.len() >= std::mem::size_of::<Event>() {
            // SAFETY: the kernel wrote an Event; read unaligned to be safe.
            let ev = unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<Event>()) };
            let _ = out.send(ev);
        }
    }
}
