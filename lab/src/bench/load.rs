//! `cargo xtask bench load`: the churn bench's load alone, for one window,
//! with no agent started or stopped. A profiling aid: run it under
//! `perf record -a` once with an agent attached and once without, and
//! compare where the kernel's time goes.

use std::time::Duration;

use super::tcp_load::{self, Config};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Length of the measured window, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Client threads (and as many server threads).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Client source addresses 127.0.0.2 … 127.0.0.(1+N) (0: 127.0.0.1 only).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(0..=200))]
    pub sources: u8,
    /// Percentage of connections the client aborts with RST.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub rst_percent: u8,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let out = tcp_load::measure(&Config {
        concurrency: args.concurrency,
        sources: args.sources,
        rst_percent: args.rst_percent,
        warmup: Duration::from_millis(500),
        window: Duration::from_secs_f64(args.seconds),
    })?;
    println!(
        "{:.0} conn/s, {:.1} CPU µs per connection, other processes {:.1} % of the CPUs, {} failed connects",
        out.per_second(),
        out.cpu_us_per_conn(),
        out.others_pct(),
        out.connect_errors
    );
    Ok(())
}
