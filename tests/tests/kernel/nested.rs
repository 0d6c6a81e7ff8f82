//! State changes in a softirq that interrupts the programs themselves
//! (the stress is `graceful_tests::nested`): under the sock_ops design,
//! with the agent's periodic repair pass off, every count is exact, live
//! and total, and nothing needed catching.

use graceful::kernel::bpf::{maps::read_stats, paths::PinDir};
use graceful_common::stat;
use graceful_tests::{agent::Agent, nested};

use crate::{kernel_figures, repaired_sockets, require_root};

#[test]
fn live_counts_stay_exact_when_softirqs_interrupt_the_programs() {
    require_root!();
    let ns = match nested::shaped_namespace() {
        Ok(ns) => ns,
        Err(why) => {
            eprintln!("SKIPPED nested: {why}; the host run covers it");
            return;
        }
    };
    let mut agent = Agent::new();
    agent.daemon_args = vec!["--repair-interval".into(), "0s".into()];
    agent.start();
    let n: u64 = std::env::var("GRACEFUL_CHURN_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(5_000, |s| (5_000.0 * s).round().max(200.0) as u64);
    let out = nested::run(&agent, &ns, n);
    eprintln!("nested: {out:?}\n{}", kernel_figures(&agent));
    assert!(out.exact(), "{out:?}");
    assert_eq!(out.caught, 0, "nothing to catch under sock_ops: {out:?}");
    assert_eq!(
        read_stats(&PinDir::new(&agent.pin_dir)).unwrap()[stat::UNDERFLOW as usize],
        0
    );
    assert_eq!(repaired_sockets(&agent), 0);
}
