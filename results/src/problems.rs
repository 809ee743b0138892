//! Problems grouped by cause: the failures and non-strict verdicts of a run, put together when
//! they are the same check saying the same thing. "The same thing" is the reason's *shape*: the
//! reason with its numbers, paths, quoted values and the agent's own name replaced by
//! placeholders, so that "status 415 on attempt 3" and "status 415 on attempt 7" are one cause
//! and "status 415" and "no request" are two. Shared by report.html and the terminal summary.
//!
//! One cause is above the checks: an agent that exited with an error before any request
//! reached the fake (a bad argument, a missing file) fails every check of its scenario, each in
//! its own words. Those cases are grouped by that root cause ([`root_cause`]: the exit status
//! and the start of the agent's stderr), whatever the check, and such groups come first.
//!
//! Pure: a function of the [`RunResults`] only; groups are ordered most frequent first, ties in
//! order of first appearance, so the output is deterministic.

use std::collections::HashMap;

use crate::model::{CaseResult, RunResults, Verdict};

/// The verdicts the problems list is made of.
pub const PROBLEM_VERDICTS: [Verdict; 2] = [Verdict::Fail, Verdict::NonStrict];

/// One cause: a check, a verdict and a reason shape, with every case that has it.
#[derive(Debug, Clone)]
pub struct Problem<'a> {
    pub verdict: Verdict,
    /// The check part of the case ids (`protocol.headers`): the last two dot-separated parts,
    /// as every check id has them (`catalog::CheckId`, `catalog::SNAPSHOT_CHECK`); for a root
    /// cause, [`EVERY_CHECK`].
    pub check: &'a str,
    /// The root cause its cases share, as its first case has it ([`root_cause`]).
    pub root_cause: Option<String>,
    /// The reason with its variable parts as placeholders (`#` a number, `PATH`, `"…"` a
    /// quoted value, `AGENT` the agent's name).
    pub shape: String,
    /// In run order (agent, then case).
    pub cases: Vec<ProblemCase<'a>>,
}

/// A case in a problem group, with its position in the results (for links).
#[derive(Debug, Clone, Copy)]
pub struct ProblemCase<'a> {
    pub agent_index: usize,
    pub case_index: usize,
    pub agent: &'a str,
    pub case: &'a CaseResult,
}

impl Problem<'_> {
    /// The root cause, else the reason of the group's first case: a real example of the shape.
    pub fn example(&self) -> &str {
        if let Some(cause) = &self.root_cause {
            return cause;
        }
        self.cases
            .first()
            .and_then(|c| c.case.reason.as_deref())
            .unwrap_or("")
    }

    /// How many distinct agents have this problem.
    pub fn agent_count(&self) -> usize {
        let mut agents: Vec<usize> = self.cases.iter().map(|c| c.agent_index).collect();
        agents.dedup();
        agents.sort_unstable();
        agents.dedup();
        agents.len()
    }
}

/// The check id of a case id: its last two dot-separated parts (`a.b.protocol.headers` →
/// `protocol.headers`); the whole id when it has fewer.
pub fn check_of(case_id: &str) -> &str {
    crate::case_id::split_case_id(case_id).1
}

/// What a root-cause group names instead of a check.
pub const EVERY_CHECK: &str = "every check";

/// The cause every check of a case's scenario shares, when there is one: the agent exited with
/// an error before any request reached the fake. The exit status and the first lines of its
/// stderr (clipped) say why; that is what a user fixes, not the checks it failed.
pub fn root_cause(case: &CaseResult) -> Option<String> {
    root_cause_of(case).map(|c| c.text)
}

/// A root cause, and what groups it: the exit status and the first line of stderr up to its
/// first quoted value (`error: unexpected argument '--x' found` and `... 'y' found` are one
/// cause, whatever the value, even one holding an apostrophe).
struct RootCause {
    text: String,
    key: String,
}

fn root_cause_of(case: &CaseResult) -> Option<RootCause> {
    if !case.timeline.events.is_empty() {
        return None;
    }
    let (run, code) = case
        .timeline
        .runs
        .iter()
        .find_map(|r| r.exit_code.filter(|c| *c != 0).map(|c| (r, c)))?;
    let first_lines: Vec<&str> = run
        .stderr_tail
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(ROOT_CAUSE_LINES)
        .collect();
    let stderr = if first_lines.is_empty() {
        "; it wrote nothing to stderr".to_owned()
    } else {
        format!(
            "; its stderr: {}",
            crate::text::clip(&first_lines.join(" / "), ROOT_CAUSE_CHARS)
        )
    };
    let first = first_lines.first().copied().unwrap_or("");
    Some(RootCause {
        text: format!("the agent exited {code} before any request reached the fake{stderr}"),
        key: format!("{code} {}", before_first_quote(first)),
    })
}

