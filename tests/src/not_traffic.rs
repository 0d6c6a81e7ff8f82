//! What a drain should not wait for, on real sockets: a scraper holding a
//! keep-alive connection to the pod's metrics port and sending a request
//! every 200 ms, and probes connecting from the node's address every 300 ms,
//! beside the pod's real clients. The kernel tests of the exclusions and the
//! release-latency bench with exclusions both use it.
//!
//! The node, as the agent is told of it (`--node-netns`), is a namespace of
//! its own holding only the IPv4 address of the pod's peer side. So from
//! that side, connections over IPv4 come from the node (the probes), and
//! over IPv6 from some other host (the real clients and the scraper).

use std::{
    sync::atomic::{AtomicBool, Ordering},
    thread::ScopedJoinHandle,
    time::Duration,
};

use serde_json::Value;

use crate::{
    cgroup::Cgroup,
    http_hook::Scene,
    netns::{NetNs, VethPair},
    peer::{addr, Peer},
};

/// The app's port, where real clients and probes go.
pub const APP_PORT: u16 = 8080;
/// The app's metrics port, where the scraper goes.
pub const METRICS_PORT: u16 = 9090;
/// How often the scraper sends a request, and a probe connects.
pub const SCRAPE_EVERY: Duration = Duration::from_millis(200);
pub const PROBE_EVERY: Duration = Duration::from_millis(300);

pub struct Noisy {
    pub scene: Scene,
    /// The node's namespace as the agent sees it (`node.a`).
    _node: VethPair,
    _clients_cg: Cgroup,
    pub clients: Peer,
    _noise_cg: Cgroup,
    pub noise: NoisePeers,
}

/// The scraper and the prober, and the benches' control: a listener in
/// the node's namespace, off the pod, with a scraper of its own connected,
/// so that the same noise can be aimed away from the pod (see
/// [`noise`]).
pub struct NoisePeers {
    scraper: Peer,
    prober: Peer,
    _sink: Peer,
    sink_scraper: Peer,
    probe_pod: String,
    probe_sink: String,
}

impl Noisy {
    /// The scene, with `annotations` on the pod, the app serving both
    /// ports (dual-stack) and `clients` real clients connected. The
    /// scraper is connected too; [`noise`] makes it and the probes
    /// talk.
    pub fn new(annotations: Value, clients: usize) -> Noisy {
        let node = VethPair::create();
        // Its IPv6 address is the same as the pod's peer side's (the
        // addresses are per test process): gone, so IPv6 peers are not
        // the node.
        node.a.exec("ip", &["-6", "addr", "flush", "scope", "global"]);
        let mut scene = Scene::with_node(annotations.clone(), Some(node.a.path()));
        // Its drains come during its termination, as the kubelet's do: the
        // node's namespace as the agent knows it (`node.a`) holds the
        // address they come from but not their sockets, so they are taken
        // as relayed by a NAT, answered once the pod is terminating.
        scene.update(annotations, true);
        for port in [APP_PORT, METRICS_PORT] {
            scene.app.listen(&format!("[::]:{port}"), "echo-close");
        }
        let clients_cg = Cgroup::unique("clients");
        let mut c = Peer::spawn(&clients_cg, Some(&scene.net.a));
        c.connect(&addr(&scene.net.b_v6, APP_PORT), clients);
        let noise_cg = Cgroup::unique("noise");
        let mut scraper = Peer::spawn(&noise_cg, Some(&scene.net.a));
        scraper.connect(&addr(&scene.net.b_v6, METRICS_PORT), 1);
        let prober = Peer::spawn(&noise_cg, Some(&scene.net.a));
        let mut sink = Peer::spawn(&noise_cg, Some(&scene.net.a));
        let sink_addr = addr("127.0.0.1", sink.listen("127.0.0.1:0", "echo-close"));
        let probe_pod = addr(&scene.net.b_v4, APP_PORT);
        let mut sink_scraper = Peer::spawn(&noise_cg, Some(&scene.net.a));
        sink_scraper.connect(&sink_addr, 1);
        crate::wait_for(10, "accepts", || {
            (scene.app.accepted_on(APP_PORT) == clients as u64 && scene.app.accepted_on(METRICS_PORT) == 1)
                .then_some(())
        });
        Noisy {
            scene,
            _node: node,
            _clients_cg: clients_cg,
            clients: c,
            _noise_cg: noise_cg,
            noise: NoisePeers {
                scraper,
                prober,
                _sink: sink,
                sink_scraper,
                probe_pod,
                probe_sink: sink_addr,
            },
        }
    }

    /// The node's address, where the probes come from.
    pub fn node_v4(&self) -> &str {
        &self.scene.net.a_v4
    }
}

/// Sets its flag when dropped: held in the scope that runs [`noise`], so a
/// panic there stops the noise too, instead of the scope waiting for it
/// forever.
pub struct StopOnDrop<'a>(pub &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Starts the scraper's requests and the probes until `stop` is set: to
/// the pod while `at_pod` is set (as the tests have it throughout), else
/// the same requests and probes to the sink in the node's namespace, which
/// loads the machine as much but touches nothing of the pod's (the
/// benches' control). Each thread returns how many it made at the pod.
pub fn noise<'s>(
    t: &'s std::thread::Scope<'s, '_>,
    peers: &'s mut NoisePeers,
    at_pod: &'s AtomicBool,
    stop: &'s AtomicBool,
) -> [ScopedJoinHandle<'s, u64>; 2] {
    let NoisePeers {
        scraper,
        prober,
        sink_scraper,
        probe_pod,
        probe_sink,
        ..
    } = peers;
    let (probe_pod, probe_sink) = (
        format!("churn {probe_pod} 1 fin"),
        format!("churn {probe_sink} 1 fin"),
    );
    [
        t.spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                // A request's worth: past the ingress program's
                // 60-byte floor for payload.
                if at_pod.load(Ordering::SeqCst) {
                    scraper.cmd("send-out 1 200");
                    n += 1;
                } else {
                    sink_scraper.cmd("send-out 1 200");
                }
                std::thread::sleep(SCRAPE_EVERY);
            }
            n
        }),
        t.spawn(move || {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                if at_pod.load(Ordering::SeqCst) {
                    prober.cmd(&probe_pod);
                    n += 1;
                } else {
                    prober.cmd(&probe_sink);
                }
                std::thread::sleep(PROBE_EVERY);
            }
            n
        }),
    ]
}

/// The pod's live inbound connections as `ss` sees them inside `ns`,
/// with and without the exclusions' own filter as ss writes it (`filter`,
/// for example `sport = :9090 or dst 10.0.0.1`): (counted, left out).
/// Two dumps, so a probe between them can make it inconsistent: callers
/// wait for it to agree with the agent.
pub fn ss_inbound(ns: &NetNs, filter: &str) -> (u64, u64) {
    let ports = format!("( sport = :{APP_PORT} or sport = :{METRICS_PORT} )");
    let count = |expr: String| {
        let args: Vec<&str> = ["-Htn", "state", "established", "state", "close-wait"]
            .into_iter()
            .chain(expr.split(' '))
            .collect();
        ns.exec("ss", &args).lines().count() as u64
    };
    let all = count(ports.clone());
    let left_out = count(format!("{ports} and ( {filter} )"));
    (all.saturating_sub(left_out), left_out)
}
