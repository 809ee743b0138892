//! The Markdown summary of a run for CI pages (`wirecheck run --summary FILE`, `wirecheck
//! merge --summary FILE`, e.g. `$GITHUB_STEP_SUMMARY`): the verdict, the counts, the agent ×
//! scenario group matrix, then the failures (and, with `--strict`, the non-strict verdicts)
//! grouped by cause as report.html and the terminal group them (`results::problems`), most
//! frequent first.
//!
//! Pure (same results, same bytes) and bounded: GitHub keeps at most 1 MiB of a step's
//! summary, so groups and the cases listed per group are capped, saying how many were left
//! out. Reasons and names are agents' text: escaped so they render as text, never as links,
//! images or markup ([`crate::markdown`]).

use std::io::Write as _;
use std::path::Path;

use crate::markdown::escape;
use crate::model::{RunResults, Verdict};
use crate::outcome::Outcome;
use crate::problems::{self, PROBLEM_VERDICTS};

/// Groups shown; the rest are counted.
pub const MAX_GROUPS: usize = 40;
/// Cases listed under a group; the rest are counted.
pub const MAX_CASES_PER_GROUP: usize = 15;
/// Characters of a reason shown.
const MAX_REASON_CHARS: usize = 300;

/// The summary as Markdown.
pub fn render(results: &RunResults, strict: bool) -> String {
    let counts = results.counts();
    // The same end as the command's exit status (results::outcome).
    let outcome = Outcome::of(results, strict);
    let mut out = String::new();
    let verdict = match &outcome {
        Outcome::Interrupted(_) => "⚠️ interrupted",
        Outcome::NotJudged(_) => "⛔ not judged",
        Outcome::Failed => "❌ failed",
        Outcome::Passed => "✅ passed",
    };
    out.push_str(&format!(
        "## wirecheck: {verdict}{}\n\n",
        if strict { " (--strict)" } else { "" }
    ));
    if let Outcome::NotJudged(messages) = &outcome {
        for m in messages {
            out.push_str(&format!("- {}\n", escape(m, MAX_REASON_CHARS * 2)));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "{} cases: {counts}, {} agent(s), wirecheck {}.\n\n",
        counts.total(),
        results.agents.len(),
        escape(&results.wirecheck_version, 40)
    ));
    if let Some(signal) = &results.interrupted {
        out.push_str(&format!(
            "**Interrupted** ({}): the results are partial.\n\n",
            escape(signal, 20)
        ));
    }
    if let Some(why) = &results.uncontained {
        out.push_str(&format!(
            "⚠️ **Uncontained**: the agents ran without containment (`--uncontained`): {}\n\n",
            escape(why, MAX_REASON_CHARS)
        ));
    }
    out.push_str(&crate::matrix::render(results));
    unsteady(&mut out, results);

    // The same causes as report.html and the terminal (results::problems).
    let verdicts: &[Verdict] = if strict {
        &PROBLEM_VERDICTS
    } else {
        &[Verdict::Fail]
    };
    let groups = problems::group(results, verdicts);
    if groups.is_empty() {
        return out;
    }
    let problems: usize = groups.iter().map(|g| g.cases.len()).sum();
    out.push_str(&format!(
        "\n### Problems: {problems} case(s) in {} group(s) of the same check and message\n\n",
        groups.len()
    ));
    for group in groups.iter().take(MAX_GROUPS) {
        out.push_str(&format!(
            "- **{}** {} × {}: {}\n",
            group.verdict.as_str(),
            escape(group.check, 120),
            group.cases.len(),
            escape(group.example(), MAX_REASON_CHARS)
        ));
        out.push_str("  <details><summary>cases</summary>\n\n");
        for case in group.cases.iter().take(MAX_CASES_PER_GROUP) {
            out.push_str(&format!(
                "  - {} / {}\n",
                escape(case.agent, 80),
                escape(&case.case.id, 200)
            ));
        }
        if group.cases.len() > MAX_CASES_PER_GROUP {
            out.push_str(&format!(
                "  - … and {} more (report.html lists them)\n",
                group.cases.len() - MAX_CASES_PER_GROUP
            ));
        }
        out.push_str("\n  </details>\n");
    }
    if groups.len() > MAX_GROUPS {
        out.push_str(&format!(
            "\n… and {} more group(s); report.html has every case.\n",
            groups.len() - MAX_GROUPS
        ));
    }
    out
}

/// The cases run more than once that did not settle plainly: flaky (their judged attempts
/// disagree; the worst verdict stands) and never judged (every attempt stalled).
fn unsteady(out: &mut String, results: &RunResults) {
    let u = results.unsteady();
    let list = |out: &mut String, cases: &[(&str, &crate::model::CaseResult)]| {
        for (agent, case) in cases.iter().take(MAX_CASES_PER_GROUP) {
            let judged: Vec<&str> = case
                .attempts
                .iter()
                .flat_map(|a| a.judged.iter().map(|v| v.as_str()))
                .collect();
            out.push_str(&format!(
                "- **{}** {} / {}: {} attempts{}\n",
                case.verdict.as_str(),
                escape(agent, 80),
                escape(&case.id, 200),
                case.attempt_count(),
                if judged.is_empty() {
                    String::new()
                } else {
                    format!(", judged {}", judged.join(", "))
                }
            ));
        }
        if cases.len() > MAX_CASES_PER_GROUP {
            out.push_str(&format!(
                "- … and {} more (results.json lists them)\n",
                cases.len() - MAX_CASES_PER_GROUP
            ));
        }
    };
    if !u.flaky.is_empty() {
        out.push_str(&format!(
            "\n### Flaky: {} case(s) judged differently by their attempts (the worst verdict stands)\n\n",
            u.flaky.len()
        ));
        list(out, &u.flaky);
    }
    if !u.stalled.is_empty() {
        out.push_str(&format!(
            "\n### ⚠️ Not judged: {} case(s) whose timing the machine stalled on every attempt (informational)\n\n",
            u.stalled.len()
        ));
        list(out, &u.stalled);
    }
}

/// Appends the summary to `path` (created if missing), as GitHub expects of
/// `$GITHUB_STEP_SUMMARY`, so several steps or commands can add to one page.
pub fn append(path: &Path, results: &RunResults, strict: bool) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(render(results, strict).as_bytes())?;
    file.write_all(b"\n")
}