/// `line` up to its first opening quote (a quote after a letter is an apostrophe).
fn before_first_quote(line: &str) -> &str {
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        if matches!(c, '"' | '`') || (c == '\'' && !previous.is_alphanumeric()) {
            return &line[..at];
        }
        previous = c;
    }
    line
}

/// Lines of the agent's stderr, and characters of them, a root cause quotes.
const ROOT_CAUSE_LINES: usize = 2;
const ROOT_CAUSE_CHARS: usize = 240;

/// Groups the cases whose verdict is in `verdicts` by (verdict, check, reason shape), or by
/// their [`root_cause`]; root causes first, then most frequent first (ties: first seen first).
pub fn group<'a>(results: &'a RunResults, verdicts: &[Verdict]) -> Vec<Problem<'a>> {
    let mut groups: Vec<Problem<'a>> = Vec::new();
    let mut index: HashMap<(Verdict, &'a str, String), usize> = HashMap::new();
    for (agent_index, agent) in results.agents.iter().enumerate() {
        for (case_index, case) in agent.cases.iter().enumerate() {
            if !verdicts.contains(&case.verdict) {
                continue;
            }
            let cause = root_cause_of(case);
            let (check, reason) = match &cause {
                Some(cause) => (EVERY_CHECK, cause.key.as_str()),
                None => (check_of(&case.id), case.reason.as_deref().unwrap_or("")),
            };
            let key = (case.verdict, check, shape(reason, &agent.agent));
            let slot = *index.entry(key.clone()).or_insert_with(|| {
                groups.push(Problem {
                    verdict: key.0,
                    check,
                    root_cause: cause.map(|c| c.text),
                    shape: key.2,
                    cases: Vec::new(),
                });
                groups.len() - 1
            });
            groups[slot].cases.push(ProblemCase {
                agent_index,
                case_index,
                agent: &agent.agent,
                case,
            });
        }
    }
    // Stable: root causes first; equal counts keep first-seen order; fail before non-strict at
    // equal counts.
    groups.sort_by(|a, b| {
        b.root_cause
            .is_some()
            .cmp(&a.root_cause.is_some())
            .then_with(|| b.cases.len().cmp(&a.cases.len()))
            .then_with(|| rank(a.verdict).cmp(&rank(b.verdict)))
    });
    groups
}

fn rank(verdict: Verdict) -> usize {
    PROBLEM_VERDICTS
        .iter()
        .position(|v| *v == verdict)
        .unwrap_or(PROBLEM_VERDICTS.len())
}

/// The reason's shape: the agent's name → `AGENT`; a quoted value (`"…"`, `'…'`, `` `…` ``) →
/// `"…"`, unless it names the cause (a media type, a short name such as a state or a header);
/// an HTTP status after `status`/`answered`/`HTTP`/`code` is kept; a word holding a `/` (a path, a URL, a content type stays: see below) → `PATH`; a run
/// of digits (with `.`, `:`, `-` or hex letters inside, as in times, versions, ids) → `#`.
/// A media type such as `application/json` is kept: a wrong Content-Type is a cause, not a
/// detail. Bounded: the shape of a reason longer than [`SHAPE_CHARS`] characters is its
/// shaped start.
pub fn shape(reason: &str, agent: &str) -> String {
    let reason: String = reason.chars().take(SHAPE_CHARS).collect();
    let reason = replace_name(&reason, agent);
    let mut out = String::with_capacity(reason.len());
    let chars: Vec<char> = reason.chars().collect();
    let mut i = 0;
    let mut last_word = String::new();
    while i < chars.len() {
        let c = chars[i];
        // Quoted values: up to the matching quote on the same line.
        let opens =
            matches!(c, '"' | '`') || (c == '\'' && (i == 0 || !chars[i - 1].is_alphanumeric()));
        if opens
            && let Some(len) = chars[i + 1..]
                .iter()
                .take_while(|x| **x != '\n')
                .position(|x| *x == c)
        {
            let inside: String = chars[i + 1..i + 1 + len].iter().collect();
            if is_cause_value(&inside) {
                // A media type or a name (a state, a header): which one is the cause.
                out.push(c);
                out.push_str(&inside);
                out.push(c);
            } else {
                out.push_str("\"…\"");
            }
            i += len + 2;
            last_word.clear();
            continue;
        }
        if c.is_whitespace() || is_punct(c) {
            out.push(c);
            i += 1;
            continue;
        }
        // A word: up to whitespace or sentence punctuation.
        let start = i;
        while i < chars.len() && !chars[i].is_whitespace() && !is_punct(chars[i]) {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        // An HTTP status after the word that says so is the cause (415 and 500 differ).
        if is_status_word(&last_word) && is_status_code(&word) {
            out.push_str(&word);
        } else {
            out.push_str(&shape_word(&word));
        }
        last_word = word;
    }
    out
}

/// A quoted value that names the cause rather than a detail: a media type (with its
/// parameters) or a short name made of letters (`Ready`, `NotReady`, `x-ms-version`).
fn is_cause_value(inside: &str) -> bool {
    let first = inside.split(';').next().unwrap_or("").trim();
    if is_media_type(first) {
        return inside.len() <= 80;
    }
    !inside.is_empty()
        && inside.len() <= 32
        && inside
            .chars()
            .all(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '_'))
}

