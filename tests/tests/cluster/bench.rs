//! `cargo xtask bench cluster-release` runs this (ignored) measurement
//! and prints its figures; see `graceful_tests::cluster::release`.

use graceful_tests::cluster::release::{self, percentile, Config, Hook};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore = "a benchmark: cargo xtask bench cluster-release"]
fn bench_cluster_release() {
    let (cluster, _serial) = crate::node();
    let cfg = Config {
        rounds: env("GRACEFUL_BENCH_ROUNDS", 5) as usize,
        batch: env("GRACEFUL_BENCH_BATCH", 10) as usize,
        sleep: std::time::Duration::from_secs(env("GRACEFUL_BENCH_SLEEP_S", 15)),
        spacing: std::time::Duration::from_millis(env("GRACEFUL_BENCH_SPACING_MS", 1000)),
    };
    let mut all = release::measure(&cluster, &cfg);
    let figures = &mut all.sigterm_ms;
    println!(
        "\nfrom a deleted pod's last inbound close to its app's SIGTERM, on the kubelet ({} rounds of {} pods each way, taking turns; one pod's clients close every {} ms):",
        cfg.rounds, cfg.batch, cfg.spacing.as_millis()
    );
    println!(
        "{:<34} {:>4} {:>10} {:>10} {:>10}",
        "HOOK", "N", "P50", "P99", "MAX"
    );
    for hook in Hook::ALL {
        let v = figures.entry(hook).or_default();
        v.sort_by(f64::total_cmp);
        let label = match hook {
            Hook::Sleep => format!("{hook} {}", cfg.sleep.as_secs()),
            _ => hook.to_string(),
        };
        println!(
            "{label:<34} {:>4} {:>7.1} ms {:>7.1} ms {:>7.1} ms",
            v.len(),
            percentile(v, 50.0),
            percentile(v, 99.0),
            v.last().copied().unwrap_or(f64::NAN)
        );
    }
    for (what, v) in [
        ("  of which: close to the agent's release", &mut all.agent_ms),
        ("  then: the release to SIGTERM", &mut all.kubelet_ms),
    ] {
        v.sort_by(f64::total_cmp);
        println!(
            "{what:<34} {:>4} {:>7.2} ms {:>7.2} ms {:>7.2} ms",
            v.len(),
            percentile(v, 50.0),
            percentile(v, 99.0),
            v.last().copied().unwrap_or(f64::NAN)
        );
    }
    let g = percentile(&all.sigterm_ms[&Hook::Graceful], 99.0);
    println!("graceful's p99: {g:.1} ms (target: at most 50 ms)");
}
