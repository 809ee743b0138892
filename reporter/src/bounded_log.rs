//! How much of a hostile or broken server reaches the log (docs/provision-report.md, "Logs").
//!
//! * Every server-controlled text (a body, a header, a `Location`, an id, a parser message
//!   that quotes the document) reaches stderr only as an [`Excerpt`]: control characters, Unicode
//!   bidirectional controls and line separators are escaped, so server text can neither end a
//!   log line, forge another nor drive the terminal; and it is clipped to a byte limit, with a
//!   marker saying how many bytes were left out.
//! * Per budget, the failures that are logged (counted over the budget's failures) and the
//!   answers whose headers are logged at debug (counted over its attempts) are
//!   [sampled](is_sampled): the first [`LOGGED_IN_FULL`], then the powers of two. A run of any
//!   length writes a number of lines logarithmic in its attempts; the final message still
//!   gives the attempt count and the last failure.
//!
//! Bound: no log line is longer than 2 KiB, and a budget of `n` attempts logs at most
//! `10 + log2(n) - 3` failures (and, at debug, as many header lines).

use std::fmt::{self, Write as _};

/// An error body in an error message.
pub const BODY_MAX: usize = 200;
/// A header name (hyper allows only token characters, not their number).
pub const HEADER_NAME_MAX: usize = 64;
/// A header value.
pub const HEADER_VALUE_MAX: usize = 200;
/// All the response headers of one answer, on one debug line.
pub const HEADERS_MAX: usize = 1024;
/// An id the server gave (goal-state ids, a redirect's `Location`, a list of versions).
pub const ID_MAX: usize = 200;
/// Why an attempt failed, as the retry line and the final message show it.
pub const REASON_MAX: usize = 512;

/// Server-controlled text, escaped and clipped for a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt(String);

impl Excerpt {
    /// `text` with control characters escaped, cut to at most `max_bytes` bytes of escaped text
    /// (on a character boundary), plus `… [N more bytes]` when anything was cut.
    pub fn new(text: &str, max_bytes: usize) -> Excerpt {
        Excerpt::of_bytes(text.as_bytes(), max_bytes)
    }

    /// As [`Excerpt::new`], for bytes that may not be UTF-8: an invalid byte shows as `\xHH`.
    /// Leading and trailing ASCII whitespace is dropped first (bodies often end in a newline).
    pub fn of_bytes(bytes: &[u8], max_bytes: usize) -> Excerpt {
        let bytes = bytes.trim_ascii();
        let mut shown = String::new();
        let mut consumed = 0;
        for chunk in bytes.utf8_chunks() {
            let pieces = chunk
                .valid()
                .chars()
                .map(|c| (escape_char(c), c.len_utf8()))
                .chain(chunk.invalid().iter().map(|b| (Escaped::Byte(*b), 1)));
            for (escaped, original_len) in pieces {
                let before = shown.len();
                escaped.push_to(&mut shown);
                if shown.len() > max_bytes {
                    shown.truncate(before);
                    let cut = bytes.len() - consumed;
                    write!(shown, "… [{cut} more bytes]").expect("writing to a String");
                    return Excerpt(shown);
                }
                consumed += original_len;
            }
        }
        Excerpt(shown)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Excerpt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One character or byte of server text, as the log shows it.
enum Escaped {
    Plain(char),
    Named(&'static str),
    Unicode(char),
    Byte(u8),
}

impl Escaped {
    fn push_to(&self, out: &mut String) {
        match self {
            Escaped::Plain(c) => out.push(*c),
            Escaped::Named(name) => out.push_str(name),
            Escaped::Unicode(c) => write!(out, "\\u{{{:x}}}", u32::from(*c)).expect("String"),
            Escaped::Byte(b) => write!(out, "\\x{b:02x}").expect("String"),
        }
    }
}

fn escape_char(c: char) -> Escaped {
    match c {
        '\n' => Escaped::Named("\\n"),
        '\r' => Escaped::Named("\\r"),
        '\t' => Escaped::Named("\\t"),
        // C0, DEL, C1; bidirectional controls (they reorder what a terminal shows); the
        // Unicode line and paragraph separators (some viewers break lines at them).
        c if c.is_control()
            || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}') =>
        {
            Escaped::Unicode(c)
        }
        c => Escaped::Plain(c),
    }
}

/// Attempts whose failure is always logged, per budget.
pub const LOGGED_IN_FULL: u32 = 10;

/// Whether attempt `attempt` (1-based, per budget) is logged: the first [`LOGGED_IN_FULL`], then
/// 16, 32, 64, … At most `10 + log2(attempts) - 3` lines for any number of attempts.
pub fn is_sampled(attempt: u32) -> bool {
    attempt <= LOGGED_IN_FULL || attempt.is_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_clean_text_is_unchanged() {
        assert_eq!(
            Excerpt::new("HTTP 503 from IIS/10.0", 200).as_str(),
            "HTTP 503 from IIS/10.0"
        );
        assert_eq!(Excerpt::new("", 200).as_str(), "");
        assert_eq!(Excerpt::new("é€😀", 200).as_str(), "é€😀");
    }

    #[test]
    fn control_and_bidi_characters_are_escaped() {
        assert_eq!(
            Excerpt::new("a\nb\rc\td\u{1b}[2J\u{7f}\u{9b}\u{202e}\u{2028}", 200).as_str(),
            "a\\nb\\rc\\td\\u{1b}[2J\\u{7f}\\u{9b}\\u{202e}\\u{2028}"
        );
    }

    #[test]
    fn invalid_utf8_bytes_are_shown_as_hex() {
        assert_eq!(
            Excerpt::of_bytes(b"ok\xff\xc3(", 200).as_str(),
            "ok\\xff\\xc3("
        );
    }

    #[test]
    fn long_text_is_clipped_saying_how_much_was_cut() {
        let excerpt = Excerpt::new(&"x".repeat(1000), 200);
        assert_eq!(
            excerpt.as_str(),
            format!("{}… [800 more bytes]", "x".repeat(200))
        );
    }

    #[test]
    fn the_limit_counts_escaped_bytes_and_never_splits_a_character() {
        // Each NUL escapes to five bytes: 40 fit in 200, the other 60 are cut.
        let excerpt = Excerpt::new(&"\0".repeat(100), 200);
        assert_eq!(
            excerpt.as_str(),
            format!("{}… [60 more bytes]", "\\u{0}".repeat(40))
        );
        // 100 two-byte characters fit in 201 bytes; the 101st would not.
        let excerpt = Excerpt::new(&"é".repeat(150), 201);
        assert_eq!(
            excerpt.as_str(),
            format!("{}… [100 more bytes]", "é".repeat(100))
        );
    }

    #[test]
    fn surrounding_whitespace_is_dropped() {
        assert_eq!(
            Excerpt::of_bytes(b"\r\n  <Error/>\n", 200).as_str(),
            "<Error/>"
        );
    }

    #[test]
    fn sampling_logs_the_first_ten_then_powers_of_two() {
        let logged: Vec<u32> = (1..=300).filter(|&n| is_sampled(n)).collect();
        assert_eq!(
            logged,
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 16, 32, 64, 128, 256]
        );
    }
}
