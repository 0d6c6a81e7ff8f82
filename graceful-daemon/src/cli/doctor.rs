//! `graceful doctor`: can this node run graceful? Each problem is one line
//! saying what to do; the exit status is non-zero if the agent cannot work.
//! The checks are [`crate::node::doctor`]'s; the running agent also serves them
//! (`/v1/doctor`, which `kubectl graceful doctor` reads).

use crate::{
    kernel::bpf::paths::PinDir,
    node::doctor::{findings, verdict},
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Skip the trial load of the programs.
    #[arg(long)]
    pub no_load: bool,
    /// One JSON array of the findings (`level`, `check`, `message`), as
    /// `/v1/doctor` serves them: what `kubectl graceful preflight` reads
    /// from each node's pod. The exit status is the same.
    #[arg(long)]
    pub json: bool,
}

pub fn run(pins: &PinDir, api: &std::path::Path, args: Args) -> anyhow::Result<i32> {
    // The running agent's view of the pods, for what a mesh does to their gate.
    let pods = super::client::get::<Vec<crate::node::resolver::counts::PodView>>(api, "/v1/pods").ok();
    let findings = findings(pins, pods.as_deref(), !args.no_load);
    let failed = verdict(&findings);
    if args.json {
        println!("{}", serde_json::to_string(&findings)?);
    } else {
        for f in &findings {
            println!("{}", f.line());
        }
        if let Some(v) = failed {
            println!("{v}");
        }
    }
    Ok(i32::from(failed.is_some()))
}
