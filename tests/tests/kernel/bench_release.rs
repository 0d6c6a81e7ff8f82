//! Release latency, measured (not asserted): `cargo xtask bench
//! release-latency` runs these with `--ignored --nocapture` in release mode.
//!
//! Also measured: `--after-containers`, from the container's exit (the
//! kernel's timestamp of its cgroup emptying) and from the kill, through
//! the exit event against inotify on cgroup.events, interleaved.
//!
//! Each drain: a pod's server holds one inbound connection; the drain
//! starts (drained policy, min 0, settle 0); the app closes the connection;
//! the latency is release minus the kernel's timestamp of that close. The
//! same run measures a sock_diag poller at 1 s (what Istio's
//! EXIT_ON_ZERO_ACTIVE_CONNECTIONS and Envoy's shutdown managers do): the
//! time from the close to the first poll that sees zero.

use std::time::{Duration, Instant};

use graceful::{
    adopt::sockdiag,
    bpf::{paths::PinDir, Kernel},
    drain::{
        engine,
        exits::all_exited,
        policy::{Params, Policy, Reason},
    },
};
use graceful_common::{event, watch};
use graceful_tests::{
    agent::Agent,
    cgroup::Cgroup,
    gate::{finish, hook, wait_draining},
    monotonic_ns,
    peer::{addr, held_connections, Peer},
    pod::SimPod,
};
use tokio::sync::broadcast::error::RecvError;

use crate::require_root;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn summary(name: &str, mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (p50, p99) = (percentile(&ms, 0.5), percentile(&ms, 0.99));
    println!(
        "{name:<28} n={:<5} min={:>9.3} ms  p50={:>9.3} ms  p99={:>9.3} ms  max={:>9.3} ms",
        ms.len(),
        ms[0],
        p50,
        p99,
        ms[ms.len() - 1]
    );
    (p50, p99)
}

/// A count of `what` from the environment variable `var`, else `default`.
pub fn count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Pinned programs with no agent reading their event ring (a ring has one
/// read position: a running agent would take the very events a bench
/// waits for), a runtime, and the bench's own handle on the kernel side.
fn programs_without_agent() -> (Agent, tokio::runtime::Runtime, Kernel) {
    let mut agent = Agent::new();
    agent.start();
    agent.stop();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let kernel = rt.block_on(async { Kernel::open(&PinDir::new(&agent.pin_dir)).unwrap() });
    (agent, rt, kernel)
}

/// Drained, starting now, nothing to wait for but the event itself.
fn immediate() -> Params {
    Params {
        policy: Policy::Drained,
        start_ns: monotonic_ns(),
        min: Duration::ZERO,
        max: Duration::from_secs(10),
        settle: Duration::ZERO,
        quiet: Duration::ZERO,
    }
}

#[test]
#[ignore = "a benchmark: cargo xtask bench release-latency"]
fn bench_release_latency() {
    require_root!();
    let drains = count("GRACEFUL_BENCH_DRAINS", 1000);
    let polls = count("GRACEFUL_BENCH_POLLS", 30);
    let (_agent, rt, kernel) = programs_without_agent();
    let (app, lb) = (Cgroup::unique("app"), Cgroup::unique("lb"));
    let mut server = Peer::spawn(&app, None);
    let port = server.listen("127.0.0.1:0", "hold");
    let mut client = Peer::spawn(&lb, None);

    // graceful: event-driven release.
    let mut graceful_ms = Vec::with_capacity(drains);
    for i in 0..drains {
        client.connect(&addr("127.0.0.1", port), 1);
        graceful_tests::wait_for(10, "accept", || (server.accepted() == i as u64 + 1).then_some(()));
        let params = immediate();
        let cgroups = [app.id()];
        let report = rt.block_on(async {
            let drain = engine::run(
                &kernel,
                &cgroups,
                params,
                None::<std::future::Pending<()>>,
                |_| {},
            );
            let close = async {
                // Let the drain see the connection first.
                tokio::time::sleep(Duration::from_millis(1)).await;
                server.cmd("close-in 1 fin");
            };
            let (r, ()) = tokio::join!(drain, close);
            r.unwrap()
        });
        assert_eq!(
            report.reason,
            Reason::Drained,
            "drain {i}: {report:?} now {:?}",
            kernel.counters.get(app.id())
        );
        let close_ns = kernel.counters.get(app.id()).last_inbound_close_ns;
        graceful_ms.push(report.release_ns.saturating_sub(close_ns) as f64 / 1e6);
        client.cmd("close-out 1 fin");
    }

    // The 1 s sock_diag poller, on the same machine in the same run.
    let mut poller_ms = Vec::with_capacity(polls);
    let app_id = app.id();
    for i in 0..polls {
        client.connect(&addr("127.0.0.1", port), 1);
        graceful_tests::wait_for(10, "accept", || {
            (server.accepted() == (drains + i) as u64 + 1).then_some(())
        });
        // The poller's phase is whatever it is when the close happens.
        let phase = Duration::from_millis(1000 * (i as u64 % 10) / 10 + 37);
        let started = Instant::now();
        let poller = std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_secs(1));
            let live = sockdiag::dump_tcp()
                .unwrap()
                .iter()
                .filter(|s| s.cgroup_id == Some(app_id) && (s.state == 1 || s.state == 8))
                .count();
            if live == 0 {
                return monotonic_ns();
            }
        });
        std::thread::sleep(phase);
        server.cmd("close-in 1 fin");
        let released = poller.join().unwrap();
        let close_ns = kernel.counters.get(app_id).last_inbound_close_ns;
        poller_ms.push(released.saturating_sub(close_ns) as f64 / 1e6);
        client.cmd("close-out 1 fin");
        let _ = started;
    }

    println!("release latency after the last inbound close (drained policy, settle 0):");
    let (g50, g99) = summary("graceful (event-driven)", graceful_ms);
    let (p50, p99) = summary("sock_diag poller at 1 s", poller_ms);
    println!(
        "ratio poller/graceful: p50 {:.0}x, p99 {:.0}x",
        p50 / g50,
        p99 / g99
    );
    println!(
        "{{\"bench\":\"release-latency\",\"graceful_p50_ms\":{g50:.3},\"graceful_p99_ms\":{g99:.3},\"poller_p50_ms\":{p50:.3},\"poller_p99_ms\":{p99:.3},\"ratio_p50\":{:.1},\"ratio_p99\":{:.1}}}",
        p50 / g50,
        p99 / g99
    );
}

