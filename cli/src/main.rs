//! `wirecheck`: see `wirecheck --help` and docs/running.md.

use std::process::ExitCode;

use clap::Parser as _;
use wirecheck::cli::Cli;
use wirecheck::dispatch;

fn main() -> ExitCode {
    // Every run's fakes are in this process, each agent listener up to 1,024 connections; agents
    // get the original soft limit back (`fdlimit::restore_for_child` in exec).
    fake_wireserver::fdlimit::raise_to_hard_limit();
    dispatch(Cli::parse())
}
