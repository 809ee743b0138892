//! `provision-report`: the command-line face of the `reporter` library.

mod cli;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use reporter::kvp::pool::PoolError;
use reporter::{Flow, KvpOutcome, Outcome, Reporter, SetupError};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::prelude::*;

use cli::{Cli, LogLevel};

const EXIT_REPORTED: u8 = 0;
const EXIT_NOT_REPORTED: u8 = 1;
const EXIT_USAGE: u8 = 2;
/// The wireserver accepted the report, but the KVP record could not be written.
const EXIT_REPORTED_KVP_FAILED: u8 = 3;

fn main() -> ExitCode {
    // A file size limit (RLIMIT_FSIZE) reached while writing the pool must be an error (EFBIG)
    // that costs the KVP record, not SIGXFSZ killing the process before the report is sent.
    // SAFETY: setting a signal to SIG_IGN at the start of main, before any thread exists.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    // clap prints its own usage errors and exits 2.
    let cli = Cli::parse();
    let settings = match cli.settings() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("provision-report: error: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if settings.print_config {
        print!("{}", settings.effective.render(&settings.report));
        return ExitCode::from(EXIT_REPORTED);
    }
    init_logging(settings.log_level);
    let report_name = settings.report.name();
    let reporter = match Reporter::new(settings.config) {
        Ok(reporter) => reporter,
        Err(error) => return setup_failed(&error),
    };
    match reporter.report_blocking(&settings.report) {
        Ok(outcome) => finish(report_name, &outcome),
        Err(error) => setup_failed(&error),
    }
}

fn setup_failed(error: &SetupError) -> ExitCode {
    match error {
        SetupError::KvpKey(key) => {
            tracing::error!("--kvp-key: {key}; nothing was written or sent");
            ExitCode::from(EXIT_USAGE)
        }
        other => {
            tracing::error!("{other}; nothing was written or sent");
            ExitCode::from(EXIT_NOT_REPORTED)
        }
    }
}

fn finish(report_name: &str, outcome: &Outcome) -> ExitCode {
    let kvp = match &outcome.kvp {
        KvpOutcome::Written { path, index } => {
            format!("KVP record {index} in {}", path.display())
        }
        KvpOutcome::Disabled => "KVP off".to_owned(),
        KvpOutcome::NotApplicable => "no KVP record for in-progress reports".to_owned(),
        KvpOutcome::Failed(error @ PoolError::Compact { .. }) => {
            format!("KVP record written but the pool NOT compacted: {error}")
        }
        KvpOutcome::Failed(error) => format!("KVP NOT written: {error}"),
    };
    match &outcome.delivery {
        Ok(delivered) => {
            tracing::info!(
                "reported {report_name} over {} (HTTP {}) after {} attempt(s) in {:.2} s; vm id {} ({}); {kvp}",
                match delivered.flow {
                    Flow::Json => "JSON",
                    Flow::Xml => "XML",
                },
                delivered.status,
                delivered.attempts,
                delivered.elapsed.as_secs_f64(),
                outcome.identity.vm_id,
                outcome.identity.source,
            );
            if matches!(outcome.kvp, KvpOutcome::Failed(_)) {
                ExitCode::from(EXIT_REPORTED_KVP_FAILED)
            } else {
                ExitCode::from(EXIT_REPORTED)
            }
        }
        Err(error) => {
            tracing::error!("{report_name} report NOT accepted by the wireserver: {error}; {kvp}");
            ExitCode::from(EXIT_NOT_REPORTED)
        }
    }
}

fn init_logging(level: LogLevel) {
    let level = match level {
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Trace => LevelFilter::TRACE,
    };
    // Our own events at the chosen level; the HTTP stack's only when they are warnings.
    let filter = Targets::new()
        .with_target("reporter", level)
        .with_target("provision_report", level)
        .with_default(LevelFilter::WARN.min(level));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_target(false)
                .with_timer(tracing_subscriber::fmt::time::uptime()),
        )
        .with(filter)
        .init();
}
