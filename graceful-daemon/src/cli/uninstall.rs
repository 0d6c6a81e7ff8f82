//! `graceful uninstall`: what an operator runs to remove graceful from a node.

use std::path::{Path, PathBuf};

use crate::{
    agent::{claim, gate_dir},
    continuity::handover::give,
    kernel::bpf::{loader, paths::PinDir},
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also remove what the agent put in this gate directory (the host's
    /// --gate-dir: graceful-wait, the gate's socket, the handover's
    /// socket), and the directory once empty. Anything else in it stays.
    #[arg(long)]
    pub gate_dir: Option<PathBuf>,
}

/// What an agent creates in its gate directory.
const GATE_FILES: [&str; 2] = [gate_dir::WAIT_BIN, gate_dir::SOCKET];

pub fn run(pins: &PinDir, args: Args) -> anyhow::Result<i32> {
    super::require_root("graceful uninstall")?;
    if !pins.exists() {
        println!("nothing to remove: {} does not exist", pins.root().display());
        if let Some(dir) = &args.gate_dir {
            clear_gate_dir(dir)?;
        }
        return Ok(0);
    }
    // The pins are the running agent's; pulled from under it, they would
    // take its counts with them.
    if let Some(pid) = claim::pins_held(pins)? {
        let who = pid.map_or_else(|| "an agent".to_string(), |p| format!("the agent with pid {p}"));
        anyhow::bail!(
            "{who} runs on {}: stop it first (delete the DaemonSet), then uninstall",
            pins.root().display()
        );
    }
    let removed = loader::uninstall(pins)
        .map_err(|e| anyhow::anyhow!("cannot remove pins under {}: {e}", pins.root().display()))?;
    println!(
        "removed {} pins and {}: graceful's programs are detached once no agent holds them",
        removed.len(),
        pins.root().display()
    );
    if let Some(dir) = &args.gate_dir {
        clear_gate_dir(dir)?;
    }
    Ok(0)
}

/// Removes the agent's files from `dir`, then `dir` if nothing else is
/// left in it. Pods that still mount it see their hook's binary go: their
/// hooks then fail to start, and their SIGTERM comes at once.
fn clear_gate_dir(dir: &Path) -> anyhow::Result<()> {
    if !dir.exists() {
        println!("nothing to remove: {} does not exist", dir.display());
        return Ok(());
    }
    let handover = dir.join(give::DIR);
    let mut removed = Vec::new();
    let mut paths: Vec<PathBuf> = GATE_FILES.iter().map(|f| dir.join(f)).collect();
    paths.push(handover.join(give::SOCKET));
    for path in paths {
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => anyhow::bail!("cannot remove {}: {e}", path.display()),
        }
    }
    let _ = std::fs::remove_dir(&handover);
    let left: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    if left.is_empty() {
        std::fs::remove_dir(dir).map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", dir.display()))?;
        println!("removed {} files and {}", removed.len(), dir.display());
    } else {
        println!(
            "removed {} files from {}; left what graceful did not put there: {}",
            removed.len(),
            dir.display(),
            left.join(", ")
        );
    }
    Ok(())
}
