//! `wirecheck merge OUT PART...`: the parts of one `--partition` run read, checked and merged
//! (`wirecheck_results::merge`), written as one results folder; the exit status is the merged
//! run's outcome.

use std::io::IsTerminal as _;

use crate::cli::MergeArgs;
use crate::outcome::{exit_status, report_outcome};
use crate::status::usage;

/// `wirecheck merge`; returns the exit status.
pub fn merge(args: MergeArgs) -> u8 {
    use wirecheck_results::merge;
    let mut parts = Vec::new();
    for path in &args.parts {
        match merge::read_part(path) {
            Ok(p) => parts.push(p),
            Err(e) => return usage(e),
        }
    }
    let results = match merge::check_out(&args.out, &parts).and_then(|()| merge::merge(&parts)) {
        Ok(r) => r,
        Err(e) => return usage(e),
    };
    if let Err(e) = wirecheck_results::folder::claim(&args.out) {
        return usage(e);
    }
    if let Err(e) = merge::copy_artifacts(&args.out, &parts) {
        return usage(e);
    }
    if let Err(e) = wirecheck_results::write_all(&args.out, &results) {
        return usage(format!("cannot write the results: {e}"));
    }
    if let Some(path) = &args.summary
        && let Err(e) = wirecheck_results::summary::append(path, &results, args.strict)
    {
        return usage(format!("cannot write the summary {}: {e}", path.display()));
    }
    let color = crate::console::colors_enabled(std::io::stdout().is_terminal());
    conformance::tools::write_stdout(&crate::console::summary(
        &results,
        &args.out,
        args.strict,
        color,
    ));
    // The parts' own ends carry over: an interrupted or unjudged part is not a green merge.
    let outcome = wirecheck_results::outcome::Outcome::of(&results, args.strict);
    report_outcome(&outcome, &args.out);
    exit_status(&outcome)
}
