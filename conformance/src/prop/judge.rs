//! The verdict on one generated case: its check results (the runner's, deviations already
//! applied) read as pass, a failure the profile declares (`[[limitation]]`), or a failure it
//! does not.

use crate::agent::AgentProfile;
use wirecheck_results::{CaseResult, Verdict};

use super::input::Input;
use super::property::Property;

/// How one generated case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// No check failed.
    Pass,
    /// Every failed check is covered by a limitation of the profile for an input class this
    /// input has; the index is that of the first failed check's limitation.
    Declared(usize),
    /// A check failed that no limitation covers.
    Undeclared,
    /// The case was not judged (a harness error, an interruption): why.
    NotJudged,
    /// The runner did not run it: a schedule longer than a case may take for this agent
    /// (`runner::timing`), counted apart, never as a pass.
    NotRun,
    /// Nothing failed, but a check could not be called (`informational`: a timing the machine
    /// stalled, or one the agent time made too coarse): counted apart, never as a pass.
    Unjudged,
}

/// The checks of one case that failed.
pub fn failed(cases: &[CaseResult]) -> Vec<&CaseResult> {
    cases
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .collect()
}

/// The check id of a case id `prop.<property>.<check>`.
pub fn check_of(property: Property, case_id: &str) -> &str {
    case_id
        .strip_prefix(&property.case_id())
        .and_then(|rest| rest.strip_prefix('.'))
        .unwrap_or(case_id)
}

/// The limitation covering a failure of `check` on `input`, if the profile declares one.
pub fn limitation_for(
    profile: &AgentProfile,
    property: Property,
    input: &Input,
    check: &str,
) -> Option<usize> {
    profile
        .limitations
        .iter()
        .position(|l| l.covers(property.name(), check) && input.has(l.input, l.endpoint))
}

pub fn classify(
    profile: &AgentProfile,
    property: Property,
    input: &Input,
    cases: &[CaseResult],
) -> Class {
    if cases.iter().any(|c| c.not_judged.is_some()) {
        return Class::NotJudged;
    }
    if !cases.is_empty() && cases.iter().all(|c| c.verdict == Verdict::Skipped) {
        return Class::NotRun;
    }
    let failed = failed(cases);
    let Some(first) = failed.first() else {
        if cases.iter().any(|c| c.verdict == Verdict::Informational) {
            return Class::Unjudged;
        }
        return Class::Pass;
    };
    let covered =
        |c: &CaseResult| limitation_for(profile, property, input, check_of(property, &c.id));
    if failed.iter().all(|c| covered(c).is_some()) {
        Class::Declared(covered(first).unwrap_or_default())
    } else {
        Class::Undeclared
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirecheck_results::Timeline;

    fn profile() -> AgentProfile {
        let text = r#"name = "p"
description = "p"
capabilities = ["xml", "failure"]
[commands]
failure = ["true"]
[reactions]
retryable = [503]
transport_errors = "retry"
status_403 = "fatal"
[[limitation]]
property = "failure.*"
input = "non-latin-1"
checks = "behaviour.terminal"
verdict = "non-strict"
reason = "Latin-1 only"
"#;
        AgentProfile::from_toml_str(text, std::path::Path::new("p.toml")).unwrap()
    }

    fn case(check: &str, verdict: Verdict) -> CaseResult {
        CaseResult {
            id: format!("prop.failure.xml.{check}"),
            title: String::new(),
            scenario: String::new(),
            verdict,
            reason: Some("r".into()),
            evidence: Vec::new(),
            duration_ms: 0,
            timeline: Timeline::default(),
            artifacts: None,
            not_judged: None,
            attempts: None,
        }
    }

    fn input(reason: &str) -> Input {
        Input {
            reason: Some(reason.into()),
            data: Vec::new(),
            description: None,
            ..Input::default()
        }
    }

    #[test]
    fn a_limitation_covers_only_its_checks_and_only_inputs_of_its_class() {
        let p = profile();
        let prop = Property::FailureXml;
        let terminal = [
            case("behaviour.terminal", Verdict::Fail),
            case("report.state", Verdict::Pass),
        ];
        assert_eq!(
            classify(&p, prop, &input("aĀ"), &terminal),
            Class::Declared(0)
        );
        // The same failure on an input without such a character is no known limitation.
        assert_eq!(
            classify(&p, prop, &input("a'"), &terminal),
            Class::Undeclared
        );
        // A check the limitation does not name fails too: undeclared.
        let more = [
            case("behaviour.terminal", Verdict::Fail),
            case("report.shape", Verdict::Fail),
        ];
        assert_eq!(classify(&p, prop, &input("aĀ"), &more), Class::Undeclared);
        // Another property: undeclared.
        assert_eq!(
            classify(
                &p,
                Property::InProgressXml,
                &input("aĀ"),
                &[case("behaviour.terminal", Verdict::Fail)]
            ),
            Class::Undeclared
        );
        // Non-strict (a profile deviation) is no failure; a harness error is not judged.
        assert_eq!(
            classify(
                &p,
                prop,
                &input("a"),
                &[case("report.state", Verdict::NonStrict)]
            ),
            Class::Pass
        );
        // A timing left unjudged is neither a pass nor a failure.
        assert_eq!(
            classify(
                &p,
                prop,
                &input("a"),
                &[
                    case("report.state", Verdict::Pass),
                    case("behaviour.interval", Verdict::Informational)
                ]
            ),
            Class::Unjudged
        );
        let mut harness = case("report.state", Verdict::Skipped);
        harness.reason =
            Some(crate::disposition::HarnessError("fake did not start".into()).to_string());
        harness.not_judged = Some(wirecheck_results::NotJudged::Harness);
        assert_eq!(
            classify(&p, prop, &input("a"), &[harness]),
            Class::NotJudged
        );
        // What decides is how the case was disposed of, not how its reason reads: a skip whose
        // text happens to start like an interruption's is still a skip, and a skipped input
        // is not run, never a pass (a schedule too long for the agent is counted apart).
        let mut skipped = case("report.state", Verdict::Skipped);
        skipped.reason = Some("not run: the scenario would take 90 s".into());
        assert_eq!(classify(&p, prop, &input("a"), &[skipped]), Class::NotRun);
    }
}
