//! A load balancer outside the cluster, as the load meets it: each new
//! connection goes straight to the next of a Service's ready pods, and
//! every change to those pods reaches it `delay` late, as it reaches a
//! cloud load balancer or an ingress controller on another node (seconds;
//! the node's own kube-proxy takes milliseconds). A pod deleted is sent
//! new connections for that long: what its SIGTERM costs depends on it.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    process::Command,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use super::{service::ready_addresses, Namespace};
use crate::rollout::load::Pool;

/// How often the endpoints are read.
const POLL: Duration = Duration::from_millis(100);

pub struct LateLb {
    /// What the load sends to.
    pub pool: Arc<Pool>,
    running: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// The ready endpoints of Service `name` in `ns` (the EndpointSlices'
/// ready addresses, at their first port), through `kubectl`.
fn endpoints(kubectl: &mut Command) -> Option<Vec<SocketAddr>> {
    let out = kubectl.output().ok().filter(|o| o.status.success())?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let mut addrs = Vec::new();
    for slice in v["items"].as_array()? {
        let Some(port) = slice["ports"][0]["port"].as_u64() else {
            continue;
        };
        for ip in ready_addresses(slice) {
            addrs.push(SocketAddr::new(ip.parse().ok()?, port as u16));
        }
    }
    addrs.sort();
    Some(addrs)
}

impl LateLb {
    /// Follows Service `service` of `ns`, `delay` late; its pool starts
    /// with the endpoints ready now.
    pub fn start(ns: &Namespace, service: &str, delay: Duration) -> LateLb {
        let cluster = super::Cluster::get();
        let selector = format!("kubernetes.io/service-name={service}");
        let name = ns.name.clone();
        let query = move || {
            let mut c = cluster.kubectl_cmd(&[
                "-n",
                &name,
                "get",
                "endpointslices",
                "-l",
                &selector,
                "-o",
                "json",
            ]);
            endpoints(&mut c)
        };
        let now = query().expect("the Service's EndpointSlices");
        assert!(!now.is_empty(), "Service {service} has no ready endpoint");
        let pool = Pool::new(now);
        let running = Arc::new(AtomicBool::new(true));
        let (p, r) = (pool.clone(), running.clone());
        let thread = std::thread::spawn(move || {
            // What was read, and when: the pool takes each view once it is
            // `delay` old.
            let mut seen: VecDeque<(Instant, Vec<SocketAddr>)> = VecDeque::new();
            while r.load(Ordering::SeqCst) {
                if let Some(v) = query() {
                    seen.push_back((Instant::now(), v));
                }
                while seen.front().is_some_and(|(at, _)| at.elapsed() >= delay) {
                    let (_, view) = seen.pop_front().unwrap();
                    if !view.is_empty() {
                        p.set(view);
                    }
                }
                std::thread::sleep(POLL);
            }
        });
        LateLb {
            pool,
            running,
            thread: Some(thread),
        }
    }
}

impl Drop for LateLb {
    fn drop(&mut self) {
        self.running.store(false, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
