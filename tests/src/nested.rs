//! State changes in a softirq that interrupts a running program: the
//! stress the kernel test `nested` and `graceful-bench nested` share.
//!
//! The kernel runs a tracing program at most once per CPU at a time: an
//! event that fires while it runs (a softirq on the way out of an interrupt
//! that came during a connect() or close()) is skipped for it. Here a
//! namespace's loopback is shaped by `tbf`, so most packets leave from the
//! qdisc's timer interrupt and are received in the softirq after it,
//! interrupting whatever runs, the programs included. Handshakes, clones
//! and closes then land inside the programs' process-context runs.
//!
//! The tracepoint design misses some of those changes and catches most
//! with its second copy and its backstop at destruction; the sock_ops
//! design runs cgroup programs, which have no such guard, and misses none.

use std::time::{Duration, Instant};

use graceful::kernel::bpf::{maps::read_stats, paths::PinDir};
use graceful_common::stat;

use crate::{
    agent::Agent,
    cgroup::Cgroup,
    netns::NetNs,
    oracle::{self, View},
    peer::{addr, Peer},
};

/// What one run showed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// Connections made: `4 n` churned, 500 held and closed during it.
    pub connections: u64,
    /// The client cgroup's `outbound_total` and the server's
    /// `inbound_total` afterwards: the connections each counted.
    pub outbound_counted: u64,
    pub inbound_counted: u64,
    /// The server cgroup's `inbound_closed_total`: each connection counted
    /// open was counted closed.
    pub inbound_closed: u64,
    /// Connections the server's app accepted: fewer than those made, as
    /// its listeners' queues overflow under the stress and clients reset
    /// some connections before the app takes them. Every one of them was
    /// established, so the inbound total is at least this.
    pub accepted: u64,
    /// With the 200 held connections still open, the live counts agreed
    /// with `ss` (within the wait); else what differed.
    pub live_exact: bool,
    /// Once everything closed, every live count came back to zero.
    pub zero_after: bool,
    pub drift: Option<String>,
    /// Changes the state programs missed and their backstops handled.
    pub caught: u64,
}

impl Outcome {
    /// Live counts exact throughout, and no total short or over.
    pub fn exact(&self) -> bool {
        self.live_exact
            && self.zero_after
            && self.outbound_counted == self.connections
            && (self.accepted..=self.connections).contains(&self.inbound_counted)
            && self.inbound_closed == self.inbound_counted
    }
}

/// The shaped namespace, or why it can't be made here.
pub fn shaped_namespace() -> Result<NetNs, String> {
    let ns = NetNs::create();
    // A rate low enough that the bucket is empty most of the time: packets
    // wait in the qdisc for its watchdog timer.
    let shaped = std::process::Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", ns.name))
        .args(["tc", "qdisc", "add", "dev", "lo", "root", "tbf"])
        .args(["rate", "20mbit", "burst", "4kb", "limit", "64mb"])
        .output()
        .map_err(|e| format!("nsenter: {e}"))?;
    if !shaped.status.success() {
        return Err(format!(
            "cannot shape loopback with tbf here ({})",
            String::from_utf8_lossy(&shaped.stderr).trim()
        ));
    }
    Ok(ns)
}

/// The packets waiting in the shaped loopback's qdisc (`tc -s qdisc`'s
/// `backlog ... Np`); `None` if it cannot be read.
fn qdisc_backlog(ns: &NetNs) -> Option<u64> {
    let out = ns.exec("tc", &["-s", "qdisc", "show", "dev", "lo"]);
    let after = out.split("backlog ").nth(1)?;
    let packets = after.split_whitespace().nth(1)?;
    packets.strip_suffix('p')?.parse().ok()
}

