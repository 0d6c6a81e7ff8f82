//! The httpGet gate's release: from the pod's last inbound close (the
//! kernel's timestamp of it) to the last byte of the hook's response, read
//! on the node's side as the kubelet reads it. The real agent, told of the
//! pod by the fake API, listens in the pod's namespace; each drain holds
//! one client, then the client goes.

use graceful::kernel::bpf::paths::PinDir;
use serde_json::json;

use super::{stats::summary, timed_http_drain};
use graceful_tests::http_hook::{wait_listening, Scene, PORT};

/// `drains` drains, one after the other, on one pod.
pub fn run(drains: usize) {
    let mut s = Scene::new(json!({"graceful.dev/gate": "http"}));
    wait_listening(&s.net.b, PORT, 10);
    let (_lb, mut client) = s.clients(1);
    let counters = graceful::kernel::bpf::maps::Counters::open(&PinDir::new(&s.agent.pin_dir)).unwrap();
    let app_id = s.pod.container(0).id();
    let gate = s.gate();
    let mut ms = Vec::with_capacity(drains);
    for i in 0..drains {
        if i > 0 {
            client.cmd(&format!(
                "connect {} 1",
                graceful_tests::peer::addr(&s.net.b_v4, s.app_port)
            ));
            graceful_tests::wait_for(10, "accept", || (s.app.accepted() == i as u64 + 1).then_some(()));
        }
        let (answer, last_byte_ns) = timed_http_drain(&s.agent, &s.net.a, gate, || {
            client.cmd("close-out 1 fin");
        });
        super::drained_report(i, answer);
        let close_ns = counters.get(app_id).last_inbound_close_ns;
        ms.push(last_byte_ns.saturating_sub(close_ns) as f64 / 1e6);
    }
    println!(
        "httpGet gate: the last inbound close to the hook response's last byte (drained policy, settle 0):"
    );
    let (p50, p99) = summary("graceful httpGet gate", ms);
    println!("{{\"bench\":\"http-gate-release-latency\",\"p50_ms\":{p50:.3},\"p99_ms\":{p99:.3}}}");
}
