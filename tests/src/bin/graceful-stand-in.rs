//! The program inside the example images of the local cluster test: it
//! plays Envoy and coraza-spoa, the programs of deploy/examples that can't
//! be had there, and the app of the benchmarks and of the OPA examples (OPA
//! itself is built here: see the lab's cluster build). Each role holds
//! connections and answers SIGTERM the way its program does; see
//! `graceful_tests::stand_in`. It runs as PID 1 of its container, built
//! static (musl).

use clap::{Parser, Subcommand};
use graceful_tests::stand_in::{app, mesh_proxy, waf_agent, Signals};

#[derive(Parser)]
#[command(
    name = "graceful-stand-in",
    about = "Stand-ins for Envoy and coraza-spoa in the examples' test images, and their apps"
)]
struct Cli {
    #[command(subcommand)]
    role: Role,
}

#[derive(Subcommand)]
enum Role {
    /// Envoy: forwards TCP connections (inbound to the app, outbound to its
    /// backend); on SIGTERM exits at once, dropping them all.
    MeshProxy(mesh_proxy::Args),
    /// coraza-spoa: an SPOP 2.0 agent for HAProxy's SPOE that denies paths
    /// and queries containing "attack"; on SIGTERM closes its listener,
    /// answers frames in flight and exits.
    WafAgent(waf_agent::Args),
    /// A benchmark app answering every request "200 ok" (with --authz,
    /// once OPA allows it); on SIGTERM prints {"sigterm_monotonic_ns":N}
    /// and shuts down gracefully.
    App(app::Args),
}

fn main() -> anyhow::Result<()> {
    // First, before any thread exists: they all inherit the blocked mask.
    let signals = Signals::block()?;
    match Cli::parse().role {
        Role::MeshProxy(args) => mesh_proxy::run(args, signals),
        Role::WafAgent(args) => waf_agent::run(args, signals),
        Role::App(args) => app::run(args, signals),
    }
}
