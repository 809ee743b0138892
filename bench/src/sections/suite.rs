//! The default conformance suite's wall time (`wirecheck run`, the bundled reporter, every
//! scenario in `scenarios/`) against the waiting its longest scenario mandates: with unlimited
//! parallelism the suite cannot end sooner, so the ratio is the runner's overhead. The longest
//! scenario run alone is shown beside it as a measured floor.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, anyhow, bail};

use conformance::agent::Reactions;
use conformance::scenario::{Protocol, Scenario, Target};

use super::Ctx;
use crate::commands::render;
use crate::results::{Figure, Section};
use crate::servers::release_binary;
use crate::stats::median;

/// Target: suite wall time ≤ this multiple of the longest mandated wait…
pub const TARGET_RATIO: f64 = 1.3;
/// …and under this many seconds.
pub const TARGET_SECONDS: f64 = 20.0;

/// Target against `--baseline-checkout`: no slower than the older build beyond noise.
pub const BASELINE_RATIO: f64 = 1.1;

/// The waiting a scenario forces on an agent that follows its profile's reactions, in seconds:
/// a lower bound on the scenario's duration whatever the runner does.
///
/// * A fault that never ends (`end` other than `default`, or a closed port) and that the agent
///   retries: the whole budget of that service (IMDS gets the same budget: the profile passes
///   `{budget}` as `--imds-timeout`). A fatal one: nothing.
/// * Each scripted fault the agent retries: one retry interval, plus what the step costs it
///   (`obligations::step_cost`: a scripted wait up to the request timeout, the whole timeout for
///   an answer dribbled or never given). Waiting stops at the first fatal answer. Capped at the
///   budget.
/// * A rate limit of `r` requests per window `w`, when the scenario needs `n` wireserver
///   requests (1 per JSON report, 3 per XML report): `(ceil(n / r) - 1) * w`.
pub fn mandated_wait(s: &Scenario, r: &Reactions) -> f64 {
    use conformance::obligations::{self, Taken};
    use fake_wireserver::EndPolicy;
    let a = &s.agent;
    let retry_transport = obligations::transport_taken(r) == Taken::Retry;
    // (retried?, seconds spent besides the retry interval): the runner's and the checks' model.
    let cost = |imds: bool, action: &fake_wireserver::Action| -> (bool, f64) {
        let service = if imds {
            fake_wireserver::Service::Imds
        } else {
            fake_wireserver::Service::Wireserver
        };
        let c = obligations::step_cost(r, a, service, action);
        (c.taken == Taken::Retry, c.busy)
    };
    let mut per_service = [0.0f64; 2]; // wireserver, IMDS
    if a.wireserver == Target::Closed && retry_transport {
        per_service[0] = a.budget;
    }
    if a.imds == Target::Closed && retry_transport {
        per_service[1] = a.budget;
    }
    let wireserver_plans = s.fake.plans_for(fake_wireserver::Service::Wireserver);
    let imds_plans = s.fake.plans_for(fake_wireserver::Service::Imds);
    let answers = |plans: &[&fake_wireserver::EndpointPlan], plan| {
        plans.iter().any(|p| std::ptr::eq(*p, plan))
    };
    for plan in &s.fake.endpoints {
        // A plan for both services (`"*"`) is counted as the wireserver's.
        let imds = answers(&imds_plans, plan) && !answers(&wireserver_plans, plan);
        let service = &mut per_service[usize::from(imds)];
        let mut wait = 0.0;
        for step in &plan.steps {
            let (retry, extra) = cost(imds, &step.action);
            wait += extra * f64::from(step.times);
            if !retry {
                break;
            }
            wait += a.retry_interval * f64::from(step.times);
        }
        let endless = plan.end != EndPolicy::Default
            && plan
                .steps
                .last()
                .is_some_and(|last| cost(imds, &last.action).0);
        *service = service.max(if endless {
            a.budget
        } else {
            wait.min(a.budget)
        });
    }
    if let Some(rl) = &s.fake.rate_limit {
        let per_report = if a.protocol == Protocol::Xml {
            3.0
        } else {
            1.0
        };
        let needed = per_report * a.runs.len() as f64;
        let windows = (needed / f64::from(rl.requests.max(1))).ceil() - 1.0;
        per_service[0] = per_service[0].max(windows.max(0.0) * rl.window);
    }
    per_service[0] + per_service[1]
}

