//! What differs from run to run, replaced at the source by stable placeholders (the snapshot
//! file format's redactions; docs/snapshots.md):
//!
//! | value | placeholder |
//! |---|---|
//! | the ids the fake served (VM id, container id, instance id) | `<vm-id>`, `<container-id>`, `<instance-id>` |
//! | any other uuid (one the agent generated) | `<uuid>` |
//! | a timestamp (`2026-12-01T12:00:00.123Z`, `2026-12-01 12:00:00`, …) | `<timestamp>` |
//! | a duration (`0.25s`, `120 ms`, `3 seconds`; cloud-init 26.1's `"duration":0.0123` in KVP events) | `<duration>` |
//! | an epoch time in seconds (10 digits) | `<epoch>` |
//! | the port of `127.0.0.1:PORT` | `127.0.0.1:<port>` |
//! | the case folder's path | `<case>` |
//! | a version after `NAME/` in the `agent` field and in `User-Agent` | `NAME/<version>` |
//! | what a profile's `[snapshot] redact` names | `<redacted>` |

use globset::GlobMatcher;

/// A profile's own redaction (`[snapshot] redact`).
#[derive(Debug, Clone)]
pub enum Redaction {
    /// Every value of this field (encoded report field, JSON key, header, XML element).
    Field(String),
    /// Every whole value matching this glob.
    Pattern(GlobMatcher),
}

impl PartialEq for Redaction {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Redaction::Field(a), Redaction::Field(b)) => a == b,
            (Redaction::Pattern(a), Redaction::Pattern(b)) => a.glob() == b.glob(),
            _ => false,
        }
    }
}

/// The redactions of one transcript: the run's own values and the profile's.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// (value, placeholder), longest value first: the served ids, the case folder.
    known: Vec<(String, &'static str)>,
    profile: Vec<Redaction>,
}

impl Redactor {
    pub fn new(profile: &[Redaction]) -> Redactor {
        Redactor {
            known: Vec::new(),
            profile: profile.to_vec(),
        }
    }

    /// Replaces `value` wherever it occurs (case-insensitively for uuids) by `placeholder`.
    pub fn known(mut self, value: &str, placeholder: &'static str) -> Redactor {
        if !value.is_empty() {
            self.known.push((value.to_owned(), placeholder));
            self.known.sort_by_key(|k| std::cmp::Reverse(k.0.len()));
        }
        self
    }

    /// A value of field `field` (`None`: free text), redacted.
    pub fn field(&self, field: Option<&str>, value: &str) -> String {
        if let Some(name) = field {
            let named = self.profile.iter().any(|r| match r {
                Redaction::Field(f) => f.eq_ignore_ascii_case(name),
                Redaction::Pattern(_) => false,
            });
            if named {
                return "<redacted>".into();
            }
        }
        if self.profile.iter().any(|r| match r {
            Redaction::Pattern(g) => g.is_match(value),
            Redaction::Field(_) => false,
        }) {
            return "<redacted>".into();
        }
        let mut text = value.to_owned();
        for (known, placeholder) in &self.known {
            text = replace_ignore_ascii_case(&text, known, placeholder);
        }
        text = case_paths(&text);
        text = ports(&text);
        text = uuids(&text);
        text = timestamps(&text);
        // Durations and epoch seconds only in free text (log-like KVP events, messages): in a
        // report's fields a `5s` or a 10-digit number is the agent's meaning.
        if field.is_none() {
            text = json_durations(&text);
            text = durations(&text);
            text = epochs(&text);
        }
        if field.is_some_and(|f| VERSIONED_FIELDS.iter().any(|v| f.eq_ignore_ascii_case(v))) {
            text = versions(&text);
        }
        // One value, one line: control characters (a CR or LF the agent sent) escaped.
        crate::tools::text::visible(&text)
    }

    /// Free text, redacted.
    pub fn text(&self, value: &str) -> String {
        self.field(None, value)
    }
}

/// The fields that name the agent with its version: the version is redacted.
const VERSIONED_FIELDS: [&str; 4] = [
    "agent",
    "user-agent",
    "x-ms-guest-agent-name",
    "x-ms-agent-name",
];

fn replace_ignore_ascii_case(text: &str, needle: &str, with: &str) -> String {
    if needle.is_empty() {
        return text.to_owned();
    }
    let lower = text.to_ascii_lowercase();
    let needle_lower = needle.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for (at, _) in lower.match_indices(&needle_lower) {
        if at < last {
            continue;
        }
        out.push_str(&text[last..at]);
        out.push_str(with);
        last = at + needle.len();
    }
    out.push_str(&text[last..]);
    out
}