#[test]
#[ignore = "a benchmark: cargo xtask bench release-latency"]
fn bench_after_containers_latency() {
    require_root!();
    let exits = count("GRACEFUL_BENCH_EXITS", 200);
    let (_agent, rt, kernel) = programs_without_agent();
    let sidecar = Cgroup::unique("sidecar");
    // (from the kernel's exit, from the kill) per way of waiting.
    let (mut event, mut inotify) = (Vec::with_capacity(exits), Vec::with_capacity(exits));
    for i in 0..exits * 2 {
        let by_event = i % 2 == 0;
        let app = Cgroup::unique("app");
        let peer = Peer::spawn(&app, None);
        let params = immediate();
        let cgroups = [sidecar.id()];
        let (dir, app_id) = (app.dir().to_path_buf(), app.id());
        // The kernel's timestamp of the exit, for either way of waiting.
        let mut rx = kernel.events.subscribe();
        let watched = kernel.watch(&[app_id], watch::EXITS).unwrap();
        let (report, killed) = rt.block_on(async {
            let k = kernel.clone();
            // Odd rounds: inotify on cgroup.events alone, the agent's
            // fallback where the exit program cannot attach.
            let exited = async move {
                all_exited(by_event.then_some(&k), vec![dir])
                    .await
                    .expect("watching the app's cgroup");
            };
            let drain = engine::run(&kernel, &cgroups, params, Some(exited), |_| {});
            let kill = async {
                // Let the drain start watching first, and let the kernel's
                // rate limit on cgroup.events notifications (10 ms after the
                // previous one, here the process joining the cgroup) pass:
                // a real container has run far longer than that.
                tokio::time::sleep(Duration::from_millis(30)).await;
                let before = monotonic_ns();
                tokio::task::spawn_blocking(move || peer.kill()).await.unwrap();
                before
            };
            let (r, killed) = tokio::join!(drain, kill);
            (r.unwrap(), killed)
        });
        drop(watched);
        assert_eq!(report.reason, Reason::ContainersExited, "exit {i}: {report:?}");
        // Usually there already; inotify may have won the race, though.
        let exit_ns = rt
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(2), async {
                    loop {
                        match rx.recv().await {
                            Ok(e) if e.kind == event::EMPTIED && e.cgroup_id == app_id => return e.ts_ns,
                            Ok(_) | Err(RecvError::Lagged(_)) => {}
                            Err(RecvError::Closed) => panic!("the event reader stopped"),
                        }
                    }
                })
                .await
            })
            .unwrap_or_else(|_| panic!("exit {i}: the kernel sent no exit event for the app's cgroup"));
        let ms = |from: u64| report.release_ns.saturating_sub(from) as f64 / 1e6;
        let out = if by_event { &mut event } else { &mut inotify };
        out.push((ms(exit_ns), ms(killed)));
    }
    let split = |v: &[(f64, f64)]| -> (Vec<f64>, Vec<f64>) { v.iter().copied().unzip() };
    let ((ev_exit, ev_kill), (in_exit, in_kill)) = (split(&event), split(&inotify));
    println!("release latency after the container's exit (--after-containers), interleaved:");
    println!("  from the kernel's exit (the cgroup's last process gone):");
    let (e50, e99) = summary("graceful (exit event)", ev_exit);
    let (i50, i99) = summary("inotify on cgroup.events", in_exit);
    println!("  from the kill (includes the process's own exit):");
    let (k50, k99) = summary("graceful (exit event)", ev_kill);
    summary("inotify on cgroup.events", in_kill);
    println!(
        "{{\"bench\":\"after-containers-latency\",\"p50_ms\":{e50:.3},\"p99_ms\":{e99:.3},\"from_kill_p50_ms\":{k50:.3},\"from_kill_p99_ms\":{k99:.3},\"inotify_p50_ms\":{i50:.3},\"inotify_p99_ms\":{i99:.3}}}"
    );
}

/// `--policy quiet` through the real gate: a pool of keep-alive
/// connections goes idle after one last request; the drain should end the
/// quiet window after that request's payload, not later. Measured from the
/// kernel's timestamp of the last inbound payload plus the window.
#[test]
#[ignore = "a benchmark: cargo xtask bench release-latency"]
fn bench_quiet_release_latency() {
    require_root!();
    let drains = count("GRACEFUL_BENCH_QUIET", 100);
    // Long enough for the request to land inside the drain, however slowly
    // the check that the drain has started comes back.
    const WINDOW_MS: u64 = 250;
    let mut agent = Agent::with_gate();
    agent.start();
    let pod = SimPod::create(1);
    let lb = Cgroup::unique("lb");
    let (_app, mut pool) = held_connections(pod.container(0), &lb, 8);
    let app_id = pod.container(0).id();
    // The payload timestamp is not in `graceful cgroups -o json`: read the map.
    let counters = graceful::bpf::maps::Counters::open(&PinDir::new(&agent.pin_dir)).unwrap();
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
