//! `graceful-rollout`: a rolling replacement of N pods behind HAProxy on a
//! simulated node, run three ways (no preStop hook, `preStop: sleep 15`,
//! graceful's gate), and the table that compares them. `cargo xtask
//! rollout` builds and runs it; the simulation is
//! `graceful_tests::rollout` (its pods' app is `graceful-peer rollout-app`,
//! which it finds beside itself). Needs root.

use std::time::Duration;

use clap::Parser;
use graceful_tests::rollout::{self, report, stop, Config, Mode};

#[derive(Debug, Parser)]
#[command(
    name = "graceful-rollout",
    bin_name = "cargo xtask rollout",
    about = "Roll a deployment's pods behind HAProxy on a simulated node, with no preStop hook, \
             with `preStop: sleep`, and with graceful's gate; print failed requests, p99 latency, \
             time per pod termination and total rollout time."
)]
struct RunArgs {
    /// Pods in the deployment; each is replaced once, one at a time.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pods: u16,
    /// From the start of a pod's termination to its endpoint leaving the load balancer.
    #[arg(long, default_value = "2s", value_parser = graceful::duration::parse)]
    propagation: Duration,
    /// Each request's time in the app.
    #[arg(long, default_value = "100ms", value_parser = graceful::duration::parse)]
    latency: Duration,
    /// The hook of the `sleep` run: `preStop: sleep <this>`.
    #[arg(long, default_value = "15s", value_parser = graceful::duration::parse)]
    sleep: Duration,
    /// Requests per second, sent on schedule whatever the answers (open loop).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=5000))]
    rate: u32,
    /// Keep-alive from the clients to HAProxy and from HAProxy to the pods (the default).
    #[arg(long, overrides_with = "no_keepalive")]
    keepalive: bool,
    /// A new connection for every request, on both sides of HAProxy.
    #[arg(long, overrides_with = "keepalive")]
    no_keepalive: bool,
    /// The runs, in order [default: none,sleep,graceful; with --cluster also sleep-action
    /// (the kubelet's `sleep` action) and http-gate (graceful's httpGet gate), which need a
    /// kubelet: none,sleep,sleep-action,graceful,http-gate].
    #[arg(long, value_delimiter = ',')]
    modes: Option<Vec<Mode>>,
    /// graceful-wait's flags in the graceful run [default: --policy drained --settle 500ms --min 1s --max 25s].
    #[arg(long, allow_hyphen_values = true)]
    wait_args: Option<String>,
    /// Print the table as a JSON array, one object per run (progress still goes to stderr).
    #[arg(long)]
    json: bool,
    /// On the test node of `cargo xtask cluster` instead: deploy/examples/web (3 nginx pods)
    /// behind a real ClusterIP Service, `kubectl rollout restart`, a connection per request from
    /// the node (through kube-proxy). Takes --modes and --rate; the hooks are the overlays' in
    /// tests/overlays/web-*.
    #[arg(long)]
    cluster: bool,
}

fn main() -> anyhow::Result<()> {
    let a = RunArgs::parse();
    anyhow::ensure!(
        graceful_tests::is_root(),
        "the rollout creates cgroups, network namespaces and loads eBPF programs: run it as root"
    );
    if a.cluster {
        let cfg = graceful_tests::cluster::rollout::Config {
            modes: a.modes.unwrap_or_else(|| Mode::CLUSTER.to_vec()),
            rate: a.rate,
        };
        let runs = graceful_tests::cluster::rollout::run(&graceful_tests::cluster::Cluster::get(), &cfg)?;
        if a.json {
            println!("{}", report::json(&runs));
        } else {
            println!();
            print!("{}", report::table(&runs));
        }
        return Ok(());
    }
    // The agent binary sits beside this one unless GRACEFUL_BIN says otherwise.
    if std::env::var_os("GRACEFUL_BIN").is_none() {
        let exe = std::env::current_exe()?;
        std::env::set_var("GRACEFUL_BIN", exe.with_file_name("graceful"));
    }
    let cfg = Config {
        pods: a.pods as usize,
        propagation: a.propagation,
        latency: a.latency,
        sleep: a.sleep,
        rate: a.rate,
        keepalive: !a.no_keepalive,
        modes: a.modes.unwrap_or_else(|| Mode::ALL.to_vec()),
        wait_args: a
            .wait_args
            .map(|w| w.split_whitespace().map(str::to_string).collect()),
        ..Config::default()
    };
    stop::on_signals();
    let runs = rollout::run(&cfg)?;
    if a.json {
        println!("{}", report::json(&runs));
    } else {
        println!();
        print!("{}", report::table(&runs));
    }
    Ok(())
}
