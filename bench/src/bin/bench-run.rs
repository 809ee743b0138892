//! `bench-run`: runs every benchmark (release binaries, built by `bench/run.sh`) and writes
//! RESULTS.md. A section that cannot be measured is reported as such; the others still run.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use wirecheck_bench::commands::CommandLog;
use wirecheck_bench::results::{Report, Section};
use wirecheck_bench::sections::{self, Ctx, Settings};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Part {
    Imds,
    Footprint,
    Kvp,
    Suite,
    Reporter,
}

#[derive(Debug, Parser)]
#[command(
    name = "bench-run",
    about = "Run wirecheck's benchmarks side by side with their references and write RESULTS.md"
)]
struct Cli {
    /// Repository root.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Cargo target folder holding the release binaries [default: <root>/target].
    #[arg(long, env = "CARGO_TARGET_DIR")]
    target_dir: Option<PathBuf>,
    /// Where to write the results.
    #[arg(long, default_value = "bench/RESULTS.md")]
    out: PathBuf,
    /// Only these parts (repeatable) [default: all].
    #[arg(long = "only", value_enum)]
    only: Vec<Part>,
    /// Leave out these parts (repeatable).
    #[arg(long = "skip", value_enum)]
    skip: Vec<Part>,
    #[arg(long, default_value_t = 10)]
    wrk_seconds: u64,
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, default_value_t = 2)]
    wrk_threads: u32,
    #[arg(long, default_value_t = 64)]
    connections: u32,
    #[arg(long, default_value_t = 30)]
    startup_runs: usize,
    #[arg(long, default_value_t = 200_000)]
    flood_requests: usize,
    #[arg(long, default_value_t = 16)]
    flood_connections: usize,
    #[arg(long, default_value_t = 100_000)]
    kvp_records: usize,
    #[arg(long, default_value_t = 7)]
    kvp_runs: usize,
    #[arg(long, default_value_t = 3)]
    suite_runs: usize,
    #[arg(long, default_value_t = 50)]
    reporter_runs: usize,
    /// Shown in RESULTS.md as how the run was invoked.
    #[arg(long, default_value = "bench/run.sh")]
    invocation: String,
    #[arg(long, default_value = "/usr/bin/wrk")]
    wrk: PathBuf,
    /// Debian's python3 (the one the cloud-init package installs into).
    #[arg(long, default_value = "/usr/bin/python3")]
    python: PathBuf,
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-run: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let root = cli
        .root
        .canonicalize()
        .with_context(|| format!("--root {}", cli.root.display()))?;
    let target_dir = cli
        .target_dir
        .clone()
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"));
    wirecheck_bench::wrk::check_installed(&cli.wrk)?;
    let tmp = tempfile::Builder::new()
        .prefix("wirecheck-bench")
        .tempdir()?;
    let log = CommandLog::new(&root);
    log.alias(tmp.path(), "$TMP");
    let ctx = Ctx {
        root: root.clone(),
        target_dir,
        tmp: tmp.path().to_path_buf(),
        log,
        settings: Settings {
            wrk_seconds: cli.wrk_seconds,
            rounds: cli.rounds,
            wrk_threads: cli.wrk_threads,
            connections: cli.connections,
            startup_runs: cli.startup_runs,
            flood_requests: cli.flood_requests,
            flood_connections: cli.flood_connections,
            kvp_records: cli.kvp_records,
            kvp_runs: cli.kvp_runs,
            suite_runs: cli.suite_runs,
            reporter_runs: cli.reporter_runs,
        },
        wrk: cli.wrk.clone(),
        python: cli.python.clone(),
    };
    let wanted = |p: Part| (cli.only.is_empty() || cli.only.contains(&p)) && !cli.skip.contains(&p);
    let load_before = loadavg();
    if load_before.0 > 1.0 {
        eprintln!(
            "bench-run: warning: load average {:.2} (other work is running); the figures will say so",
            load_before.0
        );
    }
    let mut report = Report {
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M").to_string(),
        invocation: format!("`{}`", cli.invocation),
        ..Report::default()
    };
    let mut add = |name: &str, result: anyhow::Result<Section>| match result {
        Ok(section) => report.sections.push(section),
        Err(e) => {
            eprintln!("bench-run: {name}: {e:#}");
            report.failed.push((name.to_owned(), format!("{e:#}")));
        }
    };
    let doc = if wanted(Part::Imds) || wanted(Part::Footprint) {
        eprintln!("bench-run: capturing the IMDS document from the fake");
        Some(sections::capture_document(&ctx, tmp.path()))
    } else {
        None
    };
    let doc = match doc.transpose() {
        Ok(d) => d,
        Err(e) => {
            add("IMDS document", Err(e));
            None
        }
    };
    if let Some(doc) = &doc {
        if wanted(Part::Imds) {
            eprintln!("bench-run: IMDS throughput (wrk)");
            add("IMDS throughput", sections::imds::run(&ctx, doc));
        }
        if wanted(Part::Footprint) {
            eprintln!("bench-run: start-up and memory");
            add("start-up and memory", sections::footprint::run(&ctx, doc));
        }
    }
    if wanted(Part::Reporter) {
        eprintln!("bench-run: provision-report (bench/reporter/run.sh)");
        add("provision-report latency", sections::reporter::run(&ctx));
    }
    if wanted(Part::Suite) {
        eprintln!("bench-run: conformance suite");
        add("conformance suite", sections::suite::run(&ctx));
    }
    if wanted(Part::Kvp) {
        eprintln!("bench-run: kvp dump");
        add("kvp dump", sections::kvp::run(&ctx));
    }
    let load_after = loadavg();
    report.machine = machine(&root, &cli, load_before, load_after);
    if load_before.0 > 1.0 || load_after.0 > 1.0 {
        report.notes.push(format!(
            "**Load:** the 1-minute load average was {:.2} at the start and {:.2} at the end \
             (above 1.0 on 2 cores means other work shared the machine); ratios are measured \
             in the same conditions for both sides, absolute figures are pessimistic.",
            load_before.0, load_after.0
        ));
    }
    report.notes.push(fuzzing_note(&root));
    report.commands = ctx.log.entries();
    let out = if cli.out.is_absolute() {
        cli.out.clone()
    } else {
        root.join(&cli.out)
    };
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&out, report.render()).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("bench-run: wrote {}", out.display());
    if !report.failed.is_empty() {
        anyhow::bail!("{} part(s) could not be measured", report.failed.len());
    }
    Ok(())
}

