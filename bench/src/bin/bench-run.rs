//! `bench-run`: runs every benchmark (release binaries, built by `bench/run.sh`) and writes
//! RESULTS.md. A section that cannot be measured is reported as such; the others still run.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use wirecheck_bench::commands::CommandLog;
use wirecheck_bench::machine::CpuSnapshot;
use wirecheck_bench::results::{Report, Section};
use wirecheck_bench::sections::{self, Ctx, Settings};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Part {
    Imds,
    Footprint,
    Kvp,
    Suite,
    Reporter,
    /// provision-report under kills, pool faults, hostile pools and bad input.
    Reliability,
    /// `wirecheck prop`: cases per second, shrink time of a planted bug.
    Prop,
    /// The real-agent matrix (root, agents installed; not part of the default run).
    Matrix,
    /// The action's install step: release archive against a source build (minutes).
    Install,
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
    #[arg(long, default_value_t = 5)]
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
    /// Rounds of the reliability part's kill loop (each writer).
    #[arg(long, default_value_t = 200)]
    reliability_rounds: usize,
    /// Timed installs from the release archive, per way (the source build is timed once).
    #[arg(long, default_value_t = 3)]
    install_runs: usize,
    /// Generated cases of the prop part against provision-report.
    #[arg(long, default_value_t = 256)]
    prop_cases: u32,
    /// Generated cases of the prop part against cloud-init 22.4.2.
    #[arg(long, default_value_t = 64)]
    prop_cases_cloud_init: u32,
    /// Generated fault schedules of the prop part against provision-report.
    #[arg(long, default_value_t = 128)]
    prop_schedules: u32,
    /// Generated fault schedules of the prop part against cloud-init 25.1 (agent time).
    #[arg(long, default_value_t = 16)]
    prop_schedules_python: u32,
    /// Also fuzz each of the oracle's cargo-fuzz targets for this many seconds (needs nightly
    /// and cargo-fuzz; 0 = no fuzzing).
    #[arg(long, default_value_t = 0)]
    fuzz_seconds: u64,
    /// Fold the parts measured into the existing --out file instead of replacing it (their
    /// summary rows, sections and commands; the other parts are kept as their run wrote them).
    #[arg(long)]
    merge: bool,
    /// Shown in RESULTS.md as how the run was invoked.
    #[arg(long, default_value = "bench/run.sh")]
    invocation: String,
    /// Also measure this fake-wireserver binary (e.g. a release build of the commit before a
    /// change) in the IMDS part, interleaved with the current one: a before/after figure from
    /// one run.
    #[arg(long, value_name = "BINARY")]
    baseline_fake: Option<PathBuf>,
    /// Also time the default suite of this checkout (a worktree of an older commit with
    /// `cargo build --release` done), interleaved with the current one: a before/after figure
    /// from one run.
    #[arg(long, value_name = "DIR")]
    baseline_checkout: Option<PathBuf>,
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

impl Cli {
    fn wants(&self, p: Part) -> bool {
        (self.only.is_empty() || self.only.contains(&p)) && !self.skip.contains(&p)
    }

    fn settings(&self) -> Settings {
        Settings {
            wrk_seconds: self.wrk_seconds,
            rounds: self.rounds,
            wrk_threads: self.wrk_threads,
            connections: self.connections,
            startup_runs: self.startup_runs,
            flood_requests: self.flood_requests,
            flood_connections: self.flood_connections,
            kvp_records: self.kvp_records,
            kvp_runs: self.kvp_runs,
            suite_runs: self.suite_runs,
            reporter_runs: self.reporter_runs,
            reliability_rounds: self.reliability_rounds,
            install_runs: self.install_runs,
            baseline_fake: self.baseline_fake.clone(),
            baseline_checkout: self.baseline_checkout.clone(),
            prop_cases: self.prop_cases,
            prop_cases_cloud_init: self.prop_cases_cloud_init,
            prop_schedules: self.prop_schedules,
            prop_schedules_python: self.prop_schedules_python,
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
    // Only the IMDS part runs wrk.
    if cli.wants(Part::Imds) {
        wirecheck_bench::wrk::check_installed(&cli.wrk)?;
    }
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
        settings: cli.settings(),
        wrk: cli.wrk.clone(),
        python: cli.python.clone(),
    };
    let run_start = CpuSnapshot::now();
    if run_start.load1 > 1.0 {
        eprintln!(
            "bench-run: warning: load average {:.2} (other work is running); the results will say so",
            run_start.load1
        );
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut parts = Parts {
        report: Report {
            date: chrono::Utc::now().format("%Y-%m-%d %H:%M").to_string(),
            invocation: format!("`{}`", cli.invocation),
            ..Report::default()
        },
        shared: Vec::new(),
        cpus,
    };
    run_parts(&cli, &ctx, tmp.path(), &mut parts);
    let Parts {
        mut report, shared, ..
    } = parts;
    let run_end = CpuSnapshot::now();
    let other = run_start.other_cores_until(&run_end);
    report.machine = machine(&root, &cli, run_start.load1, run_end.load1, other, cpus);
    let busiest = shared
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .cloned()
        .unwrap_or_default();
    if run_start.load1 > 1.0 || busiest.1 > 0.2 {
        report.notes.push(format!(
            "**Shared machine:** the 1-minute load average was {:.2} at the start, and other \
             work used {other:.2} of the {cpus} cores on average during the run (most during \
             \"{}\": {:.2} cores). Each figure and its reference ran under the same \
             conditions, interleaved, so the ratios hold; the absolute figures are pessimistic.",
            run_start.load1, busiest.0, busiest.1
        ));
    }
    if cli.fuzz_seconds == 0 {
        report.notes.push(fuzzing_note(&root));
    }
    report.commands = ctx.log.entries();
    write_results(&cli, &root, &report)?;
    if !report.failed.is_empty() {
        anyhow::bail!("{} part(s) could not be measured", report.failed.len());
    }
    Ok(())
}

/// The parts run so far: their sections (or why they failed) and how busy the machine was.
struct Parts {
    report: Report,
    /// (part, other work in cores while it ran)
    shared: Vec<(String, f64)>,
    cpus: usize,
}

impl Parts {
    fn add(&mut self, name: &str, part: &dyn Fn() -> anyhow::Result<Section>) {
        eprintln!("bench-run: {name}");
        let before = CpuSnapshot::now();
        let result = part();
        let after = CpuSnapshot::now();
        let other = before.other_cores_until(&after);
        let cpus = self.cpus;
        self.shared.push((name.to_owned(), other));
        match result {
            Ok(mut section) => {
                section.body.push_str(&format!(
                    "\n_While this part ran: other work used {other:.2} of the {cpus} cores on \
                     average (1-minute load average {:.2} when it started)._\n",
                    before.load1
                ));
                self.report.sections.push(section);
            }
            Err(e) => {
                eprintln!("bench-run: {name}: {e:#}");
                self.report.failed.push((name.to_owned(), format!("{e:#}")));
            }
        }
    }
}

/// Every part the command line wants, one after the other.
fn run_parts(cli: &Cli, ctx: &Ctx, tmp: &Path, parts: &mut Parts) {
    let doc = if cli.wants(Part::Imds) || cli.wants(Part::Footprint) {
        eprintln!("bench-run: capturing the IMDS document from the fake");
        match sections::capture_document(ctx, tmp) {
            Ok(doc) => Some(doc),
            Err(e) => {
                parts.add("IMDS document", &|| Err(anyhow::anyhow!("{e:#}")));
                None
            }
        }
    } else {
        None
    };
    if let Some(doc) = &doc {
        if cli.wants(Part::Imds) {
            parts.add("IMDS throughput (wrk)", &|| sections::imds::run(ctx, doc));
        }
        if cli.wants(Part::Footprint) {
            parts.add("start-up and memory", &|| {
                sections::footprint::run(ctx, doc)
            });
        }
    }
    if cli.wants(Part::Reporter) {
        parts.add("provision-report latency (bench/reporter/run.sh)", &|| {
            sections::reporter::run(ctx)
        });
    }
    if cli.wants(Part::Suite) {
        parts.add("conformance suite", &|| sections::suite::run(ctx));
    }
    if cli.wants(Part::Kvp) {
        parts.add("kvp dump", &|| sections::kvp::run(ctx));
    }
    if cli.wants(Part::Reliability) {
        parts.add("provision-report reliability", &|| {
            sections::reliability::run(ctx)
        });
    }
    if cli.wants(Part::Prop) {
        parts.add("property runs", &|| sections::prop::run(ctx));
    }
    if cli.wants(Part::Install) {
        parts.add("install", &|| sections::install::run(ctx));
    }
    // Opt-in: it needs root and the real agents, and takes as long as its slowest case.
    if cli.only.contains(&Part::Matrix) {
        parts.add("real-agent matrix", &|| sections::matrix::run(ctx));
    }
    if cli.fuzz_seconds > 0 {
        parts.add("fuzzing", &|| sections::fuzz::run(ctx, cli.fuzz_seconds));
    }
}

/// Writes RESULTS.md, or merges the parts measured into it (`--merge`).
fn write_results(cli: &Cli, root: &Path, report: &Report) -> anyhow::Result<()> {
    let out = if cli.out.is_absolute() {
        cli.out.clone()
    } else {
        root.join(&cli.out)
    };
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = if cli.merge && out.exists() {
        let existing = std::fs::read_to_string(&out)
            .with_context(|| format!("reading {} to merge into", out.display()))?;
        wirecheck_bench::results::merge(&existing, report)
            .map_err(|e| anyhow::anyhow!("--merge into {}: {e}", out.display()))?
    } else {
        report.render()
    };
    std::fs::write(&out, text).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("bench-run: wrote {}", out.display());
    Ok(())
}

/// Fuzzing is not a benchmark and is not run here; say what this machine could do.
fn fuzzing_note(root: &Path) -> String {
    let nightly = first_line("cargo", &["+nightly", "--version"], root);
    let has_nightly = nightly.starts_with("cargo ");
    let fuzz = first_line("cargo", &["+nightly", "fuzz", "--version"], root);
    let has_fuzz = fuzz.starts_with("cargo-fuzz");
    format!(
        "**Fuzzing: not run** in this run (the oracle's cargo-fuzz targets in \
         `oracle/fuzz/`; `bench/run.sh --fuzz-seconds N` fuzzes each for N s, \
         docs/benchmarks.md (section Deep runs) has the deep-run commands, and `bench/FUZZING.md` records \
         the last deep run). On this machine: nightly toolchain \
         {}; cargo-fuzz {}.",
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
    load_start: f64,
    load_end: f64,
    other_cores: f64,
    cpus: usize,
) -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown".into());
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
                "{model}, {cpus} CPUs, {:.1} GiB RAM, Linux {kernel} ({})",
                mem_kib as f64 / 1024.0 / 1024.0,
                std::env::consts::ARCH
            ),
        ),
        (
            "1-minute load average".into(),
            format!(
                "{load_start:.2} at the start, {load_end:.2} at the end (the bench's own load included)"
            ),
        ),
        (
            "other work during the run".into(),
            format!(
                "{other_cores:.2} of {cpus} cores on average (busy CPU time in /proc/stat minus \
                 the bench's own and its children's)"
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
