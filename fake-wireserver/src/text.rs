//! Showing hostile text (an agent's request, a report reason, a value from someone else's
//! scenario or profile) on a terminal: one place, used by both binaries.
//!
//! Every control character is escaped — C0 (with `\n`, `\r`, `\t`, `\0` spelled so), DEL and
//! C1 (`\u{1b}`, `\u{9b}`, ...) — so a value can neither drive the terminal (ESC and CSI
//! sequences) nor break the layout, and so are the bidirectional overrides and isolates, which
//! reorder what is shown. Other Unicode is kept. Serialized outputs (JSON, JUnit XML, HTML) do
//! not use this: their serializers escape, and they keep the exact text.

/// `text` on one line, controls escaped (`\n` included).
pub fn visible(text: &str) -> String {
    escape(text, false)
}

/// Like [`visible`], but line breaks stay: for multi-line messages (errors with a source
/// excerpt). A lone `\r` is still escaped, so no line can be overwritten.
pub fn visible_lines(text: &str) -> String {
    escape(text, true)
}

/// At most `max` characters of `text`, with how long it was when cut (for error messages that
/// quote a user value: a 200,000-character glob is not echoed whole).
pub fn clip(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head}… ({count} characters)")
}

fn escape(text: &str, keep_newlines: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c if c.is_control() || reorders(c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// Bidirectional embeddings, overrides, isolates and marks (Unicode UAX #9).
fn reorders(c: char) -> bool {
    matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_unicode_kept() {
        assert_eq!(visible("a\nb\t\0\u{1b}[31mé"), "a\\nb\\t\\0\\u{1b}[31mé");
        // C1 CSI, DEL, a right-to-left override.
        assert_eq!(
            visible("\u{9b}2J\u{7f}\u{202e}x"),
            "\\u{9b}2J\\u{7f}\\u{202e}x"
        );
        assert_eq!(
            visible_lines("a\nb\rc\u{1b}]0;t\u{7}"),
            "a\nb\\rc\\u{1b}]0;t\\u{7}"
        );
    }

    #[test]
    fn clip_keeps_short_text_and_says_how_long_cut_text_was() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "abc… (4 characters)");
    }
}
