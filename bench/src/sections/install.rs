//! Installing wirecheck as the GitHub Action does (`scripts/action.sh install`): from the
//! release archive against building from source, in the same run. The release files are
//! `scripts/release.sh --bin-dir` of this run's release binaries, installed from a loopback
//! HTTP server and from a folder, each time into an empty tool cache (and once more into a
//! warm one); the source build is the action's fallback (no archive for the machine): `cargo
//! install` of the three crates into an empty target folder, as on a fresh runner. Then the
//! run step judges the bundled reporter with the binaries the release install put on PATH.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use anyhow::{Context as _, bail};
use wirecheck_test_support::files::FileServer;

use super::Ctx;
use crate::results::{Figure, Section};
use crate::stats::median;

/// Target: installing from the release archive takes under this many seconds.
pub const TARGET_SECONDS: f64 = 15.0;

/// The variables a runner would set that must not leak into a timed step from the bench's
/// own environment.
const CLEARED: &[&str] = &[
    "GITHUB_PATH",
    "GITHUB_OUTPUT",
    "GITHUB_STEP_SUMMARY",
    "WIRECHECK_BIN_DIR",
    "WIRECHECK_ACTION_REF",
    "WIRECHECK_ACTION_REPOSITORY",
    "RUNNER_TEMP",
];

/// One `action.sh` step: its output and wall time in seconds.
fn step(ctx: &Ctx, mode: &str, vars: &[(&str, String)]) -> anyhow::Result<(Output, f64)> {
    let script = ctx.root.join("scripts/action.sh");
    let shown: Vec<String> = vars
        .iter()
        .map(|(k, v)| format!("{k}={}", crate::commands::quote(v)))
        .collect();
    ctx.log.record(&format!(
        "{} bash scripts/action.sh {mode}",
        shown.join(" ")
    ));
    let mut command = Command::new("bash");
    command.arg(&script).arg(mode).current_dir(&ctx.tmp);
    for name in CLEARED {
        command.env_remove(name);
    }
    command.env("WIRECHECK_SRC", &ctx.root);
    command.envs(vars.iter().map(|(k, v)| (k, v)));
    let started = Instant::now();
    let out = command
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    Ok((out, started.elapsed().as_secs_f64()))
}

/// `action.sh install`, which must succeed and say `expect` on stderr.
fn install(ctx: &Ctx, vars: &[(&str, String)], expect: &str) -> anyhow::Result<f64> {
    let (out, seconds) = step(ctx, "install", vars)?;
    let said = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || !said.contains(expect) {
        bail!(
            "scripts/action.sh install ({}) did not say {expect:?}:\n{said}",
            out.status
        );
    }
    Ok(seconds)
}