fn is_status_word(word: &str) -> bool {
    matches!(
        word.to_ascii_lowercase().trim_end_matches([':', '.']),
        "status" | "answered" | "http" | "code"
    )
}

/// `100` to `599`, and nothing else (`503` but not `503ms` or `5030`).
fn is_status_code(word: &str) -> bool {
    let digits = word.trim_end_matches(['.', ':']);
    digits.len() == 3
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (b'1'..=b'5').contains(&digits.as_bytes()[0])
}

/// `text` with each whole-word occurrence of `name` (not inside a longer name) as `AGENT`.
fn replace_name(text: &str, name: &str) -> String {
    if name.is_empty() {
        return text.to_string();
    }
    let part_of_name = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (at, _) in text.match_indices(name) {
        let end = at + name.len();
        let before = text[..at].chars().next_back();
        // A trailing `.` ends a sentence, not a name.
        let after = text[end..].chars().next().filter(|c| *c != '.');
        if at < last || before.is_some_and(part_of_name) || after.is_some_and(part_of_name) {
            continue;
        }
        out.push_str(&text[last..at]);
        out.push_str("AGENT");
        last = end;
    }
    out.push_str(&text[last..]);
    out
}

/// At most this many characters of a reason decide its shape.
pub const SHAPE_CHARS: usize = 400;

fn is_punct(c: char) -> bool {
    matches!(
        c,
        ',' | ';' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '='
    )
}

