//! The parts of `cargo xtask bench designs` that need the agent's object
//! or the tests' peers: the floors (programs that do nothing, held
//! attached while the lab samples the load) and the softirq stress run
//! under each counting design.

use std::io::Read as _;

use aya::programs::{BtfTracePoint, CgroupAttachMode, SockOps};
use graceful::{
    kernel::bpf::{object::OBJECT, paths::PinDir},
    kernel::cgroupfs,
};
use graceful_common::names;
use serde_json::json;

use graceful_tests::{agent::Agent, nested};

/// What a floor attaches.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Floor {
    /// An empty sock_ops program at the cgroup v2 root.
    SockOps,
    /// sock_ops's dispatch, flags and owner lookups at the root, without
    /// its atomic adds.
    Lookup,
    /// The tracepoint design's three attachments, empty: two on
    /// `inet_sock_set_state`, one on `tcp_destroy_sock`.
    Tracepoints,
}

/// Attaches `floor`, prints `attached`, and holds it until stdin closes.
pub fn hold_floor(floor: Floor) -> anyhow::Result<()> {
    anyhow::ensure!(!OBJECT.is_empty(), "built without the eBPF object");
    let mut ebpf = aya::EbpfLoader::new().load(OBJECT)?;
    match floor {
        Floor::SockOps | Floor::Lookup => {
            let name = match floor {
                Floor::Lookup => names::PROG_FLOOR_LOOKUP,
                _ => names::PROG_FLOOR_SOCK_OPS,
            };
            let root = std::fs::File::open(cgroupfs::mount_point()?)?;
            let p: &mut SockOps = ebpf
                .program_mut(name)
                .ok_or_else(|| anyhow::anyhow!("no {name} in the object"))?
                .try_into()?;
            p.load()?;
            p.attach(&root, CgroupAttachMode::Single)?;
        }
        Floor::Tracepoints => {
            let btf = aya::Btf::from_sys_fs()?;
            for (name, tp, times) in [
                (names::PROG_FLOOR_STATE, "inet_sock_set_state", 2),
                (names::PROG_FLOOR_DESTROYED, "tcp_destroy_sock", 1),
            ] {
                let p: &mut BtfTracePoint = ebpf
                    .program_mut(name)
                    .ok_or_else(|| anyhow::anyhow!("no {name} in the object"))?
                    .try_into()?;
                p.load(tp, &btf)?;
                for _ in 0..times {
                    p.attach()?;
                }
            }
        }
    }
    println!("attached");
    // The links live as long as the object: until the lab closes our stdin.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(ebpf);
    Ok(())
}

/// A counting design for [`nested_runs`].
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Design {
    SockOps,
    Tracepoint,
    /// The tracepoint design without the state program's second copy.
    TracepointSingle,
}

/// `runs` runs of the softirq stress (`graceful_tests::nested`) with `n`
/// connections each way, each under a fresh agent of `design` with the
/// periodic repair pass off. The agent is stopped before each stress (its
/// pinned programs count without it), so the twin can be taken away for
/// `TracepointSingle`. Prints a JSON line per run and one for the whole.
pub fn nested_runs(design: Design, runs: usize, n: u64) -> anyhow::Result<()> {
    let ns = nested::shaped_namespace().map_err(anyhow::Error::msg)?;
    let mut exact = 0;
    let mut drifted = 0;
    let mut short = 0;
    let mut caught = 0;
    for run in 0..runs {
        let mut agent = Agent::new();
        agent.daemon_args = vec!["--repair-interval".into(), "0s".into()];
        if !matches!(design, Design::SockOps) {
            agent
                .daemon_args
                .extend(["--counting".into(), "tracepoint".into()]);
        }
        agent.start();
        agent.stop();
        if matches!(design, Design::TracepointSingle) {
            let pins = PinDir::new(&agent.pin_dir);
            for e in std::fs::read_dir(pins.links())?.flatten() {
                if e.file_name()
                    .to_string_lossy()
                    .starts_with(names::PROG_STATE_TWIN)
                {
                    std::fs::remove_file(e.path())?;
                }
            }
        }
        let out = nested::run(&agent, &ns, n);
        exact += usize::from(out.exact());
        drifted += usize::from(!(out.live_exact && out.zero_after));
        short += out.connections.saturating_sub(out.outbound_counted);
        caught += out.caught;
        println!(
            "{}",
            json!({"design": format!("{design:?}"), "run": run + 1, "outcome": out, "exact": out.exact()})
        );
    }
    println!(
        "{}",
        json!({
            "bench": "nested",
            "design": format!("{design:?}"),
            "runs": runs,
            "connections_per_run": 4 * n + 500,
            "exact_runs": exact,
            "runs_with_live_drift": drifted,
            "outbound_short": short,
            "caught": caught,
        })
    );
    Ok(())
}
