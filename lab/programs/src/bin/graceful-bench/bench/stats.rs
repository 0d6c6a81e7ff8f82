//! Percentiles of a bench's samples, and the one line each figure prints.

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Prints `name`'s samples (milliseconds): count, min, p50, p99, max;
/// returns (p50, p99).
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
