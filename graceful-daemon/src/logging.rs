//! One tracing subscriber for the whole process, configured once.

use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, Default, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Logs go to stderr; `RUST_LOG` filters them (default `info`).
///
/// kube-rs's own request logging is off unless `RUST_LOG` names
/// `kube_client`: it logs an ERROR per failed request, so an API server
/// that is down would flood the log on every retry. The agent logs the
/// API's state itself, once per change (`graceful::kube::watch`).
pub fn init(format: LogFormat) {
    let env = std::env::var("RUST_LOG").unwrap_or_default();
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    if !env.contains("kube_client") {
        if let Ok(d) = "kube_client=off".parse() {
            filter = filter.add_directive(d);
        }
    }
    use std::io::IsTerminal as _;
    // Colours only for a person at a terminal, never in files or pod logs.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
