//! `wirecheck`: see `wirecheck --help` and README.md ("Running the conformance suite").

use std::process::ExitCode;

use clap::Parser as _;
use conformance::cli::{Cli, dispatch};

fn main() -> ExitCode {
    dispatch(Cli::parse())
}
