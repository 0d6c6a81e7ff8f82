//! `cargo xtask demo`: graceful counting a pod's connections as it drains,
//! on this machine, no cluster needed.
//!
//! 1. start the agent on its own pin directory (a real agent is never touched);
//! 2. make a pod cgroup in kubelet's systemd layout, run an HTTP server in it;
//! 3. open keep-alive connections to it from another cgroup;
//! 4. run the pod's preStop hook (graceful-wait, through the agent's gate),
//!    then close the clients a few at a time, watching the pod's INBOUND
//!    count fall while the hook is held, and the hook released just after
//!    the last close, with its report;
//!
//! Then it stops and removes everything (also on error or Ctrl-C), unless `--keep`.

use std::{fs, path::PathBuf, time::Duration};

use anyhow::Context as _;

use xtask::util::{self};

mod cgroup;
pub mod client;
mod drain;
mod hook;
mod ids;
mod keep;
pub(crate) mod procs;
mod session;

use keep::{cleanup_kept, state_file};
use session::Demo;

/// The demo's own pin directory, so it never disturbs a real agent
/// (which uses /sys/fs/bpf/graceful).
const PIN_DIR: &str = "/sys/fs/bpf/graceful-demo";
const CLIENT_CGROUP: &str = "/graceful-demo-client";
const POLL: Duration = Duration::from_millis(200);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Keep-alive connections to open to the pod.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u16).range(1..=1000))]
    connections: u16,
    /// Connections closed at each step of the drain.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    batch: u16,
    /// Leave the agent, the pod and its clients running to explore, and print commands to try.
    #[arg(long, conflicts_with = "cleanup")]
    keep: bool,
    /// Stop and remove what a `--keep` run left running.
    #[arg(long)]
    cleanup: bool,
    /// On a real node instead (`cargo xtask cluster`, brought up for it and down after unless it
    /// ran before, or --keep): a rolling update of deploy/examples/web, its drains shown as they
    /// happen.
    #[arg(long, conflicts_with = "cleanup")]
    cluster: bool,
}

fn demo_dir() -> PathBuf {
    util::target_dir().join("demo")
}

/// The agent's gate: graceful-wait and gate.sock, as a pod mounts them.
fn gate_dir() -> PathBuf {
    demo_dir().join("gate")
}

fn api_socket() -> PathBuf {
    demo_dir().join("api.sock")
}

fn section(title: &str) {
    println!("\n==> {title}");
}

/// The demo on the test node: graceful-cluster-demo (lab/programs).
fn on_cluster(keep: bool) -> anyhow::Result<()> {
    section("the test node: cargo xtask cluster up");
    let session = crate::cluster::Session::begin()?;
    let demo = crate::programs::build("graceful-cluster-demo", false)?;
    section("a rolling update on a real node");
    let mut cmd = std::process::Command::new(demo);
    session.point(&mut cmd);
    let result = util::run(&mut cmd);
    if keep {
        println!(
            "==> --keep: the node stays up; KUBECONFIG={}",
            session.kubeconfig.display()
        );
    } else {
        session.end()?;
    }
    result
}

pub fn run(args: Args) -> anyhow::Result<()> {
    util::require_root("cargo xtask demo")?;
    if args.cluster {
        return on_cluster(args.keep);
    }
    if args.cleanup {
        return cleanup_kept();
    }
    if state_file().exists() {
        println!("A previous `cargo xtask demo --keep` is still running: cleaning it up first.");
        cleanup_kept()?;
    }
    section("setup");
    xtask::setup::run()?;
    println!();
    let bin = xtask::build::build_agent(true)?;
    fs::create_dir_all(demo_dir())?;

    procs::catch_signals();
    let mut demo = Demo {
        bin,
        pins: PathBuf::from(PIN_DIR),
        mount: crate::mounts::cgroup2().context(
            "graceful needs cgroup v2 (mount one with `mount -t cgroup2 none /sys/fs/cgroup/unified`)",
        )?,
        cgroups: cgroup::Created::default(),
        agent: None,
        server: None,
        client: None,
        kept: Vec::new(),
        announced: false,
        keep: false,
    };
    let n = args.connections as usize;
    demo.start_agent()?;
    let (pod, container, addr) = demo.start_pod()?;
    demo.open_clients(&pod, addr, n)?;
    if let Some(ss) = demo.ss_count(&container) {
        println!("    `ss -tn state established cgroup <container>` (the kernel's socket table) lists {ss}.");
    }
    procs::sleep(Duration::from_secs(1))?;
    demo.drain(&pod, &container, n, args.batch as usize)?;
    if args.keep {
        demo.leave_running(&pod, &container, addr, n)?;
    }
    drop(demo);
    Ok(())
}
