//! Showing someone else's text (agents', profiles', scenarios'): escaped
//! ([`fake_wireserver::text`]: control characters made visible) and, for a terminal, clipped
//! ([`shown`], [`shown_lines`]): a reason that quotes a 1 MB report is a few hundred
//! characters there, saying how much was left out; results.json and report.html keep it whole.

pub use fake_wireserver::text::{clip, visible, visible_lines};

/// Most characters of one piece of someone else's text (a reason, a name, an id, one line of
/// an excerpt) shown on the terminal.
pub const MAX_SHOWN_CHARS: usize = 400;
/// Most lines of a multi-line excerpt (a snapshot diff) shown on the terminal.
pub const MAX_SHOWN_LINES: usize = 200;

/// `text` for one line of the terminal: control characters escaped ([`visible`], line breaks
/// included) and at most [`MAX_SHOWN_CHARS`] of its characters, saying how many were cut.
pub fn shown(text: &str) -> String {
    shown_at_most(text, MAX_SHOWN_CHARS)
}

/// [`shown`] with another bound.
pub fn shown_at_most(text: &str, max_chars: usize) -> String {
    let Some((cut_at, _)) = text.char_indices().nth(max_chars) else {
        return visible(text);
    };
    let left_out = text[cut_at..].chars().count();
    format!(
        "{}… [{left_out} more characters not shown; results.json has the whole text]",
        visible(&text[..cut_at])
    )
}

/// A multi-line excerpt for the terminal: each line [`shown_at_most`] `line_chars`, at most
/// `max_lines` lines, saying how many were left out.
pub fn shown_lines(text: &str, line_chars: usize, max_lines: usize) -> String {
    let mut out: Vec<String> = text
        .lines()
        .take(max_lines)
        .map(|line| shown_at_most(line, line_chars))
        .collect();
    let lines = text.lines().count();
    if lines > max_lines {
        out.push(format!("… [{} more line(s) not shown]", lines - max_lines));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_counts_characters_and_escapes_what_it_keeps() {
        assert_eq!(shown_at_most("é\u{1b}[2J", 10), "é\\u{1b}[2J");
        assert_eq!(
            shown_at_most("ééé\u{1b}x", 3),
            "ééé… [2 more characters not shown; results.json has the whole text]"
        );
        assert_eq!(
            shown_lines("a\nbbbb\nc\nd", 2, 3),
            "a\nbb… [2 more characters not shown; results.json has the whole text]\nc\n… [1 more line(s) not shown]"
        );
    }
}
