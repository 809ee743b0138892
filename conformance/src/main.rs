//! `wirecheck`: see `wirecheck --help` and docs/readme-runner.md.

use std::process::ExitCode;

use clap::Parser as _;
use conformance::cli::{Cli, dispatch};

fn main() -> ExitCode {
    dispatch(Cli::parse())
}
