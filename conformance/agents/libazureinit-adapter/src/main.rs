//! `libazureinit-adapter`: the published libazureinit 0.1.1 (azure-init's library on
//! crates.io), unmodified, as a wirecheck agent.
//!
//! `ready` does what the azure-init binary of that release did around its provisioning work:
//! `imds::query_imds`, the library's IMDS readers, `goalstate::get_goalstate`, then
//! `goalstate::report_health` (always `Ready`). The library has no failure, in-progress or KVP
//! report, no retry and no timeout; the adapter adds none of them.
//!
//! The library's URLs are fixed to 168.63.129.16 and 169.254.169.254, so the adapter runs only
//! where nothing else is reachable (see `isolation`).

mod flow;
mod isolation;
mod relay;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit statuses (a user interface; the wirecheck profile's `[exit]` table relies on them).
pub mod exit {
    /// The wireserver accepted the Ready report.
    pub const REPORTED: u8 = 0;
    /// Nothing was accepted: IMDS, the goal state or the health POST failed.
    pub const NOT_REPORTED: u8 = 1;
    /// Bad usage, or refused to run outside an isolated network namespace.
    pub const USAGE: u8 = 2;
    /// The action does not exist in libazureinit 0.1.1 (nothing was sent).
    pub const UNSUPPORTED: u8 = 3;
}

#[derive(Debug, Parser)]
#[command(
    name = "libazureinit-adapter",
    version,
    about = "Run the published libazureinit 0.1.1 (azure-init's library), unmodified, against a fake wireserver",
    long_about = "Run the published libazureinit 0.1.1 (azure-init's library), unmodified, against a \
fake wireserver.\n\nThe library sends to the real 168.63.129.16 and 169.254.169.254 and has no \
endpoint override. The adapter therefore runs only in a network namespace whose only interface \
is `lo` (`fake-wireserver sandbox -- libazureinit-adapter ready`, or `unshare --net` with \
HTTP_PROXY pointing at the fake's proxy listener). Started anywhere else with HTTP_PROXY set to a \
loopback proxy (as `wirecheck run` does for `attach = \"proxy\"`), it moves itself into a new \
network namespace (`unshare --net`, with `--user --map-root-user` when not root) and relays only \
to that proxy; without one it refuses (exit 2).\n\nExit status: 0 Ready accepted, 1 not reported, \
2 usage or refused to run, 3 action not in libazureinit 0.1.1."
)]
struct Cli {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// IMDS (`imds::query_imds` and its readers), goal state, then the Ready report
    /// (`goalstate::report_health`).
    Ready {
        /// Skip the IMDS query (the azure-init binary always made it first).
        #[arg(long)]
        no_imds: bool,
    },
    /// libazureinit 0.1.1 has no failure report: prints why and exits 3 without sending anything.
    Failure {
        /// Accepted for a uniform command line; never sent.
        #[arg(long)]
        reason: Option<String>,
        /// Accepted for a uniform command line (`KEY=VALUE`); never sent.
        #[arg(long)]
        data: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.action {
        Action::Failure { .. } => {
            eprintln!(
                "libazureinit-adapter: libazureinit 0.1.1 has no failure report \
                 (goalstate::report_health always sends Ready; docs/protocol.md §4.2: Ready only); \
                 nothing sent"
            );
            ExitCode::from(exit::UNSUPPORTED)
        }
        Action::Ready { no_imds } => match isolation::ensure_isolated() {
            Ok(isolation::Placement::Here) => ExitCode::from(flow::ready(!no_imds)),
            Ok(isolation::Placement::Child(status)) => ExitCode::from(status),
            Err(refusal) => {
                eprintln!("libazureinit-adapter: {refusal:#}");
                ExitCode::from(exit::USAGE)
            }
        },
    }
}
