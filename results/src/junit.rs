//! `junit.xml`: one testsuite per agent, one testcase per case, for CI test
//! report viewers.
//!
//! Mapping: fail -> `<failure>` (reason + evidence); skipped and
//! unimplemented -> `<skipped>` (reason); non-strict and informational ->
//! passed, with the reason in `<system-out>` so nobody's CI goes red on them.
//!
//! Every string is someone else's text (agents, profiles, scenarios): the characters XML 1.0
//! cannot carry (C0 controls but tab, LF and CR; U+FFFE, U+FFFF) are written as `\u{ffff}`
//! ([`xml_text`]), so the document always parses; `results.json` keeps them exact.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use crate::model::{CaseResult, RunResults, Verdict};
use crate::output::{ResultsError, write_file};

/// File name inside the results folder.
pub const FILE_NAME: &str = "junit.xml";

/// Renders the JUnit XML document.
pub fn render(results: &RunResults) -> Result<String, ResultsError> {
    let mut report = Report::new("wirecheck");
    if let Ok(started) = chrono::DateTime::parse_from_rfc3339(&results.started) {
        report.set_timestamp(started);
    }
    report.set_time(Duration::from_millis(results.duration_ms));
    for agent in &results.agents {
        let mut suite = TestSuite::new(xml_text(&agent.agent));
        suite.set_time(Duration::from_millis(
            agent.cases.iter().map(|c| c.duration_ms).sum(),
        ));
        suite.add_property(Property::new(
            "wirecheck_version",
            xml_text(&results.wirecheck_version),
        ));
        for case in &agent.cases {
            suite.add_test_case(test_case(&agent.agent, case));
        }
        report.add_test_suite(suite);
    }
    report.to_string().map_err(|e| ResultsError::Render {
        what: FILE_NAME,
        message: e.to_string(),
    })
}

/// Writes `dir/junit.xml`; returns its path.
pub fn write(dir: impl AsRef<Path>, results: &RunResults) -> Result<PathBuf, ResultsError> {
    write_file(dir.as_ref(), FILE_NAME, render(results)?.as_bytes())
}

fn test_case(agent: &str, case: &CaseResult) -> TestCase {
    let reason = case.reason.as_deref().map_or_else(
        || format!("{} (no reason given)", case.verdict),
        |r| xml_text(r).into_owned(),
    );
    let status = match case.verdict {
        Verdict::Pass | Verdict::NonStrict | Verdict::Informational => TestCaseStatus::success(),
        Verdict::Fail => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status
                .set_message(reason.as_str())
                .set_type("fail")
                .set_description(details(case));
            status
        }
        Verdict::Skipped | Verdict::Unimplemented => {
            let mut status = TestCaseStatus::skipped();
            status
                .set_message(reason.as_str())
                .set_type(case.verdict.as_str());
            status
        }
    };
    let mut test_case = TestCase::new(xml_text(&case.id), status);
    test_case
        .set_classname(xml_text(&format!("{agent}.{}", case.scenario)))
        .set_time(Duration::from_millis(case.duration_ms))
        .add_property(Property::new("title", xml_text(&case.title)))
        .add_property(Property::new("verdict", case.verdict.as_str()));
    if let Some(dir) = &case.artifacts {
        test_case.add_property(Property::new("artifacts", xml_text(dir)));
    }
    if matches!(case.verdict, Verdict::NonStrict | Verdict::Informational) {
        test_case.set_system_out(format!("{}: {reason}\n{}", case.verdict, details(case)));
    }
    test_case
}

/// `text` with each character XML 1.0 cannot carry (outside its `Char` production) written
/// as `\u{hex}`, as the terminal shows control characters.
pub fn xml_text(text: &str) -> Cow<'_, str> {
    let allowed = |c: char| {
        matches!(c, '\t' | '\n' | '\r')
            || ('\u{20}'..='\u{D7FF}').contains(&c)
            || ('\u{E000}'..='\u{FFFD}').contains(&c)
            || c >= '\u{10000}'
    };
    if text.chars().all(allowed) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if allowed(c) {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

/// Evidence as plain text: one block per item (XML-safe: [`xml_text`]).
fn details(case: &CaseResult) -> String {
    xml_text(&raw_details(case)).into_owned()
}

fn raw_details(case: &CaseResult) -> String {
    let mut out = String::new();
    for evidence in &case.evidence {
        out.push_str("- ");
        out.push_str(&evidence.note);
        if !evidence.journal_seq.is_empty() {
            let seqs: Vec<String> = evidence.journal_seq.iter().map(u64::to_string).collect();
            out.push_str(&format!(" (journal #{})", seqs.join(", #")));
        }
        out.push('\n');
        if let Some(excerpt) = &evidence.excerpt {
            for line in excerpt.lines() {
                out.push_str("    ");
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}
