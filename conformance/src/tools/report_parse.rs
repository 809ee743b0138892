//! `wirecheck report parse STRING [--json]`: an encoded report's dialect and
//! fields, with the lenient and the strict parser's verdicts.

use std::fmt::Write as _;

use serde::Serialize;
use wirecheck_oracle::Finding;
use wirecheck_oracle::encoded::{self, EncodedReport, Mode};

use super::kvp_dump::finding_line;
use super::text::visible;
use super::{EXIT_OK, EXIT_PROBLEMS, ToolError, ToolOutput};

#[derive(Serialize)]
struct Parsed<'a> {
    input: &'a str,
    lenient: Outcome,
    strict: Outcome,
}

/// One parser's result: `report` when it parsed, `error` when it did not.
#[derive(Serialize)]
struct Outcome {
    ok: bool,
    report: Option<EncodedReport>,
    error: Option<String>,
}

impl Outcome {
    fn of(input: &str, mode: Mode) -> Outcome {
        match encoded::parse(input, mode) {
            Ok(report) => Outcome {
                ok: true,
                report: Some(report),
                error: None,
            },
            Err(error) => Outcome {
                ok: false,
                report: None,
                error: Some(error.to_string()),
            },
        }
    }

    fn has_error_findings(&self) -> bool {
        self.report
            .as_ref()
            .is_some_and(|r| r.findings.iter().any(Finding::is_error))
    }
}

/// Parses `input` with oracle::encoded in lenient and strict mode. Exit 0
/// when both parse without error findings, else 1.
pub fn report_parse(input: &str, json: bool) -> Result<ToolOutput, ToolError> {
    let parsed = Parsed {
        input,
        lenient: Outcome::of(input, Mode::Lenient),
        strict: Outcome::of(input, Mode::Strict),
    };
    let clean = parsed.lenient.ok
        && parsed.strict.ok
        && !parsed.lenient.has_error_findings()
        && !parsed.strict.has_error_findings();
    let stdout = if json {
        let mut text = serde_json::to_string_pretty(&parsed).expect("report serialises");
        text.push('\n');
        text
    } else {
        human(&parsed)
    };
    Ok(ToolOutput {
        stdout,
        exit_code: if clean { EXIT_OK } else { EXIT_PROBLEMS },
    })
}

fn human(parsed: &Parsed<'_>) -> String {
    let mut out = String::new();
    match (&parsed.lenient.report, &parsed.lenient.error) {
        (Some(report), _) => {
            let dialect = report.dialect.map_or(
                "unknown (no quoted field and no agent= to tell)".to_string(),
                |d| d.to_string(),
            );
            let _ = writeln!(out, "dialect    {dialect}");
            let _ = writeln!(
                out,
                "truncated  {}",
                if report.truncated { "yes" } else { "no" }
            );
            let _ = writeln!(out, "fields     {}", report.fields.len());
            let width = report
                .fields
                .iter()
                .map(|(k, _)| k.chars().count())
                .max()
                .unwrap_or(0);
            for (key, value) in &report.fields {
                let _ = writeln!(out, "  {:width$} = {}", visible(key), visible(value));
            }
            findings(&mut out, "findings (lenient)", &report.findings);
        }
        (None, error) => {
            let _ = writeln!(
                out,
                "lenient    cannot parse: {}",
                error.as_deref().unwrap_or("?")
            );
        }
    }
    match (&parsed.strict.report, &parsed.strict.error) {
        (Some(report), _) => {
            let _ = writeln!(out, "strict     parses");
            let lenient = parsed.lenient.report.as_ref().map(|r| &r.findings);
            if lenient != Some(&report.findings) {
                findings(&mut out, "findings (strict)", &report.findings);
            }
        }
        (None, error) => {
            let _ = writeln!(
                out,
                "strict     rejects: {}",
                error.as_deref().unwrap_or("?")
            );
        }
    }
    out
}

fn findings(out: &mut String, title: &str, findings: &[Finding]) {
    if findings.is_empty() {
        let _ = writeln!(out, "{title}: none");
    } else {
        let _ = writeln!(out, "{title}:");
        for finding in findings {
            let _ = writeln!(out, "  {}", finding_line(finding));
        }
    }
}
