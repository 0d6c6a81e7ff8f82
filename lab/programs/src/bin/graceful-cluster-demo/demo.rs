//! `cargo xtask demo --cluster`: a real rolling update of
//! `deploy/examples/web` on the test node, with its drains shown as they
//! happen.
//!
//! Each of the 3 pods holds two keep-alive connections from the node, as an
//! ingress controller holds its upstream connections, while new requests
//! arrive through the Service. `kubectl rollout restart` replaces the pods;
//! each old pod's preStop hook (graceful-wait) holds its SIGTERM while its
//! clients are connected. The clients finish one after the other, a second
//! or two into each drain; the agent's event stream shows each drain start
//! and its release, milliseconds after the pod's last client left.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    net::{SocketAddr, TcpStream},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use graceful_tests::monotonic_ns;
use serde_json::Value;

use graceful_tests::cluster::{
    clients::Clients, forward::PortForward, pod::Pod, rollout, Cluster, Namespace, AGENT_API_PORT,
};
use graceful_tests::rollout::{load, Mode};

/// What the demo prints as it goes, with the seconds since the restart.
struct Clock(Instant);

impl Clock {
    fn say(&self, what: impl AsRef<str>) {
        println!("  {:>6.2} s  {}", self.0.elapsed().as_secs_f64(), what.as_ref());
    }
}

/// The agent's `/v1/events` (NDJSON), through `kubectl port-forward` to
/// its pod's loopback, where the DaemonSet serves the whole API: the event
/// stream names pods, so it is not on the pod's address. The forward lives
/// as long as the stream is read.
fn agent_events(cluster: &Cluster) -> anyhow::Result<mpsc::Receiver<Value>> {
    let pod = cluster.agent_pod(60);
    let forward = PortForward::start(
        cluster,
        graceful_tests::cluster::AGENT_NAMESPACE,
        &pod,
        AGENT_API_PORT,
    )?;
    let addr = forward.local;
    let stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).context("the forwarded agent API")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _forward = forward;
        let mut s = stream;
        if write!(s, "GET /v1/events HTTP/1.1\r\nHost: graceful\r\n\r\n").is_err() {
            return;
        }
        for line in BufReader::new(s).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(line.trim()) {
                if tx.send(v).is_err() {
                    return;
                }
            }
        }
    });
    Ok(rx)
}

pub fn run(cluster: &Cluster) -> anyhow::Result<()> {
    let ns = Namespace::create(cluster, "demo");
    println!(
        "==> 1/4  deploy/examples/web in namespace {}: 3 nginx pods behind a ClusterIP Service",
        ns.name
    );
    ns.apply_kustomization(&rollout::overlay(Mode::Graceful));
    let old = Pod::wait_ready(&ns, "app.kubernetes.io/name=web", 3, 120);
    let ip = ns.wait_service("web", 3);
    let service: SocketAddr = format!("{ip}:80").parse()?;
    let hook = ns.kubectl(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].lifecycle.preStop.exec.command}",
    ]);
    println!("    their preStop hook: {hook}");

    println!("==> 2/4  two keep-alive clients on each pod, and 50 new requests a second through the Service");
    let mut clients: HashMap<String, (String, Clients)> = old
        .iter()
        .map(|p| {
            let c = Clients::open(cluster, format!("{}:80", p.ip).parse().unwrap(), 2);
            (p.uid.clone(), (p.name.clone(), c))
        })
        .collect();
    let traffic = cluster.on_node_load(service, 50, 16)?;
    let events = agent_events(cluster)?;
    std::thread::sleep(Duration::from_secs(1));
    traffic.count_from_now();

    println!("==> 3/4  kubectl rollout restart deployment/web");
    let clock = Clock(Instant::now());
    ns.kubectl(&["rollout", "restart", "deployment/web"]);
    // Closes due: (when, pod uid). Each pod's clients finish 1 s and 2 s
    // into its drain.
    let mut due: Vec<(Instant, String)> = Vec::new();
    let mut last_close: HashMap<String, u64> = HashMap::new();
    let mut released = 0;
    let names: HashMap<String, String> = old.iter().map(|p| (p.uid.clone(), p.name.clone())).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while released < old.len() && Instant::now() < deadline {
        due.sort();
        while due.first().is_some_and(|(at, _)| *at <= Instant::now()) {
            let (_, uid) = due.remove(0);
            if let Some((name, c)) = clients.get_mut(&uid) {
                c.close_some(1);
                let left = c.len();
                last_close.insert(uid.clone(), monotonic_ns());
                clock.say(format!("{name}: a client finished, {left} left"));
            }
        }
        let Ok(ev) = events.recv_timeout(Duration::from_millis(20)) else {
            continue;
        };
        let uid = ev["pod"].as_str().unwrap_or_default().to_string();
        let Some(name) = names.get(&uid) else { continue };
        match ev["type"].as_str() {
            Some("drain_started") => {
                clock.say(format!(
                    "{name}: terminating; its preStop hook holds SIGTERM (drain started)"
                ));
                let now = Instant::now();
                due.push((now + Duration::from_secs(1), uid.clone()));
                due.push((now + Duration::from_secs(2), uid));
            }
            Some("drain_released") => {
                released += 1;
                let after = last_close
                    .get(&uid)
                    .map(|t| {
                        format!(
                            ", {:.1} ms after its last client left",
                            (monotonic_ns() - t) as f64 / 1e6
                        )
                    })
                    .unwrap_or_default();
                clock.say(format!(
                    "{name}: released ({}, {} inbound at the start, held {} ms){after}: SIGTERM now",
                    ev["reason"].as_str().unwrap_or("?"),
                    ev["inbound_at_start"],
                    ev["waited_ms"]
                ));
            }
            _ => {}
        }
    }
    ns.kubectl(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    std::thread::sleep(Duration::from_secs(1));
    let outcome: load::Outcome = traffic.finish();

    println!("==> 4/4  what it cost");
    println!(
        "    requests through the Service during the rollout: {}, failed: {}",
        outcome.requests, outcome.failed
    );
    for (uid, why) in rollout::drain_reports(&ns, &old) {
        println!("    Event on {}: {why}", names[&uid]);
    }
    println!(
        "    (kubectl get events -n {} shows them; the namespace is removed now)",
        ns.name
    );
    anyhow::ensure!(
        released == old.len(),
        "only {released} of {} drains were released",
        old.len()
    );
    anyhow::ensure!(
        outcome.failed == 0 && outcome.warmup_failures.is_empty(),
        "requests failed: {:?} during the rollout, {:?} in the second before it",
        outcome.failures,
        outcome.warmup_failures
    );
    Ok(())
}
