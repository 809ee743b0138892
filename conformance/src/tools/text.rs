//! Showing hostile text on a terminal.

/// Control characters as escapes (`\n`, `\t`, `\r`, `\0`, `\u{1b}`), so a
/// value cannot break the layout or drive the terminal. Everything else as is;
/// the `--json` forms are exact.
pub(crate) fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn controls_are_escaped_unicode_kept() {
        assert_eq!(
            super::visible("a\nb\t\0\u{1b}[31mé"),
            "a\\nb\\t\\0\\u{1b}[31mé"
        );
    }
}
