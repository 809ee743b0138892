//! The terminal summary of `wirecheck run`: failures grouped by cause, most frequent first,
//! bounded, and agent text escaped.

// The results crate's fixture (one copy for every suite that renders it).
use crate::results_support;

use std::path::Path;

use results_support::fixture;
use wirecheck::console::summary;
use wirecheck_results::{AgentResults, RunResults};

/// The fixture plus `n` agents failing the interval check the same way (other numbers).
fn with_naive_agents(n: usize) -> RunResults {
    let mut results = fixture();
    let failing = results.agents[0].cases[1].clone();
    for i in 0..n {
        let mut case = failing.clone();
        case.reason = Some(format!(
            "attempts {} and {} were {} ms apart (expected >= 500 ms)",
            i + 1,
            i + 2,
            i * 3 + 1
        ));
        results.agents.push(AgentResults {
            agent: format!("naive-{i}"),
            cases: vec![case],
        });
    }
    results
}

#[test]
fn failures_of_one_cause_are_one_group_listing_its_cases() {
    let text = summary(&with_naive_agents(8), Path::new("out"), false, false);
    assert!(
        text.contains(
            "FAIL ×9 health.interval (9 agents): attempts 3 and 4 were 12 ms apart (expected >= 500 ms)\n    provision-report retry.health.interval\n    naive-0 retry.health.interval\n"
        ),
        "{text}"
    );
    assert!(text.contains("    ... and 4 more\n"), "{text}");
    // Each failing case is named once at most; not the 9 lines of before.
    assert_eq!(text.matches("FAIL").count(), 1, "{text}");
    // Non-strict only counts under --strict.
    assert!(!text.contains("NON-STRICT"), "{text}");
    let strict = summary(&with_naive_agents(8), Path::new("out"), true, false);
    assert!(strict.contains("NON-STRICT hostile "), "{strict}");
}

#[test]
fn a_single_failure_keeps_its_one_line() {
    let text = summary(&fixture(), Path::new("out"), false, false);
    assert!(
        text.contains(
            "FAIL provision-report retry.health.interval: attempts 3 and 4 were 12 ms apart (expected >= 500 ms)\n"
        ),
        "{text}"
    );
}

#[test]
fn many_causes_are_bounded() {
    let mut results = fixture();
    let failing = results.agents[0].cases[1].clone();
    for i in 0..30 {
        let mut case = failing.clone();
        case.id = format!("s{i}.check.c{i}");
        results.agents[0].cases.push(case);
    }
    let text = summary(&results, Path::new("out"), false, false);
    // 31 causes (the check differs): 20 shown, the rest counted.
    assert_eq!(text.matches("\nFAIL ").count(), 20, "{text}");
    assert!(
        text.contains("... and 11 more causes (11 cases; see report.html)"),
        "{text}"
    );
}

/// The finding: agent text was not clipped on the console (a reason quoting a 1 MB report
/// was a 1 MB line per case). It is clipped, saying how much was left out; results.json
/// keeps it whole.
#[test]
fn agent_text_is_clipped_on_the_console_saying_how_much() {
    let mut results = fixture();
    let huge = format!("state is \"{}\"", "A".repeat(1_000_000));
    for agent in &mut results.agents {
        for case in &mut agent.cases {
            case.reason = Some(huge.clone());
        }
    }
    results.agents[0].agent = "N".repeat(10_000);
    let text = summary(&results, Path::new("out"), false, false);
    let longest = text.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(longest < 1_000, "a line of {longest} characters");
    let cut = huge.chars().count() - wirecheck_results::text::MAX_SHOWN_CHARS;
    assert!(
        text.contains(&format!(
            "… [{cut} more characters not shown; results.json has the whole text]"
        )),
        "{text}"
    );
    assert!(text.len() < 20_000, "{} bytes", text.len());
}

/// The fixture plus an agent that exited 2 on its arguments before any request, in a scenario
/// of four checks that each fail in their own words, and a more frequent unrelated failure.
fn with_an_agent_that_exited_on_its_arguments() -> RunResults {
    use wirecheck_results::{RunEnd, Timeline, Verdict};
    let mut results = with_naive_agents(8);
    let template = results.agents[0].cases[1].clone();
    let mut cases = Vec::new();
    for (scenario, stderr) in [
        (
            "report.description.special.json",
            "error: unexpected argument 'pipe=a|b' found",
        ),
        (
            "report.description.long.xml",
            "error: unexpected argument 'detail=it's a \"quote\"' found",
        ),
    ] {
        for (check, reason) in [
            (
                "kvp.report",
                "no PROVISIONING_REPORT record in the pool file",
            ),
            ("behaviour.terminal", "run 1 never sent its health report"),
            ("behaviour.exit", "run 1: exit status 2, expected 0"),
        ] {
            let mut case = template.clone();
            case.id = format!("{scenario}.{check}");
            case.verdict = Verdict::Fail;
            case.reason = Some(reason.into());
            case.timeline = Timeline {
                runs: vec![RunEnd {
                    exit: "exit status 2".into(),
                    exit_code: Some(2),
                    stderr_tail: format!(
                        "{stderr}\n\nUsage: provision-report failure [OPTIONS] --reason <TEXT>\n\nFor more information, try '--help'."
                    ),
                    stderr_bytes: 120,
                }],
                ..Timeline::default()
            };
            cases.push(case);
        }
    }
    results.agents.push(AgentResults {
        agent: "agent-cmd".into(),
        cases,
    });
    results
}

