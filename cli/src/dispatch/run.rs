//! `wirecheck run`: load the agents and scenarios, plan, run (the runner's progress drawn by
//! the console), write the results, print the summary and the snapshot diffs; the exit status
//! is the run's outcome.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use conformance::agent::{self, AgentProfile};
use conformance::runner::{self, RunSettings};
use conformance::scenario::Scenario;
use conformance::select::CaseFilter;
use wirecheck_results::text::shown;

use crate::cli::{DEFAULT_AGENT, RunArgs, Unreferenced};
use crate::console::DIFF_LINE_CHARS;
use crate::outcome::{exit_status, report_outcome};
use crate::sources::{bin_dir, load_scenarios};
use crate::status::{EXIT_FAILED, EXIT_OK, usage};

/// `wirecheck run`; returns the exit status.
pub fn run(args: RunArgs) -> u8 {
    let profiles = match profiles(&args) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let scenarios = match load_scenarios(&args.sources) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let filter = match CaseFilter::new(&args.cases, &args.exclude) {
        Ok(f) => f,
        Err(e) => return usage(e),
    };
    for note in conformance::renamed::notes(&[args.cases.clone(), args.exclude.clone()].concat()) {
        eprintln!("wirecheck: {note}");
    }
    let planned = runner::plan(
        &profiles,
        &scenarios,
        &filter,
        args.partition,
        args.snapshots.is_some(),
    );
    if args.print_config {
        return match crate::run_config::render(&args, &profiles, &scenarios, &planned, &bin_dir()) {
            Ok(text) => {
                conformance::tools::write_stdout(&text);
                EXIT_OK
            }
            Err(e) => usage(e),
        };
    }
    let unclaimed_flows =
        runner::unclaimed_flows(&profiles, &scenarios, &filter, args.snapshots.is_some());
    if planned.is_empty() {
        return usage(nothing_planned(&unclaimed_flows));
    }
    let bin_dir = bin_dir();
    let snapshots = match before_any_case(&args, &planned, &bin_dir) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let settings = run_settings(&args, bin_dir, snapshots.clone());
    let run_info = run_info(&profiles, &scenarios, &filter, &args);
    let mut results = match runner::run(planned, &settings) {
        Ok(r) => r,
        Err(e) => return usage(format!("cannot start the runtime: {e}")),
    };
    results.run = Some(run_info);
    list_every_agent(&mut results, &profiles);
    results.unclaimed_flows = unclaimed_flows;
    results.never_started = settings
        .starts
        .never_started()
        .iter()
        .map(|n| wirecheck_results::NeverStartedAgent {
            agent: n.agent.clone(),
            message: n.to_string(),
        })
        .collect();
    if let Err(e) = wirecheck_results::write_all(&args.out, &results) {
        return usage(format!("cannot write the results: {e}"));
    }
    if let Some(path) = &args.summary
        && let Err(e) = wirecheck_results::summary::append(path, &results, args.strict)
    {
        return usage(format!("cannot write the summary {}: {e}", path.display()));
    }
    show_results(&args, &results, snapshots.as_ref(), &profiles, &scenarios)
}

/// The agents to run, in the order given: the named profiles (the default one when neither a
/// name nor an ad-hoc agent is given), then the ad-hoc agent; `Err` is the exit status of the
/// usage error already reported.
fn profiles(args: &RunArgs) -> Result<Vec<Arc<AgentProfile>>, u8> {
    let agents = args.sources.agents_source();
    let mut profiles: Vec<Arc<AgentProfile>> = Vec::new();
    let names: Vec<String> = if args.agents.is_empty() && args.ad_hoc.agent_cmd.is_none() {
        vec![DEFAULT_AGENT.to_owned()]
    } else {
        args.agents.clone()
    };
    for name in &names {
        match agents.find(name) {
            Ok(p) => profiles.push(Arc::new(p)),
            Err(e) => return Err(usage(e)),
        }
    }
    match args.ad_hoc.profile() {
        Some(Ok(mut p)) => {
            // An ad-hoc agent's clock is scaled when the user asks for a speed.
            if args.time_scale.is_some() {
                p.clock.kind = conformance::agent::clock::ClockKind::Scalable;
            }
            profiles.push(Arc::new(p));
        }
        Some(Err(e)) => return Err(usage(e)),
        None => {}
    }
    if let Some(scale) = args.time_scale {
        for p in &mut profiles {
            Arc::make_mut(p).clock.fixed = Some(scale);
        }
    }
    for (i, p) in profiles.iter().enumerate() {
        if profiles[..i].iter().any(|q| q.name == p.name) {
            return Err(usage(format!("agent {:?} is given twice", p.name)));
        }
    }
    Ok(profiles)
}

