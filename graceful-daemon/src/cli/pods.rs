//! `graceful pods` and `graceful pod`: live connections per pod and per
//! container.
//!
//! They ask the running daemon's local API, which knows the pods' names
//! (from the Kubernetes API) and their state (Terminating, Draining);
//! `--watch` follows its event stream. Without a daemon they fall back to
//! the pinned maps and one walk of the cgroup tree: pods by uid then, and a
//! one-line note on stderr says so.

use std::{io::IsTerminal, path::Path, time::Duration};

use serde::Deserialize;

pub use graceful_api::views::pods::{pod_detail, pods_rows, pods_table, warnings};

use super::client::{self, ClientError};
use crate::{
    kernel::bpf::{maps::Counters, paths::PinDir},
    kernel::cgroupfs::Hierarchy,
    node::resolver::{
        counts::{find, sort_pods, views, PodView},
        index::PodIndex,
    },
};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// NAMESPACE, POD, CONTAINERS, INBOUND, OUTBOUND, LISTEN, STATE.
    #[default]
    Table,
    /// The table with the uid, QoS class, pod cgroup, and IGNORED: the
    /// part of INBOUND a drain's exclusions leave out.
    Wide,
    /// A stable contract for scripts.
    Json,
}

#[derive(Debug, clap::Args)]
pub struct PodsArgs {
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Only pods of this namespace (needs the names from the Kubernetes API).
    #[arg(short, long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Pods of every namespace. This is the default: the agent shows the
    /// whole node; the flag is accepted as kubectl users type it.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Print again whenever the pods change (JSON: one array per line), until
    /// interrupted. Follows the daemon's event stream; without a daemon,
    /// reprints every second.
    #[arg(short, long)]
    pub watch: bool,
}

#[derive(Debug, clap::Args)]
pub struct PodArgs {
    /// The pod: its uid (a unique prefix will do; `_` for `-` as in cgroup
    /// names is fine), or namespace/name once names are known.
    pub pod: String,
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

fn note(why: &ClientError) -> String {
    format!("graceful: {why}: showing pod uids, with counts from the pinned maps and the cgroup tree (names and states need the daemon)")
}

/// Every pod on the node with its counts, from the pins and the tree.
fn snapshot(pins: &PinDir, hier: &Hierarchy) -> anyhow::Result<Vec<PodView>> {
    let counters = Counters::open_checked(pins)?.all();
    let index = PodIndex::build(hier);
    let mut pods = views(&index, &counters);
    sort_pods(&mut pods);
    Ok(pods)
}

/// The pods from the daemon, or from the pins when no daemon runs.
fn pods_now(pins: &PinDir, api: &Path, noted: &mut bool) -> anyhow::Result<Vec<PodView>> {
    match client::get::<Vec<PodView>>(api, "/v1/pods") {
        Ok(p) => Ok(p),
        Err(e @ ClientError::Down(_)) => {
            if !std::mem::replace(noted, true) {
                eprintln!("{}", note(&e));
            }
            snapshot(pins, &Hierarchy::discover()?)
        }
        Err(e) => Err(e.into()),
    }
}

fn render(pods: &mut Vec<PodView>, args: &PodsArgs, one_line: bool) -> anyhow::Result<String> {
    if let Some(ns) = &args.namespace {
        pods.retain(|p| p.namespace.as_deref() == Some(ns.as_str()));
    }
    Ok(match args.output {
        Output::Json if one_line => serde_json::to_string(&pods)?,
        Output::Json => serde_json::to_string_pretty(&pods)?,
        Output::Table | Output::Wide => pods_table(pods, args.output == Output::Wide),
    })
}

fn show(text: &str, args: &PodsArgs) {
    if args.output == Output::Json {
        println!("{text}");
    } else if std::io::stdout().is_terminal() {
        // Home and clear: a refreshing screen, as `watch` gives.
        println!("\x1b[H\x1b[2J{text}");
    } else {
        println!("{text}\n");
    }
}

pub fn run_pods(pins: &PinDir, api: &Path, args: PodsArgs) -> anyhow::Result<i32> {
    super::require_root("graceful pods")?;
    let mut noted = false;
    if !args.watch {
        let mut pods = pods_now(pins, api, &mut noted)?;
        println!("{}", render(&mut pods, &args, false)?);
        return Ok(0);
    }
    match client::stream(api, "/v1/events") {
        Ok(mut events) => {
            // Each `pods` line is a new snapshot; other lines are events.
            #[derive(Deserialize)]
            struct Line {
                #[serde(rename = "type")]
                kind: String,
                #[serde(default)]
                pods: Vec<PodView>,
            }
            while let Some(line) = events.next_line()? {
                let Ok(mut l) = serde_json::from_str::<Line>(&line) else {
                    continue;
                };
                if l.kind == "pods" {
                    show(&render(&mut l.pods, &args, true)?, &args);
                }
            }
            anyhow::bail!("the graceful daemon ended the event stream (it stopped or restarted): run again")
        }
        Err(ClientError::Down(_)) => loop {
            let mut pods = pods_now(pins, api, &mut noted)?;
            show(&render(&mut pods, &args, true)?, &args);
            std::thread::sleep(Duration::from_secs(1));
        },
        Err(e) => Err(e.into()),
    }
}

pub fn run_pod(pins: &PinDir, api: &Path, args: PodArgs) -> anyhow::Result<i32> {
    super::require_root("graceful pod")?;
    let mut noted = false;
    let pods = pods_now(pins, api, &mut noted)?;
    let pod = find(&pods, &args.pod).map_err(anyhow::Error::msg)?;
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(pod)?),
        Output::Table | Output::Wide => print!("{}", pod_detail(pod)),
    }
    Ok(0)
}

#[cfg(test)]
mod tests;
