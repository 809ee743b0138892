//! The Markdown summary of a run for CI pages (`wirecheck run --summary FILE`, `wirecheck
//! merge --summary FILE`, e.g. `$GITHUB_STEP_SUMMARY`): the verdict, the counts, the agent ×
//! scenario group matrix, then the failures (and, with `--strict`, the non-strict verdicts)
//! grouped by cause as report.html and the terminal group them (`results::problems`), most
//! frequent first.
//!
//! Pure (same results, same bytes) and bounded: GitHub keeps at most 1 MiB of a step's
//! summary, so groups and the cases listed per group are capped, saying how many were left
//! out. Reasons and names are agents' text: escaped so they render as text, never as links,
//! images or markup.

use std::io::Write as _;
use std::path::Path;

use super::model::{RunResults, Verdict};
use super::outcome::Outcome;
use super::problems::{self, PROBLEM_VERDICTS};

/// Groups shown; the rest are counted.
pub const MAX_GROUPS: usize = 40;
/// Cases listed under a group; the rest are counted.
pub const MAX_CASES_PER_GROUP: usize = 15;
/// Characters of a reason shown.
const MAX_REASON_CHARS: usize = 300;

/// Markdown text: no markup, link or HTML survives, no line break, at most `max` characters.
pub fn escape(text: &str, max: usize) -> String {
    let clipped: String = text.chars().take(max).collect();
    let clipped = crate::tools::text::visible(&clipped);
    let mut out = String::with_capacity(clipped.len());
    for c in clipped.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\n' | '\r' => out.push(' '),
            // Emphasis, code, links and images, headings, tables, strike-through. Nothing
            // escaped here starts a line, so list and heading markers need no escape.
            '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '|' | '!' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    if text.chars().count() > max {
        out.push('…');
    }
    break_autolinks(&out)
}

/// GitHub turns `scheme://…`, `www.…` and `name@host` in plain text into links (after escapes
/// are resolved, so a backslash does not stop it): a zero-width space after `:/`, `www` and
/// `@` keeps them text.
fn break_autolinks(text: &str) -> String {
    const ZWSP: char = '\u{200B}';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let lower = rest.get(..4).map(str::to_ascii_lowercase);
        if rest.starts_with("://") {
            out.push_str(":/");
            out.push(ZWSP);
            rest = &rest[2..];
        } else if lower.as_deref() == Some("www.") {
            out.push_str(&rest[..3]);
            out.push(ZWSP);
            rest = &rest[3..];
        } else {
            out.push(c);
            if c == '@' {
                out.push(ZWSP);
            }
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

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
    out.push_str(&crate::tools::matrix::render(results));

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_in_agent_text_stay_text() {
        for hostile in [
            "see https://evil.example/login now",
            "HTTP://EVIL.EXAMPLE",
            "visit www.evil.example or WWW.evil.example",
            "mail admin@evil.example",
        ] {
            let e = escape(hostile, 200);
            assert!(!e.contains("://"), "{e}");
            assert!(!e.to_ascii_lowercase().contains("www."), "{e}");
            assert!(!e.contains("@e"), "{e}");
            // Still readable: only zero-width spaces were added.
            assert_eq!(e.replace('\u{200B}', ""), hostile, "{e}");
        }
    }

    #[test]
    fn agent_text_cannot_become_markup() {
        let e = escape("![x](http://evil/p.png) <img src=x> | a\nb `c`", 200);
        // Brackets and the bang escaped: no link or image can start.
        assert!(e.starts_with("\\!\\[x\\](http"), "{e}");
        assert!(!e.replace("\\]", "").contains(']'), "{e}");
        assert!(!e.contains('<'), "{e}");
        assert!(!e.contains('\n'), "{e}");
        assert!(e.contains("\\|"), "{e}");
        assert!(e.contains("\\`c\\`"), "{e}");
    }
}
