//! `wirecheck prop`: property runs against real agents. Generated failure reports and
//! in-progress descriptions (proptest strategies weighted to the encoded format's hard parts),
//! each turned into an in-memory scenario and run through the runner like any scenario (fresh
//! fake, same checks), the first failure shrunk with proptest's `TestRunner` and reported with
//! the smallest input, the check that failed and one command that replays it. Failures are
//! kept in a regression file replayed first; a profile's `[[limitation]]`s make known
//! limitations `non-strict` / `unimplemented` with the smallest input that shows them.
//!
//! Modules: [`input`] (the input and its JSON form), [`strategy`] (the generators),
//! [`property`] (the properties and their scenarios), [`schedule`] (a fault schedule and the
//! scenario file it is run as), [`judge`] (a case's class),
//! [`search`] (generate, shrink, confirm), [`regressions`] (the regression file).

pub mod input;
pub mod judge;
pub mod property;
pub mod regressions;
pub mod schedule;
pub mod search;
pub mod strategy;

pub use input::Input;
pub use property::Property;
pub use search::{Finding, PropSettings, PropertyReport, run_property};

use crate::agent::{AgentProfile, DeviationVerdict};
use crate::disposition::NotRun;
use crate::tools::text::visible;
use judge::Class;
use wirecheck_results::{CaseResult, Evidence, Timeline, Verdict};

/// A plain input for the pre-flight checks (capabilities, attach mode).
pub fn strategy_probe_input(property: Property) -> Input {
    if property.generates() == property::Generates::Schedule {
        return Input {
            schedule: vec![schedule::Answer::Status(503)],
            ..Input::default()
        };
    }
    if property.is_failure() {
        Input {
            reason: Some("probe".into()),
            data: Vec::new(),
            description: None,
            ..Input::default()
        }
    } else {
        Input {
            reason: None,
            data: Vec::new(),
            description: Some("probe".into()),
            ..Input::default()
        }
    }
}

/// The one command that runs exactly `input` again.
pub fn replay_command(settings: &PropSettings, property: Property, input: &Input) -> String {
    format!(
        "{} --property {} --input {}",
        settings.replay_prefix,
        property.name(),
        input::shell_quote(&input.to_json())
    )
}

/// At most this many evidence items of the failed checks per finding.
const MAX_CHECK_EVIDENCE: usize = 8;

fn finding_evidence(
    settings: &PropSettings,
    property: Property,
    profile: &AgentProfile,
    f: &Finding,
    out: &mut Vec<Evidence>,
) {
    let what = match f.class {
        Class::Declared(k) => {
            let l = &profile.limitations[k];
            format!(
                "declared limitation (input {}, checks {}): smallest input that shows it",
                l.input.as_str(),
                l.checks
            )
        }
        _ => "smallest failing input".to_owned(),
    };
    let how = if f.replayed {
        "replayed, not shrunk".to_owned()
    } else {
        format!(
            "shrunk from {} bytes of JSON in {} agent runs, {} ms",
            f.original.to_json().len(),
            f.shrink_runs,
            f.shrink_ms
        )
    };
    let reproduced = if f.reproduced {
        ""
    } else {
        "; NOT reproduced when run once more (a flaky failure?): the checks below are of that run"
    };
    out.push(crate::checks::note(
        format!("{what} ({how}){reproduced}"),
        Some(f.input.to_json()),
    ));
    out.push(crate::checks::note(
        "replay exactly this input",
        Some(replay_command(settings, property, &f.input)),
    ));
    if property.generates() == property::Generates::Schedule
        && let Some(dir) = f.cases.iter().find_map(|c| c.artifacts.as_ref())
    {
        out.push(crate::checks::note(
            format!(
                "as a scenario file: {dir}/{} (wirecheck run --scenarios FILE replays it)",
                search::scenario_file(profile, f.class)
            ),
            None,
        ));
    }
    for c in judge::failed(&f.cases) {
        out.push(crate::checks::note(
            format!(
                "{} failed: {}",
                judge::check_of(property, &c.id),
                c.reason.as_deref().unwrap_or("")
            ),
            None,
        ));
        out.extend(c.evidence.iter().take(MAX_CHECK_EVIDENCE).cloned());
    }
}

fn first_failure(property: Property, f: &Finding) -> String {
    judge::failed(&f.cases)
        .first()
        .map(|c| {
            format!(
                "{} failed ({})",
                judge::check_of(property, &c.id),
                crate::checks::clip(c.reason.as_deref().unwrap_or(""), 300)
            )
        })
        .unwrap_or_else(|| "it passed when run once more".into())
}

