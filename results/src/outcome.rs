//! How a run ends, decided once from its results, so `wirecheck run`, `wirecheck merge` and the
//! Markdown summary always say the same: a run that could not be judged is never "passed". The
//! exit status each end gives is the command line's.
//! "Judged" is a verdict reached by observing the agent ([`Verdict::is_judged`]): an agent
//! none of whose cases has one (every case skipped, or declared `unimplemented` by its
//! profile) makes the run "not judged", whatever the other agents got.

use crate::model::{AgentResults, NotJudged, RunResults, Verdict};

/// The end of a run, in order of precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Cut short by this signal (`SIGINT`, `SIGTERM`, `SIGHUP`): the results are partial.
    Interrupted(String),
    /// Nothing trustworthy to say about some agent: a harness error, an agent that never got
    /// going, or one none of whose cases was judged. Each message (one line) says which and why.
    NotJudged(Vec<String>),
    /// A case failed (with `--strict`: or was non-strict).
    Failed,
    Passed,
}

impl Outcome {
    /// `results` judged with or without `--strict`.
    pub fn of(results: &RunResults, strict: bool) -> Outcome {
        if let Some(signal) = &results.interrupted {
            return Outcome::Interrupted(signal.clone());
        }
        let mut not_judged = Vec::new();
        let harness = harness_errors(results);
        if harness > 0 {
            not_judged.push(format!(
                "{harness} case(s) could not be run because of a harness error (their reasons are in results.json); they are skipped, not judged"
            ));
        }
        not_judged.extend(results.never_started.iter().map(|n| n.message.clone()));
        for agent in &results.agents {
            if results.never_started.iter().any(|s| s.agent == agent.agent) {
                continue;
            }
            not_judged.extend(nothing_judged(agent, results));
        }
        if !not_judged.is_empty() {
            return Outcome::NotJudged(not_judged);
        }
        if results.exit_code(strict) == 0 {
            Outcome::Passed
        } else {
            Outcome::Failed
        }
    }
}

/// How many cases were not run because of a harness error (`wirecheck run` then exits 2).
pub fn harness_errors(results: &RunResults) -> usize {
    results
        .agents
        .iter()
        .flat_map(|a| &a.cases)
        .filter(|c| c.not_judged == Some(NotJudged::Harness))
        .count()
}

/// One line saying why nothing about `agent` was judged, when nothing was: how many of its
/// cases were skipped (with the most common reason) and how many its profile declares
/// unimplemented.
fn nothing_judged(agent: &AgentResults, results: &RunResults) -> Option<String> {
    if agent.cases.is_empty() {
        // Offered nothing at all: every selected scenario was not offered to it.
        let unclaimed: Vec<String> = results
            .unclaimed_flows
            .iter()
            .filter(|u| u.agent == agent.agent)
            .map(|u| u.to_string())
            .collect();
        return Some(format!(
            "agent {}: nothing about it was judged (no case of it ran){}",
            crate::text::visible(&agent.agent),
            if unclaimed.is_empty() {
                String::new()
            } else {
                format!(": {}", unclaimed.join("; "))
            }
        ));
    }
    if agent.cases.iter().any(|c| c.verdict.is_judged()) {
        return None;
    }
    let counts = agent.counts();
    let mut parts = Vec::new();
    if counts.skipped > 0 {
        let (reason, reason_cases) = most_common_skip_reason(agent);
        let also = if reason_cases < counts.skipped {
            format!(" (the reason of {reason_cases} of them)")
        } else {
            String::new()
        };
        parts.push(format!(
            "{} skipped: {}{also}",
            counts.skipped,
            crate::text::visible(reason)
        ));
    }
    if counts.unimplemented > 0 {
        parts.push(format!(
            "{} declared unimplemented by its profile (a declaration, not a verdict)",
            counts.unimplemented
        ));
    }
    Some(format!(
        "agent {}: nothing about it was judged (none of its {} case(s) got a verdict from observing it): {}",
        crate::text::visible(&agent.agent),
        agent.cases.len(),
        parts.join("; ")
    ))
}

