//! `fake-wireserver`: run the fake as a process. Prints one JSON line with the listener
//! addresses when ready, serves until SIGINT/SIGTERM.

// Per-request allocations are spread over worker threads and freed on others; glibc's arenas
// contend there (perf: ~15% of the IMDS hot path in malloc/free), mimalloc does not.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod sandbox;

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use fake_wireserver::config::EffectiveConfig;
use fake_wireserver::{Fake, FakeConfig, Scenario};

/// Exit status for bad usage and bad scenario files.
const EXIT_USAGE: u8 = 2;
/// Exit status when the `--journal` file misses entries (a write to it failed).
const EXIT_JOURNAL_LOST: u8 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "fake-wireserver",
    version = env!("WIRECHECK_BUILD"),
    args_conflicts_with_subcommands = true,
    about = "A fake Azure wireserver + IMDS with scripted faults and a journal",
    after_help = "When every listener is ready, one JSON line with the resolved addresses and the admin token is printed on stdout:\n  {\"wireserver\":\"127.0.0.1:41234\",\"imds\":\"127.0.0.1:41235\",\"proxy\":null,\"admin\":\"127.0.0.1:41236\",\"admin_token\":\"<64-hex-digits>\"}\n\nAdmin API (admin listener only): GET /__admin/journal, POST /__admin/scenario[?origin=PATH], POST /__admin/reset, GET /__admin/served.\nEvery admin request needs `Authorization: Bearer <admin_token>` (else 401) and `Host: <admin address>` or `localhost:PORT`; requests with Origin or Sec-Fetch-* headers, and POSTs whose Content-Type is not application/toml or application/json, are refused with 403. A scenario is posted as application/toml.\n\nScenario files (body_file, imds.instance_file) load only regular files of at most 1 MiB from the scenario's own folder or an --allow-files folder; a scenario posted without ?origin=PATH has no folder of its own."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run COMMAND where the fake answers on the platform's real addresses (network, mount and
    /// PID namespaces; root).
    Sandbox(sandbox::SandboxArgs),
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Wireserver listener (port 0 = ephemeral; "off" = none).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0", value_parser = parse_listen)]
    wireserver: Listen,

    /// IMDS listener (port 0 = ephemeral; "off" = none).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0", value_parser = parse_listen)]
    imds: Listen,

    /// HostGAPlugin listener (WALinuxAgent's port 32526 API; default: none).
    #[arg(long, value_name = "ADDR")]
    hostplugin: Option<SocketAddr>,

    /// Proxy-mode listener: absolute-form targets routed by host (default: none).
    #[arg(long, value_name = "ADDR")]
    proxy: Option<SocketAddr>,

    /// Admin API listener; must be a loopback address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    admin: SocketAddr,

    /// Scenario file (TOML); without it the fake answers with its default documents.
    #[arg(long, value_name = "FILE", env = "FAKE_WIRESERVER_SCENARIO")]
    scenario: Option<PathBuf>,

    /// Also write the journal to FILE as JSON Lines (everything, flushed per entry).
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,

    /// Journal entries kept in memory (the admin API's window).
    #[arg(long, value_name = "N", default_value_t = fake_wireserver::journal::DEFAULT_CAPACITY)]
    journal_capacity: usize,

    /// Bytes the in-memory journal window retains at most (bodies, headers, ...); the oldest
    /// entries are dropped first. The --journal file still gets everything.
    #[arg(long, value_name = "BYTES", default_value_t = fake_wireserver::journal::DEFAULT_MAX_BYTES)]
    journal_max_bytes: usize,

    /// Request bodies over this many bytes are refused with 413.
    #[arg(long, value_name = "BYTES", default_value_t = fake_wireserver::DEFAULT_MAX_BODY)]
    max_body: usize,

    /// Seconds to wait for a request (and on an idle keep-alive connection).
    #[arg(long, value_name = "SECONDS", default_value_t = fake_wireserver::DEFAULT_READ_TIMEOUT.as_secs_f64())]
    read_timeout: f64,

    /// Scenarios may also load body files from DIR (repeatable; the variable takes a
    /// colon-separated list). Without it, only the scenario's own folder.
    #[arg(
        long,
        value_name = "DIR",
        env = "FAKE_WIRESERVER_ALLOW_FILES",
        value_delimiter = ':'
    )]
    allow_files: Vec<PathBuf>,

    /// Print the effective configuration (defaults, scenario file and flags merged) as TOML and
    /// exit.
    #[arg(long)]
    print_config: bool,
}