/// `, N not run (...), M not judged (...)` for the inputs that were neither a pass nor a
/// failure; empty when every input was judged.
fn unjudged_text(report: &PropertyReport) -> String {
    let mut out = String::new();
    if report.not_run > 0 {
        out.push_str(&format!(
            ", {} not run (longer than a case may take for this agent)",
            report.not_run
        ));
    }
    if report.unjudged > 0 {
        out.push_str(&format!(
            ", {} not judged (a timing the machine stalled or the speed made too coarse)",
            report.unjudged
        ));
    }
    out
}

/// The property's case `prop.<property>` in the results model.
pub fn case_result(
    report: &PropertyReport,
    profile: &AgentProfile,
    settings: &PropSettings,
) -> CaseResult {
    let property = report.property;
    let mut evidence = vec![crate::checks::note(
        format!(
            "{} generated input(s) (seed {}), {} replayed{}{}",
            report.generated,
            report.seed,
            report.replayed,
            unjudged_text(report),
            settings
                .regressions
                .as_ref()
                .map(|p| format!(" (regression file {})", p.display()))
                .unwrap_or_default()
        ),
        None,
    )];
    let mut timeline = Timeline::default();
    let mut artifacts = None;
    let not_judged = report.not_run + report.unjudged;
    let every_input_not_run = not_judged > 0 && not_judged == report.generated + report.replayed;
    let (verdict, reason) = if let Some(why) = &report.skipped {
        (Verdict::Skipped, Some(why.to_string()))
    } else if every_input_not_run && report.undeclared.is_none() && report.declared.is_empty() {
        (
            Verdict::Skipped,
            Some(format!(
                "none of its {not_judged} inputs could be judged{}",
                unjudged_text(report)
            )),
        )
    } else if let Some(f) = &report.undeclared {
        finding_evidence(settings, property, profile, f, &mut evidence);
        if let Some(c) = f.cases.first() {
            timeline = c.timeline.clone();
            artifacts = c.artifacts.clone();
        }
        (
            Verdict::Fail,
            Some(format!(
                "{} on input {}; replay: {}",
                first_failure(property, f),
                f.input.summary(200),
                replay_command(settings, property, &f.input)
            )),
        )
    } else if !report.declared.is_empty() {
        let mut reasons = Vec::new();
        let mut verdict = Verdict::Unimplemented;
        for f in &report.declared {
            let Class::Declared(k) = f.class else {
                continue;
            };
            let l = &profile.limitations[k];
            if l.verdict == DeviationVerdict::NonStrict {
                verdict = Verdict::NonStrict;
            }
            reasons.push(format!(
                "known limitation (input {}, {}): {}; smallest input {}: {}",
                l.input.as_str(),
                l.properties,
                l.reason,
                f.input.summary(120),
                first_failure(property, f)
            ));
            finding_evidence(settings, property, profile, f, &mut evidence);
            if artifacts.is_none()
                && let Some(c) = f.cases.first()
            {
                timeline = c.timeline.clone();
                artifacts = c.artifacts.clone();
            }
        }
        (verdict, Some(reasons.join("; ")))
    } else {
        (Verdict::Pass, None)
    };
    CaseResult {
        id: property.case_id(),
        title: property.title(),
        scenario: property.case_id(),
        verdict,
        reason,
        evidence,
        duration_ms: report.duration_ms,
        timeline,
        artifacts,
        not_judged: report.skipped.as_ref().and_then(NotRun::not_judged),
        attempts: None,
    }
}

/// What the terminal shows for one property (agent text escaped).
pub fn describe(report: &PropertyReport, case: &CaseResult) -> String {
    let mut out = format!(
        "{} {}: {} ({} generated, {} replayed{}, {} ms)\n",
        case.verdict.as_str().to_uppercase(),
        case.id,
        match case.verdict {
            Verdict::Pass if report.not_run + report.unjudged > 0 => {
                "every check judged passed".to_owned()
            }
            Verdict::Pass => "every check passed".to_owned(),
            // Not clipped: it ends with the replay command, which must stay whole.
            _ => visible(case.reason.as_deref().unwrap_or("")),
        },
        report.generated,
        report.replayed,
        unjudged_text(report),
        report.duration_ms
    );
    if case.verdict != Verdict::Pass && case.verdict != Verdict::Skipped {
        for e in &case.evidence {
            out.push_str(&format!("  {}\n", wirecheck_results::text::shown(&e.note)));
            if let Some(x) = &e.excerpt {
                out.push_str(&format!("    {}\n", visible(&crate::checks::clip(x, 600))));
            }
        }
    }
    if let Some(p) = &report.persisted {
        out.push_str(&format!(
            "  saved to the regression file {} (replayed first next time; commit it)\n",
            p.display()
        ));
    }
    out
}
