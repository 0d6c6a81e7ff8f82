//! `kubectl graceful`: what each node's graceful agent sees (pods and
//! their live connections, drains, pinned counts per cgroup, the doctor's
//! checks), for one node (`--node`) or every node, through the API server.
//!
//! Each agent serves its whole local API on its pod's loopback only; this
//! plugin reaches it as `kubectl port-forward` does (`pods/portforward`),
//! so what a user may see is what their own RBAC grants: `list` pods and
//! `get` and `create` on pods/portforward in the agent's namespace. Nothing is
//! exec'd.
//!
//! - [`args`]: the command line (kubectl's plugin conventions);
//! - [`agents`]: the agent pods, by node;
//! - [`forward`]: one GET on an agent's API through a port-forward;
//! - [`show`]: the answers, as tables (`graceful`'s own) or JSON;
//! - [`events`]: what an app team reads with its own RBAC, in its own
//!   namespace: the Events the agents posted on its pods (`history`,
//!   `at-risk --events`), with no right in the agents' namespace;
//! - [`adopt`]: the injection policy's change written into a workload,
//!   for clusters before 1.36 (server-side apply);
//! - [`preflight`]: before an install, what would stop the agent on each
//!   node (pods like the agent's, made and deleted: it needs `create` on
//!   pods in the namespace where the others need only port-forwards).

mod adopt;
mod agents;
mod args;
mod events;
mod forward;
mod preflight;
mod show;

use clap::Parser as _;

fn main() {
    // On macOS, rustls's crypto is Graviola, installed before kube-rs builds
    // its TLS config (see Cargo.toml); elsewhere ring, rustls's default.
    // Err only if a provider is installed already, which none is yet.
    #[cfg(target_os = "macos")]
    let _ = rustls_graviola::default_provider().install_default();
    let cli = match args::Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            let first = graceful_api::usage_error_line(&e.render().to_string());
            eprintln!("kubectl graceful: {first} (see `kubectl graceful --help`)");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kubectl graceful: {e}");
            std::process::exit(1);
        }
    };
    match rt.block_on(show::run(cli)) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("kubectl graceful: {e:#}");
            std::process::exit(1);
        }
    }
}
