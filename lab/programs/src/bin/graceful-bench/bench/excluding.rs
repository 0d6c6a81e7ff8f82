//! The httpGet gate's release with exclusions in place and what they leave
//! out busy: a scraper on the ignored metrics port and probes from the
//! node's address go on throughout, while each drain waits for 5 real
//! clients. From the last real close (the kernel's timestamp of it, which
//! an excluded close never sets) to the last byte of the hook's response.

use std::sync::atomic::{AtomicBool, Ordering};

use graceful::kernel::bpf::paths::PinDir;
use serde_json::json;

use super::{stats::summary, timed_http_drain};
use graceful_tests::{
    http_hook::{wait_listening, PORT},
    not_traffic::{noise, Noisy, StopOnDrop, APP_PORT, METRICS_PORT},
    peer::addr,
};

const CLIENTS: usize = 5;

/// Samples of one aim of the noise: the hook's answer and the agent's
/// release, each from the last real close, in ms.
#[derive(Default)]
struct Samples {
    answered: Vec<f64>,
    released: Vec<f64>,
}

/// `drains` drains, one after the other, on one pod. They alternate: the
/// scrapes and probes go to the pod (and its exclusions leave them out),
/// then to a sink in the node's namespace (the control: the same load on
/// the machine, nothing for the pod's exclusions to do).
pub fn run(drains: usize) {
    let mut n = Noisy::new(
        json!({
            "graceful.dev/gate": "http",
            "graceful.dev/ignore-ports": METRICS_PORT.to_string(),
            "graceful.dev/ignore-peers": "node",
        }),
        CLIENTS,
    );
    wait_listening(&n.scene.net.b, PORT, 10);
    let counters = graceful::kernel::bpf::maps::Counters::open(&PinDir::new(&n.scene.agent.pin_dir)).unwrap();
    let app_id = n.scene.pod.container(0).id();
    let gate = n.scene.gate();
    let pod_v6 = n.scene.net.b_v6.clone();
    let stop = AtomicBool::new(false);
    let Noisy {
        scene,
        clients,
        noise: peers,
        ..
    } = &mut n;
    let scene = &*scene;
    let aim_at_pod = AtomicBool::new(true);
    let (at_pod, control, left_out, late) = std::thread::scope(|t| {
        let made = noise(t, peers, &aim_at_pod, &stop);
        let _stop = StopOnDrop(&stop);
        let (mut at_pod, mut control) = (Samples::default(), Samples::default());
        let (mut left_out, mut late) = (0, 0);
        for i in 0..drains {
            let to_pod = i % 2 == 0;
            aim_at_pod.store(to_pod, Ordering::SeqCst);
            if i > 0 {
                clients.cmd(&format!("connect {} {CLIENTS}", addr(&pod_v6, APP_PORT)));
                // Counted by the kernel, the probes left out.
                // Established, as ss sees them: between drains nothing is
                // left out, and the app may be slow to close a probe.
                let clients_v6 = scene.net.a_v6.clone();
                graceful_tests::wait_for(10, "the real clients connected", || {
                    let filter = format!("sport = :{APP_PORT} and dst [{clients_v6}]");
                    let args: Vec<&str> = ["-Htn", "state", "established"]
                        .into_iter()
                        .chain(filter.split(' '))
                        .collect();
                    (scene.net.b.exec("ss", &args).lines().count() == CLIENTS).then_some(())
                });
            }
            let (answer, last_byte_ns) = timed_http_drain(&scene.agent, &scene.net.a, gate, || {
                clients.cmd(&format!("close-out {CLIENTS} fin"));
            });
            // Read at once: a probe opened after the release is counted
            // again, and its close would move the timestamp.
            let close_ns = counters.get(app_id).last_inbound_close_ns;
            let report = super::drained_report(i, answer);
            left_out += report["ignored"].as_array().map_or(0, |a| {
                a.iter().filter_map(|r| r["connections"].as_u64()).sum::<u64>()
            });
            let released_ns = report["release_ns"].as_u64().unwrap_or(0);
            if close_ns > released_ns {
                // That happened: this drain's last real close is unknown.
                late += 1;
                continue;
            }
            let s = if to_pod { &mut at_pod } else { &mut control };
            s.answered
                .push(last_byte_ns.saturating_sub(close_ns) as f64 / 1e6);
            s.released.push((released_ns - close_ns) as f64 / 1e6);
        }
        stop.store(true, Ordering::SeqCst);
        for m in made {
            m.join().unwrap();
        }
        (at_pod, control, left_out, late)
    });
    println!(
        "httpGet gate with exclusions (ignore-ports {METRICS_PORT}, ignore-peers node; a scrape every 200 ms \
         and a probe every 300 ms throughout): the last real close to the hook response's last byte, \
         {CLIENTS} real clients a drain, {left_out} connections left out over {drains} drains; every other \
         drain the same noise goes to a sink beside the pod instead (the control){}:",
        if late > 0 {
            format!(", {late} drains left out (a probe's close after the release moved the timestamp)")
        } else {
            String::new()
        }
    );
    // Where the time goes: the agent's release decision, then the answer.
    summary("  control: agent released", control.released);
    summary("  control: hook answered", control.answered);
    summary("  at the pod: agent released", at_pod.released);
    let (p50, p99) = summary("graceful httpGet gate, excluding", at_pod.answered);
    println!("{{\"bench\":\"excluding-release-latency\",\"p50_ms\":{p50:.3},\"p99_ms\":{p99:.3}}}");
}
