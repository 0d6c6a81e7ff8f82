//! The giver: the running agent, listening on the handover socket in the
//! gate directory. One taker at a time: its uid and its proof checked,
//! everything frozen and sent, and on its verdict either retirement (the
//! taker serves from now on) or a thaw (this agent serves on, as if
//! nothing happened).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use tracing::{error, info, warn};

use super::{
    fds::{self, Channel},
    held::Registry,
    peer, retire,
    wire::{self, Done, Hello, Offer, RecordFrame, Verdict},
};
use crate::kernel::bpf::paths::PinDir;

/// How long accepted connections get to become held hooks before the
/// snapshot: a hook that is still sending its request is cut (its
/// `graceful-wait` reconnects; a kubelet's hook fails open).
pub const SETTLE: Duration = Duration::from_millis(500);
/// How long each frame may take either way.
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(5);

/// The handover socket's directory in the gate directory (mode 0700).
pub const DIR: &str = ".handover";
/// Its name there.
pub const SOCKET: &str = "agent.sock";

/// The handover socket of the agent whose gate directory is `gate_dir`.
pub fn socket_path(gate_dir: &Path) -> PathBuf {
    gate_dir.join(DIR).join(SOCKET)
}

/// Listens for a taker on a thread of its own until the process ends.
pub fn spawn(
    registry: Arc<Registry>,
    pins: PinDir,
    gate_dir: &Path,
    retire: retire::Plan,
) -> anyhow::Result<()> {
    let dir = gate_dir.join(DIR);
    std::fs::create_dir_all(&dir).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| anyhow::anyhow!("cannot restrict {} to this agent: {e}", dir.display()))?;
    }
    let path = dir.join(SOCKET);
    let listener =
        fds::listen(&path).map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", path.display()))?;
    info!(socket = %path.display(), "handover: a successor on this node takes over from here");
    let rt = tokio::runtime::Handle::current();
    std::thread::Builder::new()
        .name("handover".into())
        .spawn(move || loop {
            let chan = match fds::accept(&listener) {
                Ok(c) => c,
                Err(e) => {
                    warn!(error = %e, "handover: accept failed");
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            match give(&rt, &chan, &registry, &pins) {
                Ok(Some(taker)) => {
                    registry.give();
                    retire.exec(taker);
                }
                Ok(None) => {}
                Err(e) => warn!("handover refused: {e}; this agent serves on"),
            }
        })?;
    Ok(())
}

/// Why a handover did not happen.
#[derive(Debug, thiserror::Error)]
pub enum GiveError {
    #[error("{0}")]
    Peer(#[from] peer::PeerError),
    #[error("the taker's {what}: {error}")]
    Io {
        what: &'static str,
        error: std::io::Error,
    },
    #[error("the taker's hello: {0}")]
    Wire(#[from] wire::WireError),
    #[error("the taker closed before its {0}")]
    Closed(&'static str),
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> GiveError {
    move |error| GiveError::Io { what, error }
}

/// One taker. `Ok(Some(pid))`: it took everything; `Ok(None)`: it refused
/// after the snapshot, and this agent thawed.
fn give(
    rt: &tokio::runtime::Handle,
    chan: &Channel,
    registry: &Registry,
    pins: &PinDir,
) -> Result<Option<u32>, GiveError> {
    chan.set_timeout(FRAME_TIMEOUT).map_err(io("timeout"))?;
    let (uid, pid) = chan.peer().map_err(io("credentials"))?;
    peer::check_uid(uid)?;
    let hello = chan
        .recv()
        .map_err(io("hello"))?
        .ok_or(GiveError::Closed("hello"))?;
    let proof = hello.fds.into_iter().next();
    let h: Hello = wire::decode(&hello.bytes)?;
    peer::check_proof(pins, proof)?;
    // The newest format both read (the hello's decoding refused a taker
    // that reads none of this agent's).
    let format = h.format().ok_or(wire::WireError::Version { got: h.version })?;
    info!(taker = pid, agent = %h.agent, "handover: a successor asks; pausing the gates");

    let (mut items, cut) = rt.block_on(registry.freeze(SETTLE)).map_err(io("snapshot"))?;
    // What the taker's format has no record for stays here, and closes
    // with this agent: an older release has no socket gate to serve it.
    let older = items.len();
    items.retain(|i| i.record.since() <= format);
    if items.len() < older {
        warn!(
            left = older - items.len(),
            format,
            "handover: the successor reads an older format, with no socket gate: those pods' gates close with this agent (their hooks fail open)"
        );
    }
    // Every held hook's record is built to fit a frame; one that does not
    // (a bug) stays here, and is cut with this agent, rather than fail
    // the whole handover.
    let frames: Vec<Vec<u8>> = items
        .iter()
        .map(|i| {
            wire::encode(&RecordFrame {
                version: format,
                record: i.record.clone().in_format(format),
            })
        })
        .collect();
    let fits = |f: &Vec<u8>| f.len() - 4 <= wire::MAX_FRAME;
    if let Some(f) = frames.iter().find(|f| !fits(f)) {
        error!(
            bytes = f.len(),
            "handover: a record over the frame's bound is left out (its hook is cut): a bug"
        );
    }
    let (items, frames): (Vec<_>, Vec<_>) = items.into_iter().zip(frames).filter(|(_, f)| fits(f)).unzip();
    let paused_ns = graceful_common::clock::monotonic_ns();
    if cut > 0 {
        warn!(connections = cut, "handover: connections still sending their request at the pause are cut (graceful-wait reconnects)");
    }
    let sent = (|| {
        let offer = Offer {
            version: format,
            pid: std::process::id(),
            agent: env!("CARGO_PKG_VERSION").into(),
            paused_ns,
            records: items.len() as u32,
        };
        chan.send(&wire::encode(&offer), &[]).map_err(io("offer"))?;
        for (item, frame) in items.iter().zip(&frames) {
            chan.send(frame, &item.borrowed()).map_err(io("record"))?;
        }
        let done = Done {
            version: format,
            records: items.len() as u32,
        };
        chan.send(&wire::encode(&done), &[]).map_err(io("done"))?;
        let v = chan
            .recv()
            .map_err(io("verdict"))?
            .ok_or(GiveError::Closed("verdict"))?;
        Ok::<Verdict, GiveError>(wire::decode(&v.bytes)?)
    })();
    match sent {
        Ok(v) if v.taken => {
            let hooks = items.iter().filter(|i| !i.record.is_listener()).count();
            info!(
                taker = pid,
                hooks,
                listeners = items.len() - hooks,
                pause_ms = (graceful_common::clock::monotonic_ns() - paused_ns) as f64 / 1e6,
                "handover: the successor took every listener and held hook; this agent retires"
            );
            Ok(Some(pid))
        }
        Ok(v) => {
            registry.thaw();
            error!(
                taker = pid,
                why = v.why.as_deref().unwrap_or("no reason given"),
                "handover: the successor refused what this agent sent; it serves on"
            );
            Ok(None)
        }
        Err(e) => {
            registry.thaw();
            Err(e)
        }
    }
}