/// A case folder's absolute path (`/tmp/wirecheck-cases/run-XXXXXX/wirecheck-case-XXXXXX`)
/// → `<case>`, wherever the agent echoes it (a path in an error message); so is the folder as
/// a sandbox agent sees it ([`crate::runner::attach::sandbox::AGENT_CASE_DIR`]).
fn case_paths(text: &str) -> String {
    const MARK: &str = "wirecheck-case-";
    let inside = format!("{}/", crate::runner::attach::sandbox::AGENT_CASE_DIR);
    let text = text.replace(&inside, "<case>/");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(MARK) {
        // Back to the start of the path: the `/`-led run of characters before the mark.
        let before = &rest[..at];
        let start = before
            .rfind(|c: char| c.is_whitespace() || "\"'[(=,;<>|".contains(c))
            .map_or(0, |i| i + 1);
        let after = &rest[at + MARK.len()..];
        let n = after
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count();
        if before[start..].starts_with('/') {
            out.push_str(&before[..start]);
            out.push_str("<case>");
        } else {
            out.push_str(before);
            out.push_str(&rest[at..at + MARK.len() + n]);
        }
        rest = &after[n..];
    }
    out.push_str(rest);
    out
}

/// `127.0.0.1:PORT` → `127.0.0.1:<port>`: the loopback port, which is new every run.
pub fn ports(text: &str) -> String {
    const HOST: &str = "127.0.0.1:";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(HOST) {
        let (before, after) = rest.split_at(at + HOST.len());
        out.push_str(before);
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("<port>");
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// Rewrites every match of `matcher` (which returns the match's byte length at a position, or
/// 0) that starts at a boundary (not inside a word).
fn rewrite(text: &str, placeholder: &str, matcher: impl Fn(&[u8]) -> usize) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let at_boundary = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        let n = if at_boundary { matcher(&bytes[i..]) } else { 0 };
        let ends_at_boundary = n > 0 && bytes.get(i + n).is_none_or(|b| !b.is_ascii_alphanumeric());
        if ends_at_boundary {
            out.push_str(&text[copied..i]);
            out.push_str(placeholder);
            i += n;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

fn digits(b: &[u8], n: usize) -> bool {
    b.len() >= n && b[..n].iter().all(u8::is_ascii_digit)
}

fn uuids(text: &str) -> String {
    rewrite(text, "<uuid>", |b| {
        const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
        let mut i = 0;
        for (g, len) in GROUPS.iter().enumerate() {
            if b.len() < i + len || !b[i..i + len].iter().all(u8::is_ascii_hexdigit) {
                return 0;
            }
            i += len;
            if g < 4 {
                if b.get(i) != Some(&b'-') {
                    return 0;
                }
                i += 1;
            }
        }
        i
    })
}

/// `YYYY-MM-DD[T ]HH:MM[:SS[.fff]][Z|±HH[:MM]]`, or a date alone is left alone.
fn timestamps(text: &str) -> String {
    rewrite(text, "<timestamp>", |b| {
        if !(digits(b, 4)
            && b.get(4) == Some(&b'-')
            && digits(&b[5..], 2)
            && b.get(7) == Some(&b'-')
            && digits(&b[8..], 2))
        {
            return 0;
        }
        let mut i = 10;
        if !matches!(b.get(i), Some(b'T' | b' '))
            || !digits(&b[i + 1..], 2)
            || b.get(i + 3) != Some(&b':')
            || !digits(&b[i + 4..], 2)
        {
            return 0;
        }
        i += 6;
        if b.get(i) == Some(&b':') && digits(&b[i + 1..], 2) {
            i += 3;
            if matches!(b.get(i), Some(b'.' | b',')) && b.get(i + 1).is_some_and(u8::is_ascii_digit)
            {
                i += 1;
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
        }
        match b.get(i) {
            Some(b'Z') => i += 1,
            Some(b'+' | b'-') if digits(&b[i + 1..], 2) => {
                i += 3;
                if b.get(i) == Some(&b':') && digits(&b[i + 1..], 2) {
                    i += 3;
                } else if digits(&b[i..], 2) {
                    i += 2;
                }
            }
            _ => {}
        }
        i
    })
}

/// A number with a time unit: `0.25s`, `120 ms`, `3 seconds`.
fn durations(text: &str) -> String {
    rewrite(text, "<duration>", |b| {
        let mut i = 0;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == 0 {
            return 0;
        }
        if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
        }
        if b.get(i) == Some(&b' ') {
            i += 1;
        }
        for unit in ["seconds", "second", "secs", "sec", "ms", "s"] {
            if b[i..].starts_with(unit.as_bytes()) {
                return i + unit.len();
            }
        }
        0
    })
}

/// The number after `"duration":`: seconds without a unit, as cloud-init 26.1+ puts them on its
/// KVP finish events (reporting/handlers.py:417-418).
fn json_durations(text: &str) -> String {
    const KEY: &str = "\"duration\":";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        let after = &rest[at + KEY.len()..];
        let n = after
            .bytes()
            .take_while(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'e' | b'E' | b'+'))
            .count();
        out.push_str(&rest[..at + KEY.len()]);
        if after.as_bytes().first().is_some_and(u8::is_ascii_digit) {
            out.push_str("<duration>");
            rest = &after[n..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Ten digits starting with 1 (epoch seconds of 2001–2033).
fn epochs(text: &str) -> String {
    rewrite(text, "<epoch>", |b| {
        if digits(b, 10) && b[0] == b'1' && !b.get(10).is_some_and(u8::is_ascii_digit) {
            10
        } else {
            0
        }
    })
}

/// `NAME/1.2.3` → `NAME/<version>`, and a lone `v1.2.3` or `1.2.3` → `<version>`.
fn versions(text: &str) -> String {
    let text = slash_versions(text);
    rewrite(&text, "<version>", |b| {
        let start = usize::from(b.first() == Some(&b'v'));
        let n = b[start..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || **c == b'.')
            .count();
        let token = &b[start..start + n];
        if n > 0 && token[0].is_ascii_digit() && token.contains(&b'.') {
            start + n
        } else {
            0
        }
    })
}

fn slash_versions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('/') {
        out.push_str(&rest[..=at]);
        let after = &rest[at + 1..];
        let n = after
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || b"._+~-".contains(b))
            .count();
        if n > 0 && after.as_bytes()[0].is_ascii_digit() {
            out.push_str("<version>");
            rest = &after[n..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_to_run_values_get_placeholders() {
        let r = Redactor::new(&[]).known("1B2A3C4D-0000-4000-8000-00000000000A", "<vm-id>");
        assert_eq!(
            r.text(
                "vm_id=1b2a3c4d-0000-4000-8000-00000000000a|x=0a1b2c3d-1111-4222-8333-444455556666"
            ),
            "vm_id=<vm-id>|x=<uuid>"
        );
        assert_eq!(
            r.text("timestamp=2026-12-01T12:34:56.789012+00:00|t=2026-12-01 12:34:56Z done"),
            "timestamp=<timestamp>|t=<timestamp> done"
        );
        assert_eq!(
            r.text("took 0.25s, then 120 ms"),
            "took <duration>, then <duration>"
        );
        assert_eq!(r.text("CLOUD_INIT|1733054400|x"), "CLOUD_INIT|<epoch>|x");
        assert_eq!(
            r.text(r#"{"result":"SUCCESS","duration":0.022406773001421243,"msg":"m"}"#),
            r#"{"result":"SUCCESS","duration":<duration>,"msg":"m"}"#
        );
        assert_eq!(r.text(r#"{"duration":"long"}"#), r#"{"duration":"long"}"#);
        assert_eq!(
            r.text(
                "parsed [/tmp/wirecheck-cases-0/run-05YOIw/wirecheck-case-XBu9MP/wala/o.xml]: x"
            ),
            "parsed [<case>/wala/o.xml]: x"
        );
        assert_eq!(
            r.text("parsed [/run/wirecheck-case/wala/lib/ovf-env.xml]: x"),
            "parsed [<case>/wala/lib/ovf-env.xml]: x"
        );
        assert_eq!(
            r.text("http://127.0.0.1:41234/x"),
            "http://127.0.0.1:<port>/x"
        );
        assert_eq!(
            r.field(Some("agent"), "Cloud-Init/25.1.4"),
            "Cloud-Init/<version>"
        );
        assert_eq!(
            r.field(Some("x-ms-guest-agent-name"), "provision-report v0.1.0"),
            "provision-report <version>"
        );
        assert_eq!(
            r.field(Some("x-ms-agent-name"), "WALinuxAgent"),
            "WALinuxAgent"
        );
        // In a field they are the agent's meaning, and stay.
        assert_eq!(
            r.field(Some("reason"), "retry after 5s at 1733054400"),
            "retry after 5s at 1733054400"
        );
        // Not inside words, not a date alone, not other numbers.
        assert_eq!(
            r.text("v2s 2026-12-01 12345 abcs"),
            "v2s 2026-12-01 12345 abcs"
        );
    }

    #[test]
    fn a_profile_redacts_fields_and_patterns() {
        let glob = globset::Glob::new("build-*").unwrap().compile_matcher();
        let r = Redactor::new(&[Redaction::Field("host".into()), Redaction::Pattern(glob)]);
        assert_eq!(r.field(Some("Host"), "anything"), "<redacted>");
        assert_eq!(r.field(Some("x"), "build-1234"), "<redacted>");
        assert_eq!(r.field(Some("x"), "release"), "release");
    }
}
