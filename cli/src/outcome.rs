//! How a run's end (`wirecheck_results::outcome::Outcome`, decided from its results) becomes the
//! exit status, and what stderr says when it is not the verdicts'.

use std::path::Path;

use conformance::runner;
use wirecheck_results::outcome::Outcome;

use crate::status::{EXIT_FAILED, EXIT_OK, EXIT_USAGE};

/// The process exit status of how a run ended: 0, 1, 2, or 128 + the signal.
pub fn exit_status(outcome: &Outcome) -> u8 {
    match outcome {
        Outcome::Interrupted(signal) => runner::interrupted_exit_status(signal),
        Outcome::NotJudged(_) => EXIT_USAGE,
        Outcome::Failed => EXIT_FAILED,
        Outcome::Passed => EXIT_OK,
    }
}

/// Longest line of why a run was not judged (a never-started agent's command and stderr).
const OUTCOME_LINE_CHARS: usize = 2000;

/// Says on stderr why a run did not end with its verdicts: interrupted, or not judged.
pub fn report_outcome(outcome: &Outcome, out: &Path) {
    match outcome {
        Outcome::Interrupted(signal) => eprintln!(
            "wirecheck: interrupted ({signal}): every agent was stopped; the results in {} are partial",
            out.display()
        ),
        Outcome::NotJudged(messages) => {
            for m in messages {
                eprintln!(
                    "wirecheck: error: {}",
                    wirecheck_results::text::shown_lines(m, OUTCOME_LINE_CHARS, usize::MAX)
                );
            }
        }
        Outcome::Failed | Outcome::Passed => {}
    }
}