/// The reason most skipped cases of `agent` give, with how many give it (the first seen among
/// equals). Not claiming something is every agent's reason for some cases, so another reason
/// (no root for the sandbox, say) is preferred when there is one: that is why the cases the
/// agent claims were not run.
fn most_common_skip_reason(agent: &AgentResults) -> (&str, usize) {
    let mut reasons: Vec<(&str, usize)> = Vec::new();
    for c in agent.cases.iter().filter(|c| c.verdict == Verdict::Skipped) {
        let r = c.reason.as_deref().unwrap_or("no reason given");
        match reasons.iter_mut().find(|(x, _)| *x == r) {
            Some((_, n)) => *n += 1,
            None => reasons.push((r, 1)),
        }
    }
    let rank = |(reason, n): (&str, usize)| (!crate::reason::is_unclaimed(reason), n);
    reasons
        .into_iter()
        .reduce(|best, r| if rank(r) > rank(best) { r } else { best })
        .unwrap_or(("no reason given", 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CaseResult, Timeline};

    fn case(verdict: Verdict, reason: &str) -> CaseResult {
        CaseResult {
            id: "s.report.state".into(),
            title: "t".into(),
            scenario: "s".into(),
            verdict,
            reason: Some(reason.into()),
            evidence: Vec::new(),
            duration_ms: 0,
            timeline: Timeline::default(),
            artifacts: None,
            not_judged: None,
            attempts: None,
        }
    }

    fn run_of(cases: Vec<CaseResult>) -> RunResults {
        let mut r = RunResults::new("2025-01-01T00:00:00Z", "0");
        r.agents = vec![AgentResults {
            agent: "afterburn".into(),
            cases,
        }];
        r
    }

    #[test]
    fn declarations_and_skips_are_not_judged_and_the_machine_reason_leads() {
        let unclaimed = "agent afterburn does not claim \"json\" (the JSON health endpoint)";
        let root = "sandbox attach needs root";
        let r = run_of(vec![
            case(Verdict::Skipped, unclaimed),
            case(Verdict::Skipped, unclaimed),
            case(Verdict::Skipped, root),
            case(Verdict::Unimplemented, "known deviation (*): no KVP"),
        ]);
        let Outcome::NotJudged(lines) = Outcome::of(&r, false) else {
            panic!("{:?}", Outcome::of(&r, false))
        };
        assert_eq!(
            lines,
            [
                "agent afterburn: nothing about it was judged (none of its 4 case(s) got a verdict from observing it): 3 skipped: sandbox attach needs root (the reason of 1 of them); 1 declared unimplemented by its profile (a declaration, not a verdict)"
            ]
        );
        // An agent offered no case at all (every selected scenario on a flow it does not
        // claim) is not judged either, whatever its neighbours got.
        let mut offered_nothing = run_of(vec![case(Verdict::Pass, "x")]);
        offered_nothing.agents.push(AgentResults {
            agent: "xml-only".into(),
            cases: Vec::new(),
        });
        offered_nothing.unclaimed_flows = vec![crate::model::UnclaimedFlow {
            agent: "xml-only".into(),
            flow: crate::model::NotOffered::Json,
            scenarios: 3,
            cases: 30,
        }];
        let Outcome::NotJudged(lines) = Outcome::of(&offered_nothing, false) else {
            panic!("{:?}", Outcome::of(&offered_nothing, false))
        };
        assert_eq!(
            lines,
            [
                "agent xml-only: nothing about it was judged (no case of it ran): the json flow is not claimed: 3 scenarios (30 cases) not offered"
            ]
        );
        // One observed verdict is enough, informational included.
        for judged in [Verdict::Pass, Verdict::Fail, Verdict::Informational] {
            let mut r = r.clone();
            r.agents[0].cases.push(case(judged, "x"));
            assert!(
                !matches!(Outcome::of(&r, false), Outcome::NotJudged(_)),
                "{judged}"
            );
        }
    }
}
