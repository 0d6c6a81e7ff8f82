//! `graceful at-risk`: the workloads of this node whose pods exited (or
//! were deleted) before their inbound connections drained, worst first,
//! from the daemon's recent terminating reports. It ranks what the agent
//! reports on: pods that opted in, and those `--report-namespaces` and
//! `--report-selector` widen the scope to. `kubectl graceful at-risk`
//! ranks every node's.

use graceful_api::views::at_risk::{rank, render, Seen};

use super::table::Output;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only workloads of this namespace.
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// `json`: the ranked workloads, one object each.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

pub fn run(api: &std::path::Path, args: Args) -> anyhow::Result<i32> {
    super::require_root("graceful at-risk")?;
    let d = super::drains::fetch(api)?;
    let reports = d
        .terminated
        .iter()
        .filter(|r| args.namespace.as_ref().is_none_or(|ns| *ns == r.namespace))
        .map(Seen::from);
    let ranked = rank(reports);
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&ranked)?),
        Output::Table => print!("{}", render(&ranked)),
    }
    Ok(0)
}
