//! The `wirecheck` command line: flags (clap), one dispatch per subcommand, and the terminal
//! (progress bars, the summary). A thin layer: the runner library (`conformance`) plans, runs and
//! judges, the results crate (`wirecheck-results`) writes and reads results; `main.rs` parses
//! and dispatches.

pub mod cli;
pub mod console;
pub mod dispatch;
pub mod outcome;
pub mod run_config;
pub mod sources;
pub mod status;

pub use dispatch::dispatch;