/// The ready line: the addresses (their fields and order unchanged), then the admin token.
#[derive(serde::Serialize)]
struct Ready<'a> {
    #[serde(flatten)]
    addresses: &'a fake_wireserver::Addresses,
    admin_token: Option<&'a str>,
}

#[derive(Debug, Clone, Copy)]
struct Listen(Option<SocketAddr>);

fn parse_listen(s: &str) -> Result<Listen, String> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(Listen(None));
    }
    s.parse::<SocketAddr>()
        .map(|a| Listen(Some(a)))
        .map_err(|e| format!("{e} (expected IP:PORT or \"off\")"))
}

fn main() -> ExitCode {
    // Inside a guest this binary also stands in for the provisioning tools (`useradd`, ...).
    if let Some(code) = sandbox::guest::stand_in_if_called_as_tool() {
        return ExitCode::from(code);
    }
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    if let Some(Command::Sandbox(args)) = cli.command {
        return match sandbox::run(args) {
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(e) => {
                eprintln!("fake-wireserver sandbox: {e:#}");
                ExitCode::from(sandbox::EXIT_SANDBOX_FAILED as u8)
            }
        };
    }
    match run(cli.serve) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fake-wireserver: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if !args.admin.ip().is_loopback() {
        eprintln!(
            "fake-wireserver: --admin {}: the admin API must listen on a loopback address",
            args.admin
        );
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    if !(args.read_timeout.is_finite() && args.read_timeout > 0.0) {
        eprintln!("fake-wireserver: --read-timeout must be a positive number of seconds");
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    for dir in &args.allow_files {
        if !dir.is_dir() {
            eprintln!(
                "fake-wireserver: --allow-files {}: not a directory",
                dir.display()
            );
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    }
    let scenario = match &args.scenario {
        Some(path) => match Scenario::from_file_allowing(path, &args.allow_files) {
            Ok(s) => s,
            Err(e) => {
                // The file is someone else's: its excerpt in the error may hold escapes.
                eprintln!(
                    "fake-wireserver: {}",
                    fake_wireserver::text::visible_lines(&e.to_string())
                );
                return Ok(ExitCode::from(EXIT_USAGE));
            }
        },
        None => Scenario::new(),
    };
    let mut config = FakeConfig::default()
        .scenario(scenario)
        .wireserver(args.wireserver.0)
        .imds(args.imds.0)
        .hostplugin(args.hostplugin)
        .admin(args.admin)
        .journal_capacity(args.journal_capacity)
        .journal_max_bytes(args.journal_max_bytes)
        .max_body_bytes(args.max_body)
        .read_timeout(fake_wireserver::scenario::seconds(args.read_timeout));
    if let Some(proxy) = args.proxy {
        config = config.proxy(proxy);
    }
    for dir in &args.allow_files {
        config = config.allow_files(dir);
    }
    if let Some(journal) = &args.journal {
        config = config.journal_file(journal);
    }

    if args.print_config {
        let effective = EffectiveConfig::new(&config, args.scenario.as_deref());
        print!("{}", effective.to_toml());
        return Ok(ExitCode::SUCCESS);
    }

    // Each agent listener holds up to 1,024 connections; the usual soft limit is 1,024 in all.
    fake_wireserver::fdlimit::raise_to_hard_limit();
    // A file size limit reached by the --journal file must be a failed write (EFBIG) that is
    // reported, not SIGXFSZ ending the fake. (Serve mode only: the sandbox's COMMAND must
    // inherit the default disposition.)
    // SAFETY: setting a signal to SIG_IGN before the runtime's threads exist.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        // Handlers first: a SIGTERM sent right after the ready line must be a clean exit, not
        // the default action.
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut interrupt =
            signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let fake = Fake::start(config).await?;
        let ready = serde_json::to_string(&Ready {
            addresses: fake.addresses(),
            admin_token: fake.admin_token(),
        })?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{ready}")?;
            out.flush()?;
        }
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
        }
        match fake.shutdown().await {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(lost) => {
                eprintln!("fake-wireserver: error: {lost}");
                Ok(ExitCode::from(EXIT_JOURNAL_LOST))
            }
        }
    })
}
