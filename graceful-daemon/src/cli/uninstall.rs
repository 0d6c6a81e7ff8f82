//! `graceful uninstall`: what an operator runs to remove graceful from a node.

use crate::{
    agent::claim,
    bpf::{loader, paths::PinDir},
};

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(pins: &PinDir, _args: Args) -> anyhow::Result<i32> {
    super::require_root("graceful uninstall")?;
    if !pins.exists() {
        println!("nothing to remove: {} does not exist", pins.root().display());
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
    Ok(0)
}
