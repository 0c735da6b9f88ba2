//! The `rnx` binary: parse the command line, run it, turn the outcome into
//! an exit code (see `exit.rs`).

use std::process::ExitCode;

use clap::Parser;
use rnx::args::Cli;

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    match rnx::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rnx: error: {e}");
            ExitCode::from(rnx::exit::for_error(&e))
        }
    }
}

/// Debug logs on stderr, only when `RNX_LOG` is set (e.g. `RNX_LOG=debug`).
fn init_tracing() {
    if std::env::var_os("RNX_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_env("RNX_LOG"))
            .with_writer(std::io::stderr)
            .init();
    }
}
