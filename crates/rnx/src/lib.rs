//! `rnx`, the Joblet command-line client, as a library so tests can reach
//! its parts.
//!
//! The flow is one way: [`args`] (clap syntax, plain data, values checked by
//! [`parsers`]) → [`settings`] (resolved once: the validated job request,
//! the config file and node) → [`commands`] (connect with [`client`], call
//! the node) → [`printer`] (the one place that writes results, as text or
//! JSON) → [`exit`] (documented exit codes). [`follow`] copies job output
//! exactly once across reconnects. `rnx workflow` reads and checks its file
//! locally with `joblet-workflow` (in [`settings`]), decides what to upload
//! in [`workflow_uploads`], and shows runs through [`workflow_view`] (JSON)
//! and [`workflow_text`] (text). `rnx node` shows a cluster's nodes through
//! [`node_view`].
//!
//! rnx talks to the daemon only through the gRPC API in `joblet-proto`; it
//! must not depend on the daemon's crates (store, shim) or read its files
//! other than the client config it is pointed at.

pub mod args;
pub mod audit_view;
pub mod client;
pub mod commands;
pub mod config;
pub mod error;
pub mod exec_view;
pub mod exit;
pub mod follow;
pub mod gpu_view;
pub mod node_view;
pub mod parsers;
pub mod printer;
pub mod runtime_files;
pub mod runtime_view;
pub mod settings;
pub mod table;
pub mod terminal;
pub mod upload;
pub mod view;
pub mod volume_view;
pub mod workflow_text;
pub mod workflow_uploads;
pub mod workflow_view;

use args::Cli;
use config::LookupEnv;
use error::Error;
use settings::Settings;

/// Runs a parsed command line against the process environment; returns the
/// exit code on success.
pub fn run(cli: Cli) -> Result<u8, Error> {
    let settings = Settings::resolve(cli, &LookupEnv::from_process())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let result = runtime.block_on(commands::run(settings));
    // The process exits next: its connection and the runtime's memory go
    // with it, without a shutdown of every task first (the output is
    // flushed by now, and by `main`'s return for the rest).
    std::mem::forget(runtime);
    result
}