fn shape_word(word: &str) -> String {
    let trimmed = word.trim_end_matches(['.', ':']);
    let rest = &word[trimmed.len()..];
    if trimmed.contains('/') && !is_media_type(trimmed) {
        return format!("PATH{rest}");
    }
    // An id (a GUID, a hash): long, hexadecimal, with a digit somewhere.
    if trimmed.len() >= 8
        && trimmed.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        && trimmed.chars().any(|c| c.is_ascii_digit())
    {
        return format!("#{rest}");
    }
    // Digits with their separators (1.006, 12:04:05, 2025-01-02, 0x1f, v2, 503s) → #.
    let mut out = String::new();
    let mut in_number = false;
    let mut chars = trimmed.chars().peekable();
    while let Some(c) = chars.next() {
        let continues_number = in_number
            && (c.is_ascii_hexdigit()
                || (matches!(c, '.' | ':' | '-' | '_' | 'x')
                    && chars.peek().is_some_and(|n| n.is_ascii_hexdigit())));
        if c.is_ascii_digit() || continues_number {
            if !in_number {
                out.push('#');
                in_number = true;
            }
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out.push_str(rest);
    out
}

/// `application/json`, `text/xml; charset=utf-8`'s first word: a type, a slash, a subtype.
fn is_media_type(word: &str) -> bool {
    let Some((kind, sub)) = word.split_once('/') else {
        return false;
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.'))
    };
    matches!(
        kind.to_ascii_lowercase().as_str(),
        "application" | "text" | "multipart" | "image" | "*"
    ) && (token(sub) || sub == "*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_paths_quotes_and_the_agent_are_placeholders() {
        assert_eq!(
            shape("status 415 on attempt 3 after 1.006 s", "a"),
            shape("status 415 on attempt 7 after 12.5 s", "a")
        );
        assert_eq!(
            shape("status 415 on attempt 3", "x"),
            "status 415 on attempt #"
        );
        assert_eq!(
            shape("wrote /var/lib/hyperv/.kvp_pool_1: 'bad value 1'", "x"),
            "wrote PATH: \"…\""
        );
        assert_eq!(
            shape("agent cloud-init does not claim \"json\"", "cloud-init"),
            "agent AGENT does not claim \"json\""
        );
        assert_eq!(
            shape("agent afterburn does not claim \"kvp\"", "afterburn"),
            shape("agent cloud-init does not claim \"kvp\"", "cloud-init")
        );
        assert_eq!(
            shape("expected \"1.2.3-rc4\" got \"/tmp/x y\"", "x"),
            "expected \"…\" got \"…\""
        );
    }

    #[test]
    fn different_causes_stay_apart() {
        // A media type is the cause, not a detail.
        assert_ne!(
            shape("Content-Type text/plain, expected application/json", "x"),
            shape("Content-Type text/xml, expected application/json", "x")
        );
        assert_ne!(shape("status 415", "x"), shape("no request", "x"));
        // As the checks write them: a quoted media type, a quoted state, a status.
        assert_ne!(
            shape("Content-Type \"text/plain\"", "x"),
            shape("Content-Type \"application/json; charset=utf-16\"", "x")
        );
        assert_ne!(
            shape("state \"NotReady\", expected \"Ready\"", "x"),
            shape("state \"Ready\", expected \"NotReady\"", "x")
        );
        assert_ne!(shape("answered 415", "x"), shape("answered 500", "x"));
        assert_eq!(shape("waited 500 ms", "x"), shape("waited 900 ms", "x"));
        // Words around a number are kept.
        assert_ne!(shape("3 attempts", "x"), shape("3 requests", "x"));
    }

    #[test]
    fn ids_are_placeholders_whatever_letter_they_start_with() {
        assert_eq!(
            shape("vm id c3a9e8f0-1b2c-4d5e-8f90-123456789abc", "x"),
            shape("vm id 03a9e8f0-1b2c-4d5e-8f90-123456789abc", "x")
        );
    }

    #[test]
    fn an_apostrophe_is_not_a_quote() {
        assert_eq!(
            shape("the agent's retry didn't stop", "x"),
            "the agent's retry didn't stop"
        );
    }

    #[test]
    fn check_is_the_last_two_parts() {
        assert_eq!(
            check_of("retry.status.503.behaviour.retry"),
            "behaviour.retry"
        );
        assert_eq!(check_of("a.b"), "a.b");
        assert_eq!(check_of("single"), "single");
    }

    #[test]
    fn a_root_cause_is_an_error_exit_before_any_request() {
        use crate::model::{RunEnd, Timeline, TimelineEvent};
        let mut case = CaseResult {
            id: "s.kvp.report".into(),
            title: "t".into(),
            scenario: "s".into(),
            verdict: Verdict::Fail,
            reason: Some("no record".into()),
            evidence: Vec::new(),
            duration_ms: 0,
            timeline: Timeline {
                runs: vec![RunEnd {
                    exit: "exit status 2".into(),
                    exit_code: Some(2),
                    stderr_tail: "\nerror: bad 'x'\nusage: a\nmore\n".into(),
                    stderr_bytes: 30,
                }],
                ..Timeline::default()
            },
            artifacts: None,
            not_judged: None,
            attempts: None,
        };
        assert_eq!(
            root_cause(&case).as_deref(),
            Some(
                "the agent exited 2 before any request reached the fake; its stderr: error: bad 'x' / usage: a"
            )
        );
        case.timeline.runs[0].stderr_tail.clear();
        assert!(
            root_cause(&case)
                .unwrap()
                .ends_with("it wrote nothing to stderr")
        );
        // Exit 0, or a request that reached the fake: the checks say what went wrong.
        case.timeline.runs[0].exit_code = Some(0);
        assert_eq!(root_cause(&case), None);
        case.timeline.runs[0].exit_code = Some(1);
        case.timeline.events.push(TimelineEvent {
            at_ms: 1,
            done_ms: Some(2),
            closed_ms: None,
            endpoint: "wireserver.versions".into(),
            label: "GET /?comp=versions".into(),
            answer: "200".into(),
            fault: false,
        });
        assert_eq!(root_cause(&case), None);
        assert_eq!(before_first_quote("can't open 'x' here"), "can't open ");
        assert_eq!(before_first_quote("no quote"), "no quote");
    }

    #[test]
    fn long_reasons_are_bounded() {
        let long = "x ".repeat(10_000);
        assert!(shape(&long, "a").chars().count() <= SHAPE_CHARS);
    }
}
