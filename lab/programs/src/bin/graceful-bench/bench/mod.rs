//! The benchmarks' measurements: figures printed side by side in one run,
//! not asserted. The `graceful-bench` binary runs them (`cargo xtask bench
//! release-latency`, `cargo xtask bench cluster-release`); each needs root.
//!
//! On this machine, with the real agent's programs (the gate's release
//! latency, `release-latency`):
//!
//! - [`release`]: a drain's release after the pod's last inbound close,
//!   against a sock_diag poller at 1 s;
//! - [`after_containers`]: an `--after-containers` drain's release after
//!   the container's exit, through the exit event against inotify;
//! - [`terminating`]: a terminating pod's report after its last inbound
//!   close (the agent watching the fake API);
//! - [`quiet`]: a `--policy quiet` drain's release after its window;
//! - [`excluding`]: the same with exclusions in place, and a scraper and
//!   probes they leave out busy throughout;
//! - [`designs`]: the floors and the softirq stress that `cargo xtask bench
//!   designs` runs under each counting design;
//! - [`http_gate`]: the httpGet gate's response after the pod's last
//!   inbound close (the agent in the pod's namespace, the hook from the
//!   node's).
//!
//! - [`handover`]: successive agents taking the node over from each other
//!   while a thousand drains are held: the gate's pause, hooks cut, RSS.
//!
//! On the test node of `cargo xtask cluster`:
//!
//! - [`cluster_release`]: a deleted pod's last inbound close to its app's
//!   SIGTERM, through the gate, a 1 s poller and `preStop: sleep` (the
//!   measurement itself is `graceful_tests::cluster::release`; this prints its table).
//!
//! Shared: [`stats`] (the percentiles and the line each figure is printed
//! as) and [`programs`] (the programs without an agent, for the drains
//! that run the engine in-process).

pub mod after_containers;
pub mod cluster_release;
pub mod designs;
pub mod excluding;
pub mod handover;
pub mod http_gate;
pub mod programs;
pub mod quiet;
pub mod release;
pub mod stats;
pub mod terminating;

/// One timed drain through the httpGet gate at `gate` (drained, settle 0):
/// the hook sent from `node`, `close` run once the agent lists the drain.
/// The answer, and when its last byte came (CLOCK_MONOTONIC ns).
pub fn timed_http_drain(
    agent: &graceful_tests::agent::Agent,
    node: &graceful_tests::netns::NetNs,
    gate: std::net::SocketAddr,
    close: impl FnOnce(),
) -> (std::io::Result<graceful_tests::http_hook::Answer>, u64) {
    std::thread::scope(|t| {
        let hook = t.spawn(move || {
            let a = graceful_tests::http_hook::get(
                node,
                gate,
                "/drain?policy=drained&settle=0s&min=0s&max=20s",
                std::time::Duration::from_secs(30),
            );
            (a, graceful_tests::monotonic_ns())
        });
        graceful_tests::gate::wait_draining(agent, 1);
        close();
        hook.join().unwrap()
    })
}

/// The report of drain `i`'s answer, which must be 200 and `drained`.
pub fn drained_report(
    i: usize,
    answer: std::io::Result<graceful_tests::http_hook::Answer>,
) -> serde_json::Value {
    let answer = answer.unwrap_or_else(|e| panic!("drain {i}: {e}"));
    let report = answer.json();
    assert_eq!(
        (answer.status, report["reason"].as_str()),
        (200, Some("drained")),
        "drain {i}: {answer:?}"
    );
    report
}