/// The scenario with the longest mandated wait, that wait, the scenario's own wait estimate
/// the runner's plan starts from (`Scenario::expected_wait`), and how many scenarios there are.
pub fn longest_mandated_wait(root: &Path) -> anyhow::Result<(String, f64, f64, usize)> {
    let scenarios_dir = root.join("scenarios");
    let scenarios = conformance::scenario::load_dir(&scenarios_dir)
        .map_err(|e| anyhow!("loading {}: {e}", scenarios_dir.display()))?;
    let profile = conformance::agent::find_profile(
        &root.join("conformance/agents"),
        wirecheck::cli::DEFAULT_AGENT,
    )
    .map_err(|e| anyhow!("loading the default agent profile: {e}"))?;
    let count = scenarios.len();
    scenarios
        .iter()
        .map(|s| {
            (
                s.id.clone(),
                mandated_wait(s, &profile.reactions),
                s.expected_wait(),
            )
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(id, wait, estimate)| (id, wait, estimate, count))
        .ok_or_else(|| anyhow!("no scenarios in {}", scenarios_dir.display()))
}

pub(crate) struct SuiteRun {
    pub(crate) seconds: f64,
    pub(crate) exit: i32,
    pub(crate) verdicts: BTreeMap<String, usize>,
    pub(crate) cases: usize,
    pub(crate) longest_case: Option<(String, f64)>,
    /// Verdict counts per agent.
    pub(crate) per_agent: BTreeMap<String, BTreeMap<String, usize>>,
    /// The slowest case: (agent, scenario id, seconds).
    pub(crate) slowest: Option<(String, String, f64)>,
    /// The agent time the run covered: for each (agent, scenario) pair, how long its agent ran
    /// on its own clock (its timeline's end), summed; and the pairs run in agent time.
    pub(crate) agent_seconds: f64,
    pub(crate) scaled_pairs: usize,
}

pub(crate) fn run_suite(ctx: &Ctx, out: &Path, extra: &[String]) -> anyhow::Result<SuiteRun> {
    run_suite_of(ctx, &ctx.bin("wirecheck")?, &ctx.root, out, extra)
}

/// [`run_suite`] with another checkout's `wirecheck`, run from that checkout (its scenarios and
/// its bundled reporter).
fn run_suite_of(
    ctx: &Ctx,
    wirecheck: &Path,
    root: &Path,
    out: &Path,
    extra: &[String],
) -> anyhow::Result<SuiteRun> {
    let mut args = vec![
        "run".to_owned(),
        "--quiet".to_owned(),
        "--out".to_owned(),
        out.display().to_string(),
    ];
    args.extend(extra.iter().cloned());
    let line = render(wirecheck, &args);
    ctx.log.record(&line);
    let started = Instant::now();
    let status = Command::new(wirecheck)
        .args(&args)
        .current_dir(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {line}"))?;
    let seconds = started.elapsed().as_secs_f64();
    let exit = status.code().unwrap_or(-1);
    if exit == 2 || exit < 0 {
        bail!("{line}: {status} (usage or setup error)");
    }
    let results_path = out.join("results.json");
    let text = std::fs::read_to_string(&results_path)
        .with_context(|| format!("reading {}", results_path.display()))?;
    let results: serde_json::Value = serde_json::from_str(&text)?;
    let mut verdicts = BTreeMap::new();
    let mut cases = 0;
    let mut per_scenario: BTreeMap<String, f64> = BTreeMap::new();
    let mut per_agent: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    let mut slowest: Option<(String, String, f64)> = None;
    // (agent, scenario) → (agent seconds its timeline spans, sped up?)
    let mut pairs: BTreeMap<(String, String), (f64, bool)> = BTreeMap::new();
    for agent in results["agents"].as_array().into_iter().flatten() {
        let name = agent["agent"].as_str().unwrap_or("?").to_owned();
        for case in agent["cases"].as_array().into_iter().flatten() {
            cases += 1;
            let verdict = case["verdict"].as_str().unwrap_or("?").to_owned();
            *per_agent
                .entry(name.clone())
                .or_default()
                .entry(verdict.clone())
                .or_default() += 1;
            *verdicts.entry(verdict).or_default() += 1;
            let scenario = case["scenario"].as_str().unwrap_or("?").to_owned();
            pairs
                .entry((name.clone(), scenario.clone()))
                .or_insert_with(|| timeline_span(&case["timeline"]));
            let ms = case["duration_ms"].as_f64().unwrap_or(0.0);
            let e = per_scenario.entry(scenario).or_default();
            *e = e.max(ms / 1000.0);
            if slowest.as_ref().is_none_or(|s| ms / 1000.0 > s.2) {
                let id = conformance::catalog::split_case_id(case["id"].as_str().unwrap_or(""))
                    .0
                    .to_owned();
                slowest = Some((name.clone(), id, ms / 1000.0));
            }
        }
    }
    let longest_case = per_scenario.into_iter().max_by(|a, b| a.1.total_cmp(&b.1));
    Ok(SuiteRun {
        seconds,
        exit,
        verdicts,
        cases,
        longest_case,
        per_agent,
        slowest,
        agent_seconds: pairs.values().map(|(s, _)| s).sum(),
        scaled_pairs: pairs.values().filter(|(_, scaled)| *scaled).count(),
    })
}

/// An older checkout's build (`--baseline-checkout`), timed beside the current one.
struct Baseline {
    dir: PathBuf,
    wirecheck: PathBuf,
}

/// The longest mandated wait of the default suite, as `longest_mandated_wait` finds it.
struct Longest {
    id: String,
    mandated: f64,
    estimate: f64,
    scenario_count: usize,
}

pub fn run(ctx: &Ctx) -> anyhow::Result<Section> {
    let (id, mandated, estimate, scenario_count) = longest_mandated_wait(&ctx.root)?;
    let longest = Longest {
        id,
        mandated,
        estimate,
        scenario_count,
    };
    let baseline = baseline(ctx)?;
    let (runs, baseline_runs) = timed_runs(ctx, baseline.as_ref())?;
    let alone = run_suite(
        ctx,
        &ctx.tmp.join("alone"),
        &[format!("--cases={}.*", longest.id)],
    )?;
    let wall = median(&runs.iter().map(|r| r.seconds).collect::<Vec<_>>());
    let last = runs.last().expect("at least one run");

    let mut body = String::new();
    write_table(&mut body, &longest, &runs, &alone, &baseline_runs);
    let verdicts: Vec<String> = last
        .verdicts
        .iter()
        .map(|(v, n)| format!("{v} {n}"))
        .collect();
    let _ = writeln!(body, "\nVerdicts of the last run: {}.", verdicts.join(", "));
    if last.exit != 0 {
        let _ = writeln!(
            body,
            "\n**The suite exited {}: at least one case failed** (the wall time still counts; \
             see the verdicts).",
            last.exit
        );
    }
    let ratio = wall / longest.mandated;
    let mut figures = vec![
        Figure {
            name: "conformance suite wall time vs longest mandated wait".into(),
            measured: format!("{wall:.2} s"),
            reference: format!("{:.2} s", longest.mandated),
            ratio: Some(ratio),
            target: format!("≤ {TARGET_RATIO}x and < {TARGET_SECONDS} s"),
            met: Some(ratio <= TARGET_RATIO && wall < TARGET_SECONDS),
        },
        Figure {
            name: "conformance suite wall time vs its longest scenario run alone".into(),
            measured: format!("{wall:.2} s"),
            reference: format!("{:.2} s", alone.seconds),
            ratio: Some(wall / alone.seconds),
            target: "-".into(),
            met: None,
        },
    ];
    if let Some(baseline) = &baseline {
        figures.push(baseline_figure(
            &mut body,
            baseline,
            &baseline_runs,
            last,
            wall,
        ));
    }
    Ok(Section {
        title: "Conformance suite wall time".into(),
        body,
        figures,
    })
}

fn baseline(ctx: &Ctx) -> anyhow::Result<Option<Baseline>> {
    let Some(dir) = &ctx.settings.baseline_checkout else {
        return Ok(None);
    };
    // Run from the checkout itself: a relative path would not survive the cwd.
    let dir = dir
        .canonicalize()
        .with_context(|| format!("--baseline-checkout {}", dir.display()))?;
    let wirecheck = release_binary(&dir.join("target"), "wirecheck")
        .with_context(|| format!("--baseline-checkout {}", dir.display()))?;
    Ok(Some(Baseline { dir, wirecheck }))
}

/// The timed runs of the suite, and of the baseline's suite when there is one.
fn timed_runs(
    ctx: &Ctx,
    baseline: Option<&Baseline>,
) -> anyhow::Result<(Vec<SuiteRun>, Vec<SuiteRun>)> {
    // Interleaved with the baseline's runs, so both see the same machine, in ABBA order so
    // neither always goes first.
    let mut runs = Vec::new();
    let mut baseline_runs = Vec::new();
    for i in 0..ctx.settings.suite_runs.max(1) {
        let current = |runs: &mut Vec<SuiteRun>| -> anyhow::Result<()> {
            runs.push(run_suite(ctx, &ctx.tmp.join(format!("suite-{i}")), &[])?);
            Ok(())
        };
        let Some(Baseline { dir, wirecheck }) = baseline else {
            current(&mut runs)?;
            continue;
        };
        let out = ctx.tmp.join(format!("baseline-suite-{i}"));
        if i % 2 == 0 {
            current(&mut runs)?;
            baseline_runs.push(run_suite_of(ctx, wirecheck, dir, &out, &[])?);
        } else {
            baseline_runs.push(run_suite_of(ctx, wirecheck, dir, &out, &[])?);
            current(&mut runs)?;
        }
    }
    Ok((runs, baseline_runs))
}

/// What was timed and the table of seconds.
fn write_table(
    body: &mut String,
    longest: &Longest,
    runs: &[SuiteRun],
    alone: &SuiteRun,
    baseline_runs: &[SuiteRun],
) {
    let Longest {
        id: longest_id,
        mandated,
        estimate,
        scenario_count,
    } = longest;
    let last = runs.last().expect("at least one run");
    let _ = writeln!(
        body,
        "`wirecheck run` with its defaults (the bundled `provision-report`, {scenario_count} \
         scenarios, {} cases, 16 scenarios at a time), {} timed run(s), median. The mandated \
         wait of a scenario is what its faults force on an agent that follows the profile \
         (`mandated_wait` in `bench/src/sections/suite.rs`): the whole budget for a retried \
         fault that never ends, else one retry interval per retried fault plus the request \
         timeout for hangs, plus the windows of a rate limit. With unlimited parallelism the \
         suite could not end sooner than its longest scenario's mandated wait.\n",
        last.cases,
        runs.len()
    );
    let _ = writeln!(body, "| what | seconds |");
    let _ = writeln!(body, "|---|---:|");
    for (i, r) in runs.iter().enumerate() {
        let _ = writeln!(
            body,
            "| whole suite, run {} (exit {}) | {:.2} |",
            i + 1,
            r.exit,
            r.seconds
        );
    }
    let _ = writeln!(
        body,
        "| longest mandated wait: `{longest_id}` | {mandated:.2} |"
    );
    let _ = writeln!(
        body,
        "| the runner's own scheduling estimate for `{longest_id}` (`Scenario::expected_wait`, an upper estimate) | {estimate:.2} |"
    );
    let _ = writeln!(
        body,
        "| `{longest_id}` run alone (`--cases='{longest_id}.*'`, exit {}) | {:.2} |",
        alone.exit, alone.seconds
    );
    for (i, r) in baseline_runs.iter().enumerate() {
        let _ = writeln!(
            body,
            "| baseline checkout, run {} ({} cases, exit {}) | {:.2} |",
            i + 1,
            r.cases,
            r.exit,
            r.seconds
        );
    }
    if let Some((scenario, s)) = &last.longest_case {
        let _ = writeln!(
            body,
            "| longest case inside the suite (`{scenario}`, from results.json) | {s:.2} |"
        );
    }
}

/// The figure against the baseline checkout, with what the body says of the baseline.
fn baseline_figure(
    body: &mut String,
    baseline: &Baseline,
    baseline_runs: &[SuiteRun],
    last: &SuiteRun,
    wall: f64,
) -> Figure {
    let before = median(&baseline_runs.iter().map(|r| r.seconds).collect::<Vec<_>>());
    let _ = writeln!(
        body,
        "\nBaseline: `{}` (its own scenarios and bundled reporter), run between the \
         current runs.",
        baseline.dir.display()
    );
    // Only the same work is comparable: a baseline with other scenarios gets no verdict.
    let same_work = baseline_runs.iter().all(|r| r.cases == last.cases);
    if !same_work {
        let _ = writeln!(
            body,
            "\nThe baseline ran a different number of cases ({}), so its ratio is shown \
             but not graded.",
            baseline_runs
                .iter()
                .map(|r| r.cases.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Figure {
        name: "conformance suite wall time vs the baseline checkout".into(),
        measured: format!("{wall:.2} s"),
        reference: format!("{before:.2} s"),
        ratio: Some(wall / before),
        target: format!("≤ {BASELINE_RATIO}x"),
        met: same_work.then_some(wall / before <= BASELINE_RATIO),
    }
}

/// How long a case's agent ran on its own clock (its timeline's last moment: the exit, else the
/// last answer or request), and whether that clock was sped up (`time_scale`).
fn timeline_span(timeline: &serde_json::Value) -> (f64, bool) {
    let events = timeline["events"].as_array().into_iter().flatten();
    let last_event = events
        .flat_map(|e| {
            [
                e["at_ms"].as_u64(),
                e["done_ms"].as_u64(),
                e["closed_ms"].as_u64(),
            ]
        })
        .flatten()
        .max()
        .unwrap_or(0);
    let end = timeline["agent_exit_ms"]
        .as_u64()
        .unwrap_or(0)
        .max(last_event);
    (end as f64 / 1000.0, timeline["time_scale"].is_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(toml: &str) -> f64 {
        let s = Scenario::from_toml_str(toml, Path::new("test.toml"))
            .expect("scenario")
            .remove(0);
        mandated_wait(&s, &Reactions::recommended())
    }

    const HEAD: &str = "id = \"t\"\ntitle = \"t\"\nchecks = [\"behaviour.exit\"]\n";

    #[test]
    fn endless_retried_fault_costs_the_budget_and_fatal_costs_nothing() {
        let endless = |status: u16| {
            wait(&format!(
                "{HEAD}[agent]\naction = \"ready\"\nbudget = 2.0\n\
                 [[fake.endpoint]]\nid = \"wireserver.health.json\"\nend = \"repeat-last\"\n\
                 [[fake.endpoint.step]]\nkind = \"respond\"\nstatus = {status}\n"
            ))
        };
        assert_eq!(endless(503), 2.0);
        assert_eq!(endless(401), 0.0);
    }

    #[test]
    fn scripted_faults_cost_intervals_and_timeouts() {
        let three_500s = wait(&format!(
            "{HEAD}[agent]\naction = \"ready\"\nretry_interval = 0.2\n\
             [[fake.endpoint]]\nid = \"wireserver.health.json\"\n\
             [[fake.endpoint.step]]\nkind = \"respond\"\nstatus = 500\ntimes = 3\n"
        ));
        assert!((three_500s - 0.6).abs() < 1e-9, "{three_500s}");
        let slow_answer = wait(&format!(
            "{HEAD}[agent]\naction = \"ready\"\nrequest_timeout = 0.5\nretry_interval = 0.2\n\
             [[fake.endpoint]]\nid = \"wireserver.health.json\"\n\
             [[fake.endpoint.step]]\nkind = \"delay\"\nseconds = 2.0\n"
        ));
        assert!((slow_answer - 0.7).abs() < 1e-9, "{slow_answer}");
    }

    #[test]
    fn closed_ports_and_rate_limits() {
        let closed = wait(&format!(
            "{HEAD}[agent]\naction = \"ready\"\nwireserver = \"closed\"\nbudget = 2.0\n"
        ));
        assert_eq!(closed, 2.0);
        let xml_rate_limited = wait(&format!(
            "{HEAD}[agent]\naction = \"ready\"\nprotocol = \"xml\"\nbudget = 5.0\n\
             [fake.rate_limit]\nrequests = 1\nwindow = 1.0\n"
        ));
        assert_eq!(xml_rate_limited, 2.0);
    }
}
