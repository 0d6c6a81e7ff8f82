//! On the test node's real kubelet: from a deleted pod's last inbound
//! close to its app receiving SIGTERM, through graceful's three gates
//! (exec, httpGet, socket; each with the agent's part and the kubelet's
//! apart), a 1 s poller in the hook and `preStop: sleep`, side by side in
//! one run. The measurement is [`graceful_tests::cluster::release`]; this
//! runs it and prints its table.

use graceful_tests::cluster::{
    release::{self, percentile, Config, Hook},
    Cluster,
};

/// Runs `cfg`'s rounds on `cluster` and prints the table.
pub fn run(cluster: &Cluster, cfg: &Config) {
    let mut all = release::measure(cluster, cfg);
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
    println!("\ngraceful's gates, their path apart:");
    println!(
        "{:<44} {:>4} {:>10} {:>10} {:>10}",
        "GATE: PART", "N", "P50", "P99", "MAX"
    );
    for hook in Hook::ALL.into_iter().filter(|h| h.gated()) {
        for (what, v) in [
            (
                "close to the agent's release",
                all.agent_ms.entry(hook).or_default(),
            ),
            ("the release to SIGTERM", all.kubelet_ms.entry(hook).or_default()),
        ] {
            v.sort_by(f64::total_cmp);
            let gate = hook.to_string();
            let label = format!("{}: {what}", gate.trim_start_matches("graceful: "));
            println!(
                "{label:<44} {:>4} {:>7.2} ms {:>7.2} ms {:>7.2} ms",
                v.len(),
                percentile(v, 50.0),
                percentile(v, 99.0),
                v.last().copied().unwrap_or(f64::NAN)
            );
        }
    }
    for hook in Hook::ALL.into_iter().filter(|h| h.gated()) {
        let p = percentile(&all.sigterm_ms[&hook], 99.0);
        println!("{hook}: p99 {p:.1} ms (target: at most 50 ms)");
    }
}
