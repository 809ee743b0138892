//! The wording a skipped case's reason begins with, where results.json is read back (`wirecheck
//! merge` reads results another process wrote): which reasons say the case has no verdict about
//! the agent (a harness error, an interruption), which say the agent does not claim what the
//! case needs. Part of the results contract: the runner renders its reasons with these prefixes
//! (`conformance::disposition`), and nothing else parses them.

/// How the reasons of cases that were started or planned but have no verdict begin.
pub const NOT_JUDGED: &str = "not judged";
pub const NOT_RUN: &str = "not run";
/// How a harness error's reason begins (`conformance::disposition::HarnessError`).
pub const HARNESS_PREFIX: &str = "harness error: ";
/// Between the agent's name and what it does not claim (`agent NAME does not claim ...`).
pub const UNCLAIMED: &str = " does not claim ";

/// Whether a case's reason (as results.json has it) is a harness error's.
pub fn is_harness_error(reason: &str) -> bool {
    reason.starts_with(HARNESS_PREFIX)
}

/// Whether a skipped case's reason (as results.json has it) is that the agent does not claim
/// what the case needs (`Skip::Unclaimed`, `Skip::CheckUnclaimed` in the runner): a skip every
/// agent has, rarely the reason a whole run judged nothing.
pub fn is_unclaimed(reason: &str) -> bool {
    reason.starts_with("agent ") && reason.contains(UNCLAIMED)
}

/// Whether a skipped case's reason says it was not judged at all (a harness error, an
/// interruption), rather than not applying.
pub fn is_unjudged(reason: &str) -> bool {
    is_harness_error(reason) || reason.starts_with(NOT_JUDGED) || reason.starts_with(NOT_RUN)
}
