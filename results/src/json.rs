//! `results.json`: the machine-readable results, versioned by `schema_version`
//! and documented by `results/schema/results.schema.json`.

use std::path::{Path, PathBuf};

use crate::model::{NotJudged, RunResults, SCHEMA_VERSION};
use crate::output::{ResultsError, write_file};

/// File name inside the results folder.
pub const FILE_NAME: &str = "results.json";

/// The JSON Schema (draft 2020-12) of `results.json`, as committed.
pub const SCHEMA: &str = include_str!("../schema/results.schema.json");

/// Renders `results.json` (pretty-printed, trailing newline).
pub fn render(results: &RunResults) -> Result<String, ResultsError> {
    let mut text = serde_json::to_string_pretty(results).map_err(|e| ResultsError::Render {
        what: FILE_NAME,
        message: e.to_string(),
    })?;
    text.push('\n');
    Ok(text)
}

/// Writes `dir/results.json`; returns its path.
pub fn write(dir: impl AsRef<Path>, results: &RunResults) -> Result<PathBuf, ResultsError> {
    write_file(dir.as_ref(), FILE_NAME, render(results)?.as_bytes())
}

/// The largest results.json read back (a seven-agent run writes about 7 MB).
pub const MAX_READ_BYTES: u64 = 512 << 20;

/// Reads a `results.json` back, refusing other schema versions with a clear error. Someone
/// else's file: a regular file (not a FIFO or a device) of at most [`MAX_READ_BYTES`].
pub fn read(path: impl AsRef<Path>) -> Result<RunResults, ResultsError> {
    let path = path.as_ref();
    let text =
        fake_wireserver::files::read_regular_text(path, MAX_READ_BYTES).map_err(|source| {
            ResultsError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
    from_str(&text, path)
}

/// Parses `results.json` text; `origin` names it in errors.
pub fn from_str(text: &str, origin: &Path) -> Result<RunResults, ResultsError> {
    let parse_err = |source| ResultsError::Parse {
        path: origin.to_path_buf(),
        source,
    };
    // Check the version before the shape, so an old or new file gets the
    // version message rather than a confusing missing-field error.
    let value: serde_json::Value = serde_json::from_str(text).map_err(parse_err)?;
    let found = value.get("schema_version").and_then(|v| v.as_u64());
    match found {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(ResultsError::SchemaVersion {
                path: origin.to_path_buf(),
                found: v,
                expected: SCHEMA_VERSION,
            });
        }
        None => {} // let serde name the missing/mistyped field
    }
    let mut results: RunResults = serde_json::from_value(value).map_err(parse_err)?;
    for case in results.agents.iter_mut().flat_map(|a| &mut a.cases) {
        case.not_judged = NotJudged::of_reason(case.verdict, case.reason.as_deref());
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AgentResults, CaseResult, Timeline, Verdict};

    fn case(verdict: Verdict, reason: &str, not_judged: Option<NotJudged>) -> CaseResult {
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
            not_judged,
            attempts: None,
        }
    }

    /// `not_judged` is not written to results.json; reading the file back (what `wirecheck
    /// merge` does) gives each case the kind the runner had set.
    #[test]
    fn reading_results_back_restores_why_cases_were_not_judged() {
        let cases = vec![
            case(
                Verdict::Skipped,
                "harness error: the fake did not start",
                Some(NotJudged::Harness),
            ),
            case(
                Verdict::Skipped,
                "not run: wirecheck was interrupted (SIGINT)",
                Some(NotJudged::Interrupted),
            ),
            case(
                Verdict::Skipped,
                "agent a does not claim \"xml\" (the XML flow)",
                None,
            ),
            case(Verdict::Fail, "harness error: an agent printed this", None),
        ];
        let mut results = RunResults::new("2026-12-01T00:00:00Z", "0");
        results.agents = vec![AgentResults {
            agent: "a".into(),
            cases: cases.clone(),
        }];
        let text = render(&results).unwrap();
        assert!(!text.contains("not_judged"), "{text}");
        let back = from_str(&text, Path::new("results.json")).unwrap();
        assert_eq!(back.agents[0].cases, cases);
    }
}
