//! `graceful-stand-in ROLE`: the program inside the example images of the
//! test node's cluster tests (`cargo xtask cluster`), built static (musl)
//! and run as PID 1 of its container. A program of the lab: the images
//! are the lab's (`lab/src/cluster/images.rs`).
//!
//! Stand-ins for the programs of `deploy/examples`, for the local cluster
//! test: Envoy ([`mesh_proxy`]), coraza-spoa ([`waf_agent`]), and an
//! [`app`] (the benchmarks', and the OPA examples' app that asks OPA, built
//! here, about every request: [`authz`]). None of those programs can be
//! had where the test runs, and the test only relies on two things about
//! each: how it holds connections, and what it does on SIGTERM. Each role
//! here does those two things the way its program does, and nothing else.
//! They run as `graceful-stand-in ROLE` in
//! images named for what they are (`stand-in/mesh-proxy`, ...).
//!
//! Each runs as PID 1 of its container. The kernel gives PID 1 no default
//! signal actions, so a SIGTERM it doesn't handle is dropped. [`Signals`]
//! blocks SIGTERM and SIGINT before any thread starts (every thread inherits
//! the mask, and a blocked signal is never dropped), and the main thread
//! then takes them with sigwait(2): each role's shutdown runs in normal
//! thread context, not in a signal handler.

use clap::{Parser, Subcommand};

mod app;
mod authz;
mod http;
mod mesh_proxy;
mod server;
mod signals;
mod spop;
mod waf_agent;

use graceful_test_support::http_response;
use signals::Signals;

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
