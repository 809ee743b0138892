//! How a run ends, decided once from its results, so `wirecheck run`, `wirecheck merge` and the
//! Markdown summary always say the same: a run that could not be judged is never "passed".

use super::model::RunResults;

/// The end of a run, in order of precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Cut short by this signal (`SIGINT`, `SIGTERM`, `SIGHUP`): the results are partial.
    Interrupted(String),
    /// Nothing trustworthy to say about some agent: a harness error, an agent that never got
    /// going, or one none of whose cases was judged. Each message says which and why.
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
        let harness = crate::runner::harness_errors(results);
        if harness > 0 {
            not_judged.push(format!(
                "{harness} case(s) could not be run because of a harness error (their reasons are in results.json); they are skipped, not judged"
            ));
        }
        not_judged.extend(results.never_started.iter().map(|n| n.message.clone()));
        for n in crate::runner::nothing_judged(results) {
            if results.never_started.iter().any(|s| s.agent == n.agent) {
                continue;
            }
            let also = if n.reason_cases < n.cases {
                format!(" (reason of {} of them)", n.reason_cases)
            } else {
                String::new()
            };
            not_judged.push(format!(
                "every one of the {} case(s) of agent {} was skipped, so nothing about it was judged: {}{also}",
                n.cases,
                n.agent,
                crate::tools::text::visible(&n.reason)
            ));
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

    /// The process exit status: 0, 1, 2, or 128 + the signal.
    pub fn exit_status(&self) -> u8 {
        match self {
            Outcome::Interrupted(signal) => crate::runner::interrupted_exit_status(signal),
            Outcome::NotJudged(_) => crate::cli::EXIT_USAGE,
            Outcome::Failed => crate::cli::EXIT_FAILED,
            Outcome::Passed => crate::cli::EXIT_OK,
        }
    }
}
