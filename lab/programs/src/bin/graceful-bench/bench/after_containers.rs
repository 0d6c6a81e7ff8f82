//! Release latency after a container's exit (`--after-containers`): from
//! the kernel's timestamp of its cgroup emptying, and from the kill,
//! through the exit event against inotify on cgroup.events, interleaved.

use std::time::Duration;

use graceful::drain::{engine, exits::all_exited, policy::Reason};
use graceful_common::{event, watch};
use tokio::sync::broadcast::error::RecvError;

use super::{
    programs::{self, immediate},
    stats::summary,
};
use graceful_tests::{cgroup::Cgroup, monotonic_ns, peer::Peer};

/// `exits` containers killed each way (the event, inotify), taking turns.
pub fn run(exits: usize) {
    let (_agent, rt, kernel) = programs::without_agent();
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
