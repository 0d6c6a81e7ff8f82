//! Integration tests on the real kernel: the real agent, real cgroups,
//! network namespaces and TCP connections, checked against `ss`.
//! They need root; `cargo xtask test` runs them.

mod api;
mod bad_env;
mod churn;
mod command_line;
mod counters_full;
mod counts;
mod crafted_cgroup;
mod drain_engine;
mod drain_start;
mod error_lines;
mod exclusions;
mod exits;
mod fair_share;
mod floor;
mod full_disk;
mod gate;
mod gate_scopes;
mod gate_settings;
mod gate_squatter;
mod gc;
mod handover;
mod health;
mod http_gate;
mod http_gate_callers;
mod keeper;
mod kube_terminating;
mod kube_watch;
mod memory_budget;
mod mesh;
mod nested;
mod one_agent;
mod oom_group;
mod padded_hook;
mod pods;
mod preexisting;
mod reinstall;
mod repair;
mod restart;
mod rollout;
mod socket_gate;
mod upgrade;

use graceful_tests::{agent::Agent, cgroup::Cgroup, netns::NetNs, oracle};

/// Kernel tests run one at a time. Each loads its own agent and programs,
/// and several drive heavy TCP churn: side by side they slow each other
/// past the agents' timers (a garbage collection in the middle of a churn)
/// and blur what a failure means.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Skips (loudly) when not root: these tests load eBPF programs. Holds
/// [`SERIAL`] for the rest of the test.
#[macro_export]
macro_rules! require_root {
    () => {
        if !graceful_tests::is_root() {
            eprintln!(
                "SKIPPED {}: needs root (run `cargo xtask test` as root)",
                module_path!()
            );
            return;
        }
        let _serial = $crate::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    };
}

/// Waits until the agent's counts for every cgroup equal the kernel's view
/// (summed over the given namespaces), then returns them. Connections
/// finish their handshakes and closes asynchronously, so equality is awaited
/// (10 s at most), then asserted.
pub fn settle(agent: &Agent, cgroups: &[&Cgroup], namespaces: &[Option<&NetNs>]) -> Vec<oracle::View> {
    let mut last = String::new();
    let mut off = Vec::new();
    for _ in 0..500 {
        let mut ok = true;
        let mut views = Vec::new();
        last.clear();
        off.clear();
        for cg in cgroups {
            let want = namespaces.iter().fold(oracle::View::default(), |acc, ns| {
                acc + oracle::view(*ns, cg.path())
            });
            let c = agent.counters(cg.id());
            let got = oracle::View {
                inbound_live: c.inbound_live,
                outbound_live: c.outbound_live,
                listeners: c.listeners,
            };
            if got != want {
                ok = false;
                last.push_str(&format!("\n  {}: agent {:?} kernel {:?}", cg.path(), got, want));
                off.push(cg.path());
            }
            views.push(want);
        }
        if ok {
            return views;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Every socket of the cgroups that disagree, in every state: which
    // one the agent still counts (or never counted) is the cause to find.
    let mut sockets = String::new();
    for path in off {
        for ns in namespaces {
            let lines = oracle::sockets(*ns, path);
            let n = lines.lines().count();
            sockets.push_str(&format!("  {path} ({n} sockets, the first 40):\n"));
            for l in lines.lines().take(40) {
                sockets.push_str(&format!("    {l}\n"));
            }
        }
    }
    panic!(
        "agent counts never matched the kernel's:{last}\ntheir sockets, as ss sees them:\n{sockets}the programs' own figures:\n{}\nagent log:\n{}",
        kernel_figures(agent),
        agent.log_text()
    );
}

/// `graceful_repaired_sockets_total` of the agent's `/metrics`: counts its
/// repair passes set right (see `repair.rs`).
pub fn repaired_sockets(agent: &Agent) -> u64 {
    let figures = kernel_figures(agent);
    figures
        .lines()
        .find_map(|l| l.trim().strip_prefix("graceful_repaired_sockets_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no graceful_repaired_sockets_total in the metrics:\n{figures}"))
}

/// One unlabelled figure of the agent's `/metrics` (`graceful_http_gates`).
pub fn metric(agent: &Agent, name: &str) -> u64 {
    let s = std::os::unix::net::UnixStream::connect(agent.api_sock()).expect("the agent's API");
    let mut r =
        graceful_wait::http::get(s, "/metrics", Some(std::time::Duration::from_secs(5))).expect("/metrics");
    let prefix = format!("{name} ");
    while let Ok(Some(l)) = r.next_line() {
        if let Some(v) = l.strip_prefix(&prefix) {
            return v.trim().parse().unwrap_or_else(|e| panic!("{l}: {e}"));
        }
    }
    panic!("no {name} in the agent's /metrics")
}

/// The kernel programs' counters (storage failures, untracked sockets,
/// underflows, lost events...) from the agent's `/metrics`, for a failure
/// message: they tell a miscount's cause.
pub fn kernel_figures(agent: &Agent) -> String {
    let Ok(s) = std::os::unix::net::UnixStream::connect(agent.api_sock()) else {
        return "(the agent's API is not answering)".into();
    };
    let Ok(mut r) = graceful_wait::http::get(s, "/metrics", Some(std::time::Duration::from_secs(5))) else {
        return "(no answer from /metrics)".into();
    };
    let mut out = String::new();
    while let Ok(Some(l)) = r.next_line() {
        if l.starts_with("graceful_kernel")
            || l.starts_with("graceful_adopted")
            || l.starts_with("graceful_repaired")
            || l.starts_with("graceful_map_entries")
        {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out
}
