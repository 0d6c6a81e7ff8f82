//! The gate directory on the host: `graceful-wait` for pods' hooks, and
//! the gate's socket.

use std::path::{Path, PathBuf};

use tracing::warn;

/// The gate socket's name in the gate directory.
pub const SOCKET: &str = "gate.sock";

/// Puts `graceful-wait` and the gate socket in `dir`.
pub fn open(dir: &Path, wait_bin: Option<PathBuf>) -> anyhow::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create gate directory {}: {e}", dir.display()))?;
    let src = match wait_bin {
        Some(p) => Some(p),
        None => std::env::current_exe()?.parent().map(|d| d.join("graceful-wait")),
    };
    match src.filter(|p| p.exists()) {
        Some(src) => {
            // Copy then rename: a pod starting its hook never sees half a binary.
            let tmp = dir.join(".graceful-wait.tmp");
            std::fs::copy(&src, &tmp)?;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
            std::fs::rename(&tmp, dir.join("graceful-wait"))?;
        }
        None => {
            warn!(dir = %dir.display(), "graceful-wait not found beside the agent (use --wait-bin): pods cannot run the hook from the gate directory")
        }
    }
    let sock = dir.join(SOCKET);
    Ok(crate::gate::listener::bind(&sock)?)
}
