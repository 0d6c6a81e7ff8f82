//! The `graceful` binary: the node agent (`graceful daemon`) and its CLI.

use clap::Parser;

fn main() {
    let cli = match graceful::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line, not clap's usage block: the error and where to look.
            let first = graceful_api::usage_error_line(&e.render().to_string());
            eprintln!("graceful: {first} (see `graceful --help`)");
            std::process::exit(2);
        }
    };
    match graceful::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // One line: the error and its causes.
            eprintln!("graceful: {e:#}");
            std::process::exit(1);
        }
    }
}
