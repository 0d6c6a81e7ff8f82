//! The `graceful` binary: the node agent (`graceful daemon`) and its CLI.

use clap::Parser;

fn main() {
    // clap prints its own usage errors and exits 2.
    let cli = graceful::cli::Cli::parse();
    match graceful::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // One line: the error and its causes.
            eprintln!("graceful: {e:#}");
            std::process::exit(1);
        }
    }
}
