//! What the page and its timelines both write: escaped text, durations, an event's tooltip.

use std::fmt::Write as _;

use crate::model::TimelineEvent;

/// HTML-escapes text for element content and quoted attribute values. NUL
/// and other C0 controls (except tab, LF, CR) become U+FFFD so a hostile
/// description cannot confuse the parser either.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// `1.234 s`, or `850 ms` below a second.
pub(crate) fn duration_text(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{}.{:03} s", ms / 1000, ms % 1000)
    }
}

/// Shared with the timeline renderer: a short description of one event.
pub(crate) fn event_tooltip(event: &TimelineEvent) -> String {
    let mut text = format!(
        "{} [{}] → {}{} · at {}",
        event.label,
        event.endpoint,
        event.answer,
        if event.fault { " (injected fault)" } else { "" },
        duration_text(event.at_ms),
    );
    match event.done_ms {
        Some(done) => {
            let _ = write!(
                text,
                ", done {} (took {})",
                duration_text(done),
                duration_text(done.saturating_sub(event.at_ms))
            );
        }
        None => match event.closed_ms {
            Some(closed) => {
                let _ = write!(
                    text,
                    ", never answered; the agent closed the connection at {} (after {})",
                    duration_text(closed),
                    duration_text(closed.saturating_sub(event.at_ms))
                );
            }
            None => text.push_str(", never answered"),
        },
    }
    text
}