/// The findings: a failed run led its summary with "×33 no PROVISIONING_REPORT record" while
/// the root cause (the agent exited 2 on its arguments before any request) was only in the
/// artifacts, and that one cause showed as several problem groups, one per check. It is one
/// group, first, saying the exit status and the start of the agent's stderr.
#[test]
fn one_root_cause_is_one_problem_group_and_leads_the_summary() {
    let results = with_an_agent_that_exited_on_its_arguments();
    let text = summary(&results, Path::new("out"), false, false);
    let groups: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        groups[0].starts_with(
            "FAIL ×6 every check (1 agent): the agent exited 2 before any request reached the fake; its stderr: error: unexpected argument 'pipe=a|b' found / Usage: provision-report failure"
        ),
        "{text}"
    );
    // The more frequent failure comes after it; no group per check of the agent's cases.
    assert!(groups[1].starts_with("FAIL ×9 health.interval"), "{text}");
    assert_eq!(groups.len(), 2, "{text}");

    // report.html and the Markdown summary group them the same way, root cause first.
    let page = wirecheck_results::html::render(&results);
    let problems = &page[page.find("<section id=\"problems\"").unwrap()..];
    let first = &problems[problems.find("<details").unwrap()..];
    assert!(
        first.contains("×6</span> <code>every check</code> the agent exited 2"),
        "{}",
        &first[..600]
    );
    let md = wirecheck_results::summary::render(&results, false);
    assert!(
        md.contains("in 2 group(s)")
            && md.contains("- **fail** every check × 6: the agent exited 2"),
        "{md}"
    );
}

/// A case whose attempts were judged differently (flaky, the worst verdict standing) and one
/// whose every attempt stalled are named in both summaries, not hidden among the counts.
#[test]
fn flaky_and_never_judged_cases_are_named_in_the_summaries() {
    use wirecheck_results::{Attempts, Verdict};
    let mut results = fixture();
    let mut flaky = results.agents[0].cases[1].clone();
    flaky.id = "budget.exhausted.503.behaviour.budget".into();
    flaky.attempts = Some(Attempts {
        count: 3,
        stalled: 1,
        judged: vec![Verdict::Pass, Verdict::Fail],
        flaky: true,
    });
    let mut stalled = results.agents[0].cases[1].clone();
    stalled.id = "retry.status.500.behaviour.interval".into();
    stalled.verdict = Verdict::Informational;
    stalled.attempts = Some(Attempts {
        count: 3,
        stalled: 3,
        judged: vec![],
        flaky: false,
    });
    results.agents[0].cases.extend([flaky, stalled]);
    let text = summary(&results, Path::new("out"), false, false);
    assert!(
        text.contains(
            "FLAKY 1 case judged differently by their attempts (the worst verdict stands):\n    fail provision-report budget.exhausted.503.behaviour.budget: 3 attempts, judged pass, fail\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "NOT JUDGED 1 case whose timing the machine stalled on every attempt (informational):\n    informational provision-report retry.status.500.behaviour.interval: 3 attempts\n"
        ),
        "{text}"
    );
    let md = wirecheck_results::summary::render(&results, false);
    assert!(
        md.contains("### Flaky: 1 case(s) judged differently by their attempts (the worst verdict stands)\n\n- **fail** provision-report / budget.exhausted.503.behaviour.budget: 3 attempts, judged pass, fail\n"),
        "{md}"
    );
    assert!(
        md.contains("### ⚠️ Not judged: 1 case(s) whose timing the machine stalled on every attempt (informational)\n\n- **informational** provision-report / retry.status.500.behaviour.interval: 3 attempts\n"),
        "{md}"
    );
    // Without such cases, neither section.
    let plain = summary(&fixture(), Path::new("out"), false, false);
    assert!(
        !plain.contains("FLAKY") && !plain.contains("NOT JUDGED"),
        "{plain}"
    );
}
