//! `cargo xtask docs`: writes docs/cli.md from the CLI's own definitions
//! (`graceful __reference`). A unit test in graceful-daemon fails while the
//! committed file differs.

use std::process::Command;

use xtask::util::{self, cargo, output, run};

pub fn run_docs() -> anyhow::Result<()> {
    run(cargo().args(["build", "-p", "graceful-daemon", "--bin", "graceful"]))?;
    let bin = util::target_dir().join("debug/graceful");
    let md = output(Command::new(&bin).arg("__reference"))?;
    let path = util::workspace_root().join("docs/cli.md");
    std::fs::write(&path, md)?;
    println!("wrote {}", path.display());
    Ok(())
}