/// The agent's live figures of `cg` against `ss`'s in `ns`, waited for
/// until they agree or `limit` passes: the last of each.
fn agree(agent: &Agent, cg: &Cgroup, ns: &NetNs, limit: Duration) -> (View, View) {
    let t = Instant::now();
    loop {
        let want = oracle::view(Some(ns), cg.path());
        let c = agent.counters(cg.id());
        let got = View {
            inbound_live: c.inbound_live,
            outbound_live: c.outbound_live,
            listeners: c.listeners,
        };
        if got == want || t.elapsed() > limit {
            return (got, want);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One run of the stress in `ns`, counted by `agent`'s pins (the agent
/// process need not run: the programs count without it), with `n`
/// connections each way of ending.
pub fn run(agent: &Agent, ns: &NetNs, n: u64) -> Outcome {
    let (server_cg, client_cg) = (Cgroup::unique("srv"), Cgroup::unique("cli"));
    let mut server = Peer::spawn(&server_cg, Some(ns));
    let echo = server.listen("127.0.0.1:0", "echo-close");
    let close_now = server.listen("127.0.0.1:0", "close-now");
    let hold = server.listen("127.0.0.1:0", "hold");
    let caught_before = read_stats(&PinDir::new(&agent.pin_dir)).unwrap()[stat::CAUGHT as usize];
    let jobs = [
        format!("churn {} {n} fin", addr("127.0.0.1", echo)),
        format!("churn {} {n} wait-fin", addr("127.0.0.1", close_now)),
        format!("churn {} {n} rst", addr("127.0.0.1", echo)),
        format!("churn {} {n} fin", addr("127.0.0.1", close_now)),
    ];
    // Long-lived ones too, opened and closed while the churn runs: a missed
    // first or last change of these would leave a count wrong for good.
    let mut holder = Peer::spawn(&client_cg, Some(ns));
    std::thread::scope(|s| {
        for line in &jobs {
            let cg = &client_cg;
            s.spawn(move || Peer::spawn(cg, Some(ns)).cmd(line));
        }
        for _ in 0..5 {
            holder.connect(&addr("127.0.0.1", hold), 100);
            holder.cmd("close-out 60 rst");
        }
    });
    // The last closes may still be on their way through the qdisc, which
    // holds up to 26.8 s of packets at its rate (`tc qdisc show`'s `lat`):
    // its queue drained first, then the 200 held connections, as `ss`
    // sees them, in each cgroup.
    crate::wait_for(90, "the shaped loopback's queue to drain", || {
        (qdisc_backlog(ns)? == 0).then_some(())
    });
    crate::wait_equal(
        30,
        "the churn's last closes (inbound, outbound live)",
        (200, 200),
        || {
            let held = |cg: &Cgroup| oracle::view(Some(ns), cg.path());
            (held(&server_cg).inbound_live, held(&client_cg).outbound_live)
        },
    );
    let mut drift = Vec::new();
    let check = |what: &str, drift: &mut Vec<String>| {
        let mut ok = true;
        for cg in [&server_cg, &client_cg] {
            let (got, want) = agree(agent, cg, ns, Duration::from_secs(5));
            if got != want {
                ok = false;
                drift.push(format!("{what}, {}: agent {got:?}, ss {want:?}", cg.path()));
            }
        }
        ok
    };
    let live_exact = check("200 held", &mut drift);
    let accepted = server.accepted();
    let outbound_counted = agent.counters(client_cg.id()).outbound_total;
    let inbound_counted = agent.counters(server_cg.id()).inbound_total;
    drop(holder);
    drop(server);
    let zero_after = check("all closed", &mut drift);
    let inbound_closed = agent.counters(server_cg.id()).inbound_closed_total;
    let caught = read_stats(&PinDir::new(&agent.pin_dir)).unwrap()[stat::CAUGHT as usize] - caught_before;
    Outcome {
        connections: 4 * n + 500,
        outbound_counted,
        inbound_counted,
        inbound_closed,
        accepted,
        live_exact,
        zero_after,
        drift: (!drift.is_empty()).then(|| drift.join("; ")),
        caught,
    }
}