/// The runner's settings for this run: the progress bar unless `--quiet`.
fn run_settings(
    args: &RunArgs,
    bin_dir: PathBuf,
    snapshots: Option<runner::SnapshotSettings>,
) -> RunSettings {
    RunSettings {
        out: args.out.clone(),
        jobs: args.jobs.map_or_else(runner::default_jobs, usize::from),
        bin_dir,
        progress: (!args.quiet).then(|| {
            Arc::new(crate::console::Progress::default())
                as Arc<dyn conformance::progress::RunProgress>
        }),
        stop: None,
        case_root: None,
        cases_parent: None,
        snapshots,
        starts: runner::StartWatch::default(),
        artifacts: true,
        allow_uncontained: args.uncontained,
    }
}

/// What must hold before any case runs, or it is the user's to fix: the agents' commands, the
/// containment asked for, the snapshots folder (its settings returned) and the results folder.
/// `Err` is the exit status of the usage error already reported.
fn before_any_case(
    args: &RunArgs,
    planned: &[runner::Planned],
    bin_dir: &Path,
) -> Result<Option<runner::SnapshotSettings>, u8> {
    if let Err(e) = runner::preflight(planned, bin_dir) {
        return Err(usage(e));
    }
    let in_process = planned
        .iter()
        .any(|p| p.profile.attach != agent::Attach::Sandbox);
    if let Err(refused) = runner::uncontained(in_process, args.uncontained) {
        return Err(usage(refused));
    }
    // Before any case runs: a snapshots folder that is a file, or cannot be written, is the
    // user's to fix, not a verdict.
    let snapshots = match &args.snapshots {
        Some(dir) => match conformance::snapshot::store::prepare(dir) {
            Ok(()) => Some(runner::SnapshotSettings {
                dir: dir.clone(),
                strict: args.snapshots_strict,
            }),
            Err(e) => return Err(usage(e)),
        },
        None => None,
    };
    // Before any case runs: the results folder holds only this run's results afterwards.
    if let Err(e) = wirecheck_results::folder::claim(&args.out) {
        return Err(usage(format!("--out: {e}")));
    }
    Ok(snapshots)
}

/// Once the results are written: the summary, the snapshot diffs and the snapshots of
/// scenarios that are gone, then the outcome, which is the exit status.
fn show_results(
    args: &RunArgs,
    results: &wirecheck_results::RunResults,
    snapshots: Option<&runner::SnapshotSettings>,
    profiles: &[Arc<AgentProfile>],
    scenarios: &[Arc<Scenario>],
) -> u8 {
    let color = crate::console::colors_enabled(std::io::stdout().is_terminal());
    conformance::tools::write_stdout(&crate::console::summary(
        results,
        &args.out,
        args.strict,
        color,
    ));
    let mut unreferenced_failed = false;
    if let Some(snapshots) = snapshots {
        print_snapshot_diffs(results);
        let orphans = match orphaned_snapshots(&snapshots.dir, profiles, scenarios) {
            Ok(o) => o,
            Err(e) => return usage(e),
        };
        if args.unreferenced != Unreferenced::Ignore {
            for orphan in &orphans {
                let renamed = conformance::renamed::of_scenario(&orphan.scenario)
                    .map(|r| format!(" (renamed {}: docs/case-ids.md)", r.new))
                    .unwrap_or_default();
                eprintln!(
                    "wirecheck: {}: snapshot of a scenario that no longer exists: {}{renamed}",
                    if args.unreferenced == Unreferenced::Reject {
                        "error"
                    } else {
                        "warning"
                    },
                    orphan.snap.display()
                );
            }
        }
        unreferenced_failed = args.unreferenced == Unreferenced::Reject && !orphans.is_empty();
    }
    let outcome = wirecheck_results::outcome::Outcome::of(results, args.strict);
    report_outcome(&outcome, &args.out);
    match outcome {
        wirecheck_results::outcome::Outcome::Passed if unreferenced_failed => EXIT_FAILED,
        o => exit_status(&o),
    }
}

/// Why nothing runs: every selected case is one the agents are not offered (a flow they do not
/// claim, no guest for a guest-only agent), or none matched.
fn nothing_planned(unclaimed_flows: &[wirecheck_results::UnclaimedFlow]) -> String {
    let unclaimed: Vec<String> = unclaimed_flows
        .iter()
        .map(|u| format!("agent {}: {u}", shown(&u.agent)))
        .collect();
    if unclaimed.is_empty() {
        return "no case matches --cases / --exclude / --partition; `wirecheck list` shows the case ids".to_owned();
    }
    format!(
        "no case to run: the selected cases are not offered to the agents ({})",
        unclaimed.join("; ")
    )
}

