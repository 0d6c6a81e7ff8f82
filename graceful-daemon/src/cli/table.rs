//! The table-or-JSON choice the commands share; the tables themselves are
//! the contract's ([`graceful_api::views::table`]).

/// `-o table|json`. JSON is a stable contract for scripts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    #[default]
    Table,
    Json,
}

pub use graceful_api::views::table::{dash, n, table};
