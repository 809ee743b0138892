//! The verdict on one generated case: its check results (the runner's, deviations already
//! applied) read as pass, a failure the profile declares (`[[limitation]]`), or a failure it
//! does not.

use crate::agent::AgentProfile;
use crate::results::{CaseResult, Verdict};
use crate::runner::HARNESS_ERROR;

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
}

/// The checks of one case that failed.
pub fn failed(cases: &[CaseResult]) -> Vec<&CaseResult> {
    cases.iter().filter(|c| c.verdict == Verdict::Fail).collect()
}

/// The check id of a case id `prop.<property>.<check>`.
pub fn check_of<'a>(property: Property, case_id: &'a str) -> &'a str {
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
        .position(|l| l.covers(property.name(), check) && input.has(l.input))
}

pub fn classify(
    profile: &AgentProfile,
    property: Property,
    input: &Input,
    cases: &[CaseResult],
) -> Class {
    if cases.iter().any(|c| {
        c.verdict == Verdict::Skipped
            && c.reason.as_deref().is_some_and(|r| {
                r.starts_with(HARNESS_ERROR) || r.starts_with("not judged") || r.starts_with("not run")
            })
    }) {
        return Class::NotJudged;
    }
    let failed = failed(cases);
    let Some(first) = failed.first() else {
        return Class::Pass;
    };
    let covered = |c: &CaseResult| limitation_for(profile, property, input, check_of(property, &c.id));
    if failed.iter().all(|c| covered(c).is_some()) {
        Class::Declared(covered(first).unwrap_or_default())
    } else {
        Class::Undeclared
    }
}