/// Every agent of the run has its entry, in the order given: one offered no case at all
/// (every selected scenario not offered to it) is shown, and not judged.
fn list_every_agent(results: &mut wirecheck_results::RunResults, profiles: &[Arc<AgentProfile>]) {
    let mut ran = std::mem::take(&mut results.agents);
    results.agents = profiles
        .iter()
        .map(|p| match ran.iter().position(|a| a.agent == p.name) {
            Some(i) => ran.swap_remove(i),
            None => wirecheck_results::AgentResults {
                agent: p.name.clone(),
                cases: Vec::new(),
            },
        })
        .collect();
}

/// What `wirecheck merge` needs to tell this run's parts from another's: the fingerprint of
/// the whole plan (every partition), its case count, this part.
fn run_info(
    profiles: &[Arc<AgentProfile>],
    scenarios: &[Arc<Scenario>],
    filter: &CaseFilter,
    args: &RunArgs,
) -> wirecheck_results::RunInfo {
    let whole = runner::plan(profiles, scenarios, filter, None, args.snapshots.is_some());
    let cases: Vec<(&str, String)> = whole
        .iter()
        .flat_map(|p| {
            p.checks
                .iter()
                .map(|c| (p.profile.name.as_str(), p.scenario.case_id(*c)))
        })
        .collect();
    wirecheck_results::RunInfo {
        id: args.run_id.clone(),
        plan_cases: cases.len(),
        plan: wirecheck_results::merge::plan_fingerprint(
            conformance::build_info::VERSION,
            args.snapshots.is_some(),
            cases,
            profiles
                .iter()
                .map(|p| profile_content(p))
                .chain(scenarios.iter().map(|s| scenario_content(s))),
        ),
        partition: args
            .partition
            .map_or(wirecheck_results::PartInfo { k: 1, n: 1 }, |p| {
                wirecheck_results::PartInfo { k: p.k, n: p.n }
            }),
    }
}

/// What a profile makes the agent do and how it is judged (its commands, environment,
/// claims, reactions, exit statuses, declarations), not where it was read from: parts run
/// from two checkouts of the same profile are one run, parts of two different agents that
/// share a name are not.
fn profile_content(p: &AgentProfile) -> String {
    format!(
        "profile {}: {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        p.name,
        p.attach,
        p.commands,
        p.env,
        p.capabilities,
        p.reactions,
        p.exit,
        p.done,
        p.deviations,
        p.limitations,
        p.encoded,
        p.failure_description,
    )
}

/// What a scenario asks of the agent and the fake, not the file it came from.
fn scenario_content(s: &Scenario) -> String {
    let mut fake = s.fake.clone();
    fake.origin.clear();
    let checks: Vec<&str> = s.checks.iter().map(|c| c.as_str()).collect();
    format!(
        "scenario {}: {:?} {:?} {:?} {:?}",
        s.id, s.agent, s.expect, checks, fake
    )
}

/// The diff of every snapshot case that failed, after the summary (escaped and clipped: agent
/// text).
fn print_snapshot_diffs(results: &wirecheck_results::RunResults) {
    let suffix = format!(".{}", conformance::snapshot::CHECK_ID);
    for agent in &results.agents {
        for case in &agent.cases {
            if case.id.ends_with(&suffix) && case.verdict == wirecheck_results::Verdict::Fail {
                conformance::tools::write_stdout(&format!(
                    "\n{} / {}: {}\n",
                    shown(&agent.agent),
                    shown(&case.id),
                    shown(case.reason.as_deref().unwrap_or_default())
                ));
                for e in &case.evidence {
                    if let Some(excerpt) = &e.excerpt {
                        conformance::tools::write_stdout(&format!(
                            "{}\n",
                            wirecheck_results::text::shown_lines(
                                excerpt,
                                DIFF_LINE_CHARS,
                                wirecheck_results::text::MAX_SHOWN_LINES
                            )
                        ));
                    }
                }
            }
        }
    }
}

/// Accepted snapshots of the agents run whose scenario is not among the loaded ones.
fn orphaned_snapshots(
    dir: &Path,
    profiles: &[Arc<AgentProfile>],
    scenarios: &[Arc<Scenario>],
) -> Result<Vec<conformance::snapshot::store::Found>, String> {
    Ok(conformance::snapshot::store::list(dir)?
        .into_iter()
        .filter(|f| !f.pending)
        .filter(|f| profiles.iter().any(|p| p.name == f.agent))
        .filter(|f| !scenarios.iter().any(|s| s.id == f.scenario))
        .collect())
}
