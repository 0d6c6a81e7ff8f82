//! `graceful drains`: what the gate is holding, what it released and why,
//! and the terminating pods the agent watches. Drains live in the running
//! daemon's memory, so this asks its local API.

pub use graceful_api::views::drains::{render, Drains};

use super::{
    client::{self, ClientError},
    table::Output,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `json`: `{"active": [...], "released": [...], "terminating": [...], "terminated": [...]}`.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

pub fn run(api: &std::path::Path, args: Args) -> anyhow::Result<i32> {
    super::require_root("graceful drains")?;
    let d = fetch(api)?;
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&d)?),
        Output::Table => print!("{}", render(&d)),
    }
    Ok(0)
}

/// `/v1/drains` from the running daemon.
pub fn fetch(api: &std::path::Path) -> anyhow::Result<Drains> {
    match client::get(api, "/v1/drains") {
        Ok(d) => Ok(d),
        Err(e @ ClientError::Down(_)) => {
            anyhow::bail!("{e}: drains are kept by the running daemon (start it, or pass --api-socket)")
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests;
