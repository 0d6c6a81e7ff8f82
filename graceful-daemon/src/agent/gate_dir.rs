//! The gate directory on the host: `graceful-wait` for pods' hooks, and
//! the gate's socket.

use std::path::{Path, PathBuf};

use tracing::warn;

/// The gate socket's name in the gate directory.
pub const SOCKET: &str = "gate.sock";
/// The hook's binary in the gate directory, which pods mount at /graceful.
pub const WAIT_BIN: &str = "graceful-wait";

/// Puts `graceful-wait` and the gate socket in `dir`: the socket bound
/// anew, or the one a handover brought (`handed`), bound by the previous
/// agent and with its queued connections.
pub fn open(
    dir: &Path,
    wait_bin: Option<PathBuf>,
    handed: Option<std::os::fd::OwnedFd>,
) -> anyhow::Result<tokio::net::UnixListener> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create gate directory {}: {e}", dir.display()))?;
    let src = match wait_bin {
        Some(p) => Some(p),
        None => std::env::current_exe()
            .map_err(|e| {
                anyhow::anyhow!("cannot find this executable to place graceful-wait beside it: {e}")
            })?
            .parent()
            .map(|d| d.join(WAIT_BIN)),
    };
    match src.filter(|p| p.exists()) {
        Some(src) => place(&src, dir)?,
        None => {
            warn!(dir = %dir.display(), "graceful-wait not found beside the agent (use --wait-bin): pods cannot run the hook from the gate directory")
        }
    }
    if let Some(fd) = handed {
        let l = std::os::unix::net::UnixListener::from(fd);
        l.set_nonblocking(true)?;
        return Ok(tokio::net::UnixListener::from_std(l)?);
    }
    let sock = dir.join(SOCKET);
    Ok(crate::serve::gate::listener::bind(&sock)?)
}

/// Copies `src` into `dir` as `graceful-wait`: to a temporary name, then
/// renamed, so a pod starting its hook never sees half a binary. A copy
/// that fails (a full disk) leaves no temporary file behind.
pub fn place(src: &Path, dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = dir.join(".graceful-wait.tmp");
    let dest = dir.join(WAIT_BIN);
    let result = std::fs::copy(src, &tmp)
        .map_err(|e| anyhow::anyhow!("cannot copy {} to {}: {e}", src.display(), tmp.display()))
        .and_then(|_| {
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| anyhow::anyhow!("cannot make {} executable: {e}", tmp.display()))
        })
        .and_then(|()| {
            std::fs::rename(&tmp, &dest)
                .map_err(|e| anyhow::anyhow!("cannot rename {} to {}: {e}", tmp.display(), dest.display()))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests;