/// Fuzzing is not a benchmark and is not run here; say what this machine could do.
fn fuzzing_note(root: &Path) -> String {
    let nightly = first_line("cargo", &["+nightly", "--version"], root);
    let has_nightly = nightly.starts_with("cargo ");
    let fuzz = first_line("cargo", &["+nightly", "fuzz", "--version"], root);
    let has_fuzz = fuzz.starts_with("cargo-fuzz");
    format!(
        "**Fuzzing: not run** by this benchmark (the oracle's cargo-fuzz targets in \
         `fake-wireserver/fuzz/`; the deep-run commands are in docs/readme-bench.md). On this \
         machine: nightly toolchain {}; cargo-fuzz {}.",
        if has_nightly {
            format!("present ({nightly})")
        } else {
            "absent".to_owned()
        },
        if has_fuzz {
            format!("installed ({fuzz})")
        } else {
            "not installed".to_owned()
        }
    )
}

fn loadavg() -> (f64, f64, f64) {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text
        .split_whitespace()
        .map(|s| s.parse::<f64>().unwrap_or(f64::NAN));
    (
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
    )
}

fn first_line(program: &str, args: &[&str], dir: &Path) -> String {
    Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned()
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

fn machine(
    root: &Path,
    cli: &Cli,
    before: (f64, f64, f64),
    after: (f64, f64, f64),
) -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let commit = first_line("git", &["rev-parse", "--short", "HEAD"], root);
    let dirty = !first_line(
        "git",
        &["status", "--porcelain", "--untracked-files=no"],
        root,
    )
    .is_empty();
    vec![
        (
            "machine".into(),
            format!(
                "{model}, {cpus} CPUs, {:.1} GiB RAM, Linux {kernel} (x86_64 VM; cores shared with other work)",
                mem_kib as f64 / 1024.0 / 1024.0
            ),
        ),
        (
            "load average (1/5/15 min)".into(),
            format!(
                "{:.2} / {:.2} / {:.2} at the start, {:.2} / {:.2} / {:.2} at the end",
                before.0, before.1, before.2, after.0, after.1, after.2
            ),
        ),
        (
            "commit".into(),
            format!(
                "{commit}{}",
                if dirty {
                    " (with uncommitted changes in the checkout)"
                } else {
                    ""
                }
            ),
        ),
        ("rustc".into(), first_line("rustc", &["--version"], root)),
        (
            "wrk".into(),
            first_line(&cli.wrk.display().to_string(), &["-v"], root),
        ),
        (
            "python".into(),
            first_line(&cli.python.display().to_string(), &["--version"], root),
        ),
    ]
}
