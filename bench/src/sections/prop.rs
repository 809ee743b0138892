//! `wirecheck prop`: generated cases per second against the bundled reporter and cloud-init
//! 22.4.2, and generated fault schedules per second against the reporter and cloud-init 25.1
//! (a packaged Python agent, in agent time), each next to the same agent's scenario pairs per
//! second through `wirecheck run` (the same runner path, the same `--jobs`; for schedules, its
//! fixed fault scenarios), and the time to shrink a planted bug (the test agent of
//! cli/tests/prop_support that forgets to double `'`).

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, bail};

use super::Ctx;
use crate::commands::render;
use crate::results::{Figure, Section};

/// Cases run at the same time, for `prop` and its `run` reference alike.
const JOBS: &str = "4";

struct Timed {
    seconds: f64,
    results: serde_json::Value,
}

fn wirecheck(ctx: &Ctx, args: &[String]) -> anyhow::Result<Timed> {
    let bin = ctx.bin("wirecheck")?;
    let line = render(&bin, args);
    ctx.log.record(&line);
    let started = Instant::now();
    let status = Command::new(&bin)
        .args(args)
        .current_dir(&ctx.root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {line}"))?;
    let seconds = started.elapsed().as_secs_f64();
    if !matches!(status.code(), Some(0 | 1)) {
        bail!("{line}: {status} (usage or setup error)");
    }
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .context("--out")?;
    let path = Path::new(out).join("results.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("{}", path.display()))?;
    Ok(Timed {
        seconds,
        results: serde_json::from_str(&text)?,
    })
}

fn cases(t: &Timed) -> Vec<&serde_json::Value> {
    t.results["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["cases"].as_array().into_iter().flatten())
        .collect()
}

/// Distinct scenarios (pairs) of a `wirecheck run`.
fn pairs(t: &Timed) -> usize {
    let mut s: Vec<&str> = cases(t)
        .iter()
        .filter_map(|c| c["scenario"].as_str())
        .collect();
    s.sort_unstable();
    s.dedup();
    s.len()
}

/// "shrunk from X bytes of JSON in N agent runs, T ms" of each finding of a case, as (N, T).
fn shrinks_of(case: &serde_json::Value) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for e in case["evidence"].as_array().into_iter().flatten() {
        let note = e["note"].as_str().unwrap_or("");
        let Some(rest) = note
            .split(" in ")
            .nth(1)
            .filter(|_| note.contains("shrunk from"))
        else {
            continue;
        };
        let runs = rest.split(' ').next().and_then(|w| w.parse().ok());
        let ms = rest
            .split(", ")
            .nth(1)
            .and_then(|w| w.split(' ').next())
            .and_then(|w| w.parse().ok());
        if let (Some(runs), Some(ms)) = (runs, ms) {
            out.push((runs, ms));
        }
    }
    out
}

fn shrink_of(case: &serde_json::Value) -> Option<(u64, u64)> {
    shrinks_of(case).first().copied()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// `name` under the run's temporary folder, as an argument.
fn tmp_arg(ctx: &Ctx, name: &str) -> String {
    ctx.tmp.join(name).display().to_string()
}

/// One agent's `prop` run and its `run` reference.
struct AgentRuns<'a> {
    agent: &'a str,
    property: &'a str,
    /// Generated cases of the `prop` run.
    count: u32,
    /// The `--cases` pattern of the `run` reference.
    scenarios: &'a str,
}

pub fn run(ctx: &Ctx) -> anyhow::Result<Section> {
    let n = ctx.settings.prop_cases.max(1);
    let n_ci = ctx.settings.prop_cases_cloud_init.max(1);
    let mut body = String::new();
    let mut figures = Vec::new();
    let _ = writeln!(
        body,
        "`wirecheck prop` (seed 1, `--jobs {JOBS}`, no regression file) against each agent, next \
         to the same agent's scenarios through `wirecheck run --jobs {JOBS}`: both run \
         every case through the runner's own path (a fake, a case folder, containment, the \
         checks), so the ratio is what generating and judging a property case costs over a \
         scenario pair. A run that shows declared limitations includes shrinking each \
         (`--max-shrink-time 1`: at most about a second each, plus one confirmation run). The \
         text properties' `run` references hold only the agent's few no-fault description \
         scenarios, so their process start-up weighs more per pair than in a long run.\n"
    );
    let _ = writeln!(body, "| agent | what | cases | seconds | per second |");
    let _ = writeln!(body, "|---|---|---:|---:|---:|");

    for runs in [
        AgentRuns {
            agent: "provision-report",
            property: "failure.json",
            count: n,
            scenarios: "report.description.*",
        },
        AgentRuns {
            agent: "cloud-init",
            property: "failure.xml",
            count: n_ci,
            scenarios: "report.description.*.xml.*",
        },
        AgentRuns {
            agent: "provision-report",
            property: "schedule.json",
            count: ctx.settings.prop_schedules.max(1),
            scenarios: "retry.*",
        },
        AgentRuns {
            agent: "cloud-init-25.1",
            property: "schedule.xml",
            count: ctx.settings.prop_schedules_python.max(1),
            scenarios: "retry.status.*",
        },
    ] {
        figures.push(agent_rates(ctx, runs, &mut body)?);
    }
    let _ = writeln!(
        body,
        "\nA schedule (`schedule.*`) is up to a dozen answers to the health report, and on the \
         goal state and IMDS; its reference is the agent's fixed fault scenarios (`retry.*`), \
         each a scripted fault or two. cloud-init 25.1 runs both at agent time.\n"
    );

    figures.push(planted_bug(ctx, &mut body)?);
    Ok(Section {
        title: "Property runs (`wirecheck prop`)".into(),
        body,
        figures,
    })
}

/// Cases per second of `prop` against pairs per second of `run` for one agent: two table rows
/// and the figure.
fn agent_rates(ctx: &Ctx, runs: AgentRuns<'_>, body: &mut String) -> anyhow::Result<Figure> {
    let AgentRuns {
        agent,
        property,
        count,
        scenarios,
    } = runs;
    let agents = ctx.root.join("conformance/agents").display().to_string();
    let p = wirecheck(
        ctx,
        &[
            args(&["prop", "--quiet", "--agent", agent, "--agents-dir", &agents]),
            args(&[
                "--property",
                property,
                "--cases",
                &count.to_string(),
                "--seed",
                "1",
            ]),
            args(&["--jobs", JOBS, "--no-regressions", "--max-shrink-time", "1"]),
            vec![
                "--out".into(),
                tmp_arg(ctx, &format!("prop-{agent}-{property}")),
            ],
        ]
        .concat(),
    )?;
    let r = wirecheck(
        ctx,
        &[
            args(&["run", "--quiet", "--agent", agent, "--agents-dir", &agents]),
            args(&["--cases", scenarios, "--jobs", JOBS]),
            vec![
                "--out".into(),
                tmp_arg(ctx, &format!("run-{agent}-{property}")),
            ],
        ]
        .concat(),
    )?;
    let prop_rate = f64::from(count) / p.seconds;
    let shrink_ms: u64 = cases(&p)
        .first()
        .map_or(0, |c| shrinks_of(c).iter().map(|(_, ms)| ms).sum());
    let run_pairs = pairs(&r);
    let run_rate = run_pairs as f64 / r.seconds;
    let verdict = cases(&p)
        .first()
        .and_then(|c| c["verdict"].as_str())
        .unwrap_or("?")
        .to_owned();
    let _ = writeln!(
        body,
        "| {agent} | `prop --property {property}` ({verdict}; {:.2} s of it shrinking) | {count} | {:.2} | {prop_rate:.2} |",
        shrink_ms as f64 / 1000.0,
        p.seconds
    );
    let _ = writeln!(
        body,
        "| {agent} | `run --cases '{scenarios}'` (pairs) | {run_pairs} | {:.2} | {run_rate:.2} |",
        r.seconds
    );
    let ratio = prop_rate / run_rate;
    Ok(Figure {
        name: format!("prop cases/s, {agent}, {property}"),
        measured: format!("{prop_rate:.2} cases/s"),
        reference: format!("{run_rate:.2} scenario pairs/s (`wirecheck run`)"),
        ratio: Some(ratio),
        target: "≥ 0.5× the scenario pair rate".into(),
        met: Some(ratio >= 0.5),
    })
}

/// The planted bug: found, then shrunk one agent run at a time.
fn planted_bug(ctx: &Ctx, body: &mut String) -> anyhow::Result<Figure> {
    let support = ctx.root.join("cli/tests/prop_support");
    let planted = ctx.tmp.join("planted-agents");
    std::fs::create_dir_all(&planted)?;
    let profile = std::fs::read_to_string(support.join("misquoting.toml.in"))?.replace(
        "@SCRIPT@",
        &support.join("misquoting_agent.py").display().to_string(),
    );
    std::fs::write(planted.join("misquoting.toml"), profile)?;
    let m = wirecheck(
        ctx,
        &[
            args(&["prop", "--quiet", "--agent", "misquoting", "--agents-dir"]),
            vec![planted.display().to_string()],
            args(&["--property", "failure.json", "--cases", "64", "--seed", "3"]),
            args(&[
                "--jobs",
                JOBS,
                "--no-regressions",
                "--max-shrink-time",
                "600",
            ]),
            vec!["--out".into(), tmp_arg(ctx, "prop-planted")],
        ]
        .concat(),
    )?;
    let case = cases(&m).first().copied().cloned().unwrap_or_default();
    let Some((runs, ms)) = shrink_of(&case) else {
        bail!("the planted bug was not found and shrunk: {case}");
    };
    let smallest = case["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| {
            e["note"]
                .as_str()
                .is_some_and(|n| n.starts_with("smallest"))
        })
        .and_then(|e| e["excerpt"].as_str())
        .unwrap_or("?")
        .to_owned();
    let per_run = ms as f64 / runs.max(1) as f64;
    let _ = writeln!(
        body,
        "\nPlanted bug (`'` not doubled inside a quoted field): whole run {:.2} s; shrinking took \
         {ms} ms in {runs} agent runs ({per_run:.0} ms per run, one at a time) down to `{smallest}`.\n",
        m.seconds
    );
    Ok(Figure {
        name: "shrink time, planted mis-quoting bug".into(),
        measured: format!("{:.2} s ({runs} agent runs)", ms as f64 / 1000.0),
        reference: format!("whole `prop` run {:.2} s", m.seconds),
        ratio: Some(ms as f64 / 1000.0 / m.seconds),
        target: "informational".into(),
        met: None,
    })
}
