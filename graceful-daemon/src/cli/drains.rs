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
    let d: Drains = match client::get(api, "/v1/drains") {
        Ok(d) => d,
        Err(e @ ClientError::Down(_)) => {
            anyhow::bail!("{e}: drains are kept by the running daemon (start it, or pass --api-socket)")
        }
        Err(e) => return Err(e.into()),
    };
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&d)?),
        Output::Table => print!("{}", render(&d)),
    }
    Ok(0)
}

#[cfg(test)]
mod tests;
