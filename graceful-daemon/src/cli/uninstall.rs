//! `graceful uninstall`: what an operator runs to remove graceful from a node.

use crate::bpf::{loader, paths::PinDir};

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(pins: &PinDir, _args: Args) -> anyhow::Result<i32> {
    super::require_root("graceful uninstall")?;
    if !pins.exists() {
        println!("nothing to remove: {} does not exist", pins.root().display());
        return Ok(0);
    }
    let removed = loader::uninstall(pins)
        .map_err(|e| anyhow::anyhow!("cannot remove pins under {}: {e}", pins.root().display()))?;
    println!(
        "removed {} pins and {}: graceful's programs are detached once no agent holds them",
        removed.len(),
        pins.root().display()
    );
    Ok(0)
}
