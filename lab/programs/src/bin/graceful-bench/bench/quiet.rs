//! `--policy quiet` through the real gate: a pool of keep-alive
//! connections goes idle after one last request; the drain should end the
//! quiet window after that request's payload, not later. Measured from the
//! kernel's timestamp of the last inbound payload plus the window.

use std::time::Duration;

use graceful::kernel::bpf::paths::PinDir;

use super::stats::summary;
use graceful_tests::{
    agent::Agent,
    gate::{finish, hook, pod_holding, wait_draining},
};

/// `drains` drains, one after the other, on one pod.
pub fn run(drains: usize) {
    // Long enough for the request to land inside the drain, however slowly
    // the check that the drain has started comes back.
    const WINDOW_MS: u64 = 250;
    let agent = Agent::started_with_gate();
    let (pod, _lb, _app, mut pool) = pod_holding(8);
    let app_id = pod.container(0).id();
    // The payload timestamp is not in `graceful cgroups -o json`: read the map.
    let counters = graceful::kernel::bpf::maps::Counters::open(&PinDir::new(&agent.pin_dir)).unwrap();
    let window = format!("{WINDOW_MS}ms");
    let mut ms = Vec::with_capacity(drains);
    for i in 0..drains {
        let child = hook(
            &agent,
            pod.container(0),
            &[
                "--policy", "quiet", "--quiet", &window, "--min", "0s", "--max", "10s",
            ],
        );
        wait_draining(&agent, 1);
        // The drain is listed a moment before its payload watch is on.
        std::thread::sleep(Duration::from_millis(50));
        pool.cmd("send-out 2 512");
        let (report, out) = finish(child);
        assert_eq!(report["reason"], "quiet", "drain {i}: {out}");
        let last_rx = counters.get(app_id).last_inbound_rx_ns;
        let (start, release) = (
            report["start_ns"].as_u64().unwrap(),
            report["release_ns"].as_u64().unwrap(),
        );
        assert!(
            last_rx > start,
            "drain {i}: the request's payload was not seen during the drain: {out}"
        );
        assert!(
            release >= last_rx + WINDOW_MS * 1_000_000,
            "drain {i}: released before the window ended: {out}"
        );
        ms.push((release - last_rx - WINDOW_MS * 1_000_000) as f64 / 1e6);
    }
    println!("release latency after the quiet window ({WINDOW_MS} ms) following the last inbound payload:");
    let (p50, p99) = summary("graceful (quiet policy)", ms);
    println!("{{\"bench\":\"quiet-release-latency\",\"window_ms\":{WINDOW_MS},\"p50_ms\":{p50:.3},\"p99_ms\":{p99:.3}}}");
}