/// `scripts/release.sh --bin-dir` of the release binaries into `dist`.
fn release_files(ctx: &Ctx, dist: &Path) -> anyhow::Result<()> {
    let bins = ctx.target_dir.join("release");
    for name in ["wirecheck", "fake-wireserver", "provision-report"] {
        ctx.bin(name)?;
    }
    let args = [
        ctx.root.join("scripts/release.sh").display().to_string(),
        "--bin-dir".to_owned(),
        bins.display().to_string(),
        dist.display().to_string(),
    ];
    ctx.log.record(&format!("bash {}", args.join(" ")));
    let out = Command::new("bash").args(&args).output()?;
    if !out.status.success() {
        bail!(
            "scripts/release.sh: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Runs of one way to install, in seconds.
struct Way {
    name: &'static str,
    seconds: Vec<f64>,
}

impl Way {
    fn row(&self) -> String {
        let min = self.seconds.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self.seconds.iter().copied().fold(0.0, f64::max);
        format!(
            "| {} | {} | {:.2} | {min:.2} | {max:.2} |",
            self.name,
            self.seconds.len(),
            median(&self.seconds)
        )
    }
}

pub fn run(ctx: &Ctx) -> anyhow::Result<Section> {
    let work = ctx.tmp.join("install");
    let dist = work.join("dist");
    release_files(ctx, &dist)?;
    let archive_bytes: u64 = std::fs::read_dir(&dist)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tar.gz"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let server = FileServer::serve(&dist).context("serving the release files")?;
    let cache = |way: &str, i: usize| work.join(format!("cache-{way}-{i}")).display().to_string();
    let release = |url: &str, cache: String| {
        vec![
            ("WIRECHECK_RELEASE_URL", url.to_owned()),
            ("RUNNER_TOOL_CACHE", cache),
        ]
    };
    let folder = dist.display().to_string();
    let mut http = Way {
        name: "release archive, loopback HTTP, empty tool cache",
        seconds: Vec::new(),
    };
    let mut dir = Way {
        name: "release archive, folder, empty tool cache",
        seconds: Vec::new(),
    };
    let mut warm = Way {
        name: "release archive, loopback HTTP, archive already in the tool cache",
        seconds: Vec::new(),
    };
    // Interleaved, so a change of load weighs on both alike.
    for i in 0..ctx.settings.install_runs.max(1) {
        let vars = release(&server.base, cache("http", i));
        http.seconds
            .push(install(ctx, &vars, "downloading wirecheck-")?);
        warm.seconds
            .push(install(ctx, &vars, "from the tool cache")?);
        dir.seconds.push(install(
            ctx,
            &release(&folder, cache("dir", i)),
            "downloading wirecheck-",
        )?);
    }

    // The source build: a release location without this machine's archive.
    let empty = work.join("empty");
    std::fs::create_dir_all(&empty)?;
    let source_root = work.join("source");
    let source_vars = vec![
        ("WIRECHECK_RELEASE_URL", empty.display().to_string()),
        ("WIRECHECK_ROOT", source_root.display().to_string()),
        ("INPUT_AGENT", "provision-report".to_owned()),
    ];
    let source = Way {
        name: "source build (`cargo install` of the three crates, empty target folder)",
        seconds: vec![install(ctx, &source_vars, "building from source")?],
    };

    let (cases, run_seconds) = run_step(ctx, &PathBuf::from(cache("http", 0)), &work)?;
    Ok(section(
        &[&http, &dir, &warm, &source],
        &source,
        &http,
        archive_bytes,
        cases,
        run_seconds,
    ))
}

/// The run step with the binaries the release install put in `cache`: the default suite
/// against the bundled reporter. Returns the number of cases and the step's seconds.
fn run_step(ctx: &Ctx, cache: &Path, work: &Path) -> anyhow::Result<(usize, f64)> {
    let arch = if std::env::consts::ARCH == "x86_64" {
        "x64"
    } else {
        "arm64"
    };
    let bin = cache
        .join("wirecheck")
        .join(conformance::build_info::VERSION)
        .join(arch);
    let out_dir = work.join("results");
    let vars = vec![
        (
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display()),
        ),
        ("INPUT_AGENT", "provision-report".to_owned()),
        ("INPUT_OUT", out_dir.display().to_string()),
    ];
    let (out, seconds) = step(ctx, "run", &vars)?;
    if !out.status.success() {
        bail!(
            "scripts/action.sh run ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json"))?)?;
    if results["agents"][0]["agent"] != "provision-report" {
        bail!("the run step judged {}", results["agents"][0]["agent"]);
    }
    let cases = results["agents"][0]["cases"].as_array().map_or(0, Vec::len);
    Ok((cases, seconds))
}

fn section(
    ways: &[&Way],
    source: &Way,
    http: &Way,
    archive_bytes: u64,
    cases: usize,
    run_seconds: f64,
) -> Section {
    let ours = median(&http.seconds);
    let theirs = median(&source.seconds);
    let mut body = String::new();
    let _ = writeln!(
        body,
        "`scripts/action.sh install` (the action's install step) timed end to end: the \
         release files are `scripts/release.sh --bin-dir target/release` of this run's \
         binaries (archive {:.1} MiB), served on 127.0.0.1 or read from a folder; the \
         checksum is verified and the archive unpacked into the tool cache. The source build \
         is the action's fallback when no archive matches (and its only way before releases): \
         `cargo install --locked` of wirecheck (cli/), fake-wireserver-cli and reporter into an empty \
         target folder, with the dependencies' sources already downloaded.\n",
        archive_bytes as f64 / f64::from(1 << 20)
    );
    let _ = writeln!(body, "| install | runs | median s | min s | max s |");
    let _ = writeln!(body, "|---|---:|---:|---:|---:|");
    for way in ways {
        let _ = writeln!(body, "{}", way.row());
    }
    let _ = writeln!(
        body,
        "\nThen `scripts/action.sh run` with the installed binaries on PATH judged the bundled \
         reporter: {cases} cases passed in {run_seconds:.1} s."
    );
    Section {
        title: "install (the action's install step)".into(),
        body,
        figures: vec![Figure {
            name: "install from the release archive (loopback HTTP, empty tool cache), source build as reference".into(),
            measured: format!("{ours:.2} s"),
            reference: format!("{theirs:.0} s"),
            ratio: Some(theirs / ours),
            target: format!("under {TARGET_SECONDS:.0} s"),
            met: Some(ours < TARGET_SECONDS),
        }],
    }
}
