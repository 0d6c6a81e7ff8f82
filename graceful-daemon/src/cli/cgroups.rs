//! `graceful cgroups`: counts per cgroup, read straight from the pinned maps,
//! so it works while the agent is down.

use super::table::Output;
pub use graceful_api::views::cgroups::render;

pub use crate::kernel::counted::{rows, Row};
use crate::{kernel::bpf::paths::PinDir, kernel::cgroupfs::Hierarchy};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format. `json` is a stable contract for scripts.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Only this cgroup and the ones below it (path relative to the cgroup2 mount, e.g. /kubepods.slice).
    #[arg(long)]
    pub path: Option<String>,
    /// Include cgroups with no live connection and no listener.
    #[arg(short, long)]
    pub all: bool,
}

pub fn run(pins: &PinDir, args: Args) -> anyhow::Result<i32> {
    super::require_root("graceful cgroups")?;
    let hier = Hierarchy::discover()?;
    if let Some(p) = &args.path {
        hier.id_of(p)?;
    }
    let mut rows = rows(pins, &hier)?;
    rows.retain(|r| r.shown(args.path.as_deref(), args.all));
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        Output::Table => print!("{}", render(&rows)),
    }
    Ok(0)
}
