//! Markdown text from someone else's words (agents' reasons, names): escaped so it renders as
//! text, never as links, images or markup, on one line and bounded. The summary and the matrix
//! both write it.

/// Markdown text: no markup, link or HTML survives, no line break, at most `max` characters.
pub fn escape(text: &str, max: usize) -> String {
    let clipped: String = text.chars().take(max).collect();
    let clipped = crate::text::visible(&clipped);
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
