//! The per-case timeline: inline SVG, one lane per endpoint.
//!
//! Drawn so that retry behaviour is visible at a glance: every request is a
//! tick plus a bar to the end of its answer, coloured by the answer; injected
//! faults carry a diamond; the gaps between attempts on one endpoint are
//! dashed and labelled; the budget is a red band, the agent's exit a line.

use std::fmt::Write as _;

use super::markup::{duration_text, escape, event_tooltip};
use crate::model::{Timeline, TimelineEvent};

const WIDTH: f64 = 960.0;
const GUTTER: f64 = 200.0; // lane labels
const RIGHT: f64 = 56.0; // room for the last answer text
const TOP: f64 = 40.0; // marker labels: budget, exit, deadline, one row each
const LANE: f64 = 26.0;
const AXIS: f64 = 26.0;
const BAR: f64 = 10.0;
/// Rough width of one character of the 11px label font, to avoid overlaps.
const CHAR_PX: f64 = 6.6;
/// Endpoint characters that fit the gutter next to a ` ×NN` request count.
const LANE_LABEL_CHARS: usize = 24;

struct Scale {
    span_ms: u64,
}

impl Scale {
    fn x(&self, ms: u64) -> f64 {
        GUTTER + (ms.min(self.span_ms) as f64) * (WIDTH - GUTTER - RIGHT) / self.span_ms as f64
    }
}

/// Appends `<svg class="timeline">…</svg>` for one case.
pub(super) fn render(page: &mut String, timeline: &Timeline) {
    let lanes = lanes(&timeline.events);
    let span_ms = span(timeline);
    let scale = Scale { span_ms };
    let lane_count = lanes.len().max(1);
    let height = TOP + lane_count as f64 * LANE + AXIS;
    let _ = writeln!(
        page,
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height}\" \
         width=\"{WIDTH}\" height=\"{height}\" role=\"img\" aria-label=\"{} requests over {}\">",
        timeline.events.len(),
        duration_text(span_ms),
    );
    let plot_bottom = TOP + lane_count as f64 * LANE;

    // Lane backgrounds and labels.
    for (index, lane) in lanes.iter().enumerate() {
        let y = TOP + index as f64 * LANE;
        let _ = writeln!(
            page,
            "<rect class=\"lane lane-{}\" x=\"{GUTTER}\" y=\"{y}\" width=\"{w:.0}\" height=\"{LANE}\"/>\
             <text class=\"lane-label\" x=\"{lx}\" y=\"{ty:.0}\"><title>{full}: {n} request{s}</title>{short} ×{n}</text>",
            index % 2,
            w = WIDTH - GUTTER - RIGHT,
            lx = GUTTER - 6.0,
            ty = y + LANE / 2.0 + 4.0,
            full = escape(lane.endpoint),
            short = escape(&shorten(lane.endpoint, LANE_LABEL_CHARS)),
            n = lane.events.len(),
            s = if lane.events.len() == 1 { "" } else { "s" },
        );
    }
    if lanes.is_empty() {
        let _ = writeln!(
            page,
            "<rect class=\"lane lane-0\" x=\"{GUTTER}\" y=\"{TOP}\" width=\"{w:.0}\" height=\"{LANE}\"/>\
             <text class=\"no-requests\" x=\"{x:.0}\" y=\"{y:.0}\">no requests received</text>",
            w = WIDTH - GUTTER - RIGHT,
            x = GUTTER + 8.0,
            y = TOP + LANE / 2.0 + 4.0,
        );
    }

    axis(page, &scale, plot_bottom);

    // Budget: the band after it is "too late".
    if let Some(budget) = timeline.budget_ms {
        let x = scale.x(budget);
        let _ = writeln!(
            page,
            "<g class=\"budget\"><title>budget {}</title>\
             <rect class=\"over-budget\" x=\"{x:.0}\" y=\"{TOP}\" width=\"{w:.0}\" height=\"{h:.0}\"/>\
             <line x1=\"{x:.0}\" y1=\"{y1:.0}\" x2=\"{x:.0}\" y2=\"{plot_bottom:.0}\"/>\
             <text x=\"{x:.0}\" y=\"10\" text-anchor=\"{anchor}\">budget {}</text></g>",
            duration_text(budget),
            duration_text(budget),
            w = (WIDTH - RIGHT - x).max(0.0),
            h = plot_bottom - TOP,
            y1 = 12.0,
            anchor = anchor_for(x),
        );
    }
    // The runner's deadline.
    {
        let x = scale.x(timeline.deadline_ms);
        let _ = writeln!(
            page,
            "<g class=\"deadline\"><title>deadline {}</title>\
             <line x1=\"{x:.0}\" y1=\"{y1:.0}\" x2=\"{x:.0}\" y2=\"{plot_bottom:.0}\"/>\
             <text x=\"{x:.0}\" y=\"{ly:.0}\" text-anchor=\"{anchor}\">deadline</text></g>",
            duration_text(timeline.deadline_ms),
            y1 = 36.0,
            ly = 34.0,
            anchor = anchor_for(x),
        );
    }
    // Agent exit.
    if let Some(exit) = timeline.agent_exit_ms {
        let x = scale.x(exit);
        let _ = writeln!(
            page,
            "<g class=\"exit\"><title>agent exited at {}</title>\
             <line x1=\"{x:.0}\" y1=\"{y1:.0}\" x2=\"{x:.0}\" y2=\"{plot_bottom:.0}\"/>\
             <text x=\"{x:.0}\" y=\"{ly:.0}\" text-anchor=\"{anchor}\">exit {}</text></g>",
            duration_text(exit),
            duration_text(exit),
            y1 = 24.0,
            ly = 22.0,
            anchor = anchor_for(x),
        );
    }

    let open_end = timeline.agent_exit_ms.unwrap_or(span_ms).min(span_ms);
    for (index, lane) in lanes.iter().enumerate() {
        let mid = TOP + index as f64 * LANE + LANE / 2.0;
        lane_events(page, &scale, lane, mid, open_end);
    }
    page.push_str("</svg>\n");
}

struct Lane<'a> {
    endpoint: &'a str,
    events: Vec<&'a TimelineEvent>,
}

/// One lane per endpoint, in order of first request; events in arrival order.
fn lanes(events: &[TimelineEvent]) -> Vec<Lane<'_>> {
    let mut lanes: Vec<Lane<'_>> = Vec::new();
    for event in events {
        match lanes.iter_mut().find(|l| l.endpoint == event.endpoint) {
            Some(lane) => lane.events.push(event),
            None => lanes.push(Lane {
                endpoint: &event.endpoint,
                events: vec![event],
            }),
        }
    }
    for lane in &mut lanes {
        lane.events.sort_by_key(|e| e.at_ms); // stable: equal times keep arrival order
    }
    lanes
}

/// The time shown: everything that happened, at least 1 ms.
fn span(timeline: &Timeline) -> u64 {
    let mut span = timeline.deadline_ms;
    span = span.max(timeline.budget_ms.unwrap_or(0));
    span = span.max(timeline.agent_exit_ms.unwrap_or(0));
    for event in &timeline.events {
        span = span.max(event.at_ms).max(event.done_ms.unwrap_or(0));
    }
    span.max(1)
}

fn anchor_for(x: f64) -> &'static str {
    if x > WIDTH - RIGHT - 60.0 {
        "end"
    } else {
        "middle"
    }
}

fn axis(page: &mut String, scale: &Scale, plot_bottom: f64) {
    let step = tick_step(scale.span_ms);
    page.push_str("<g class=\"axis\">");
    let _ = write!(
        page,
        "<line x1=\"{GUTTER}\" y1=\"{plot_bottom:.0}\" x2=\"{x2:.0}\" y2=\"{plot_bottom:.0}\"/>",
        x2 = WIDTH - RIGHT
    );
    let mut t = 0;
    while t <= scale.span_ms {
        let x = scale.x(t);
        let _ = write!(
            page,
            "<line class=\"grid\" x1=\"{x:.0}\" y1=\"{TOP}\" x2=\"{x:.0}\" y2=\"{plot_bottom:.0}\"/>\
             <text x=\"{x:.0}\" y=\"{y:.0}\">{}</text>",
            tick_label(t, step),
            y = plot_bottom + 16.0,
        );
        match t.checked_add(step) {
            Some(next) => t = next,
            None => break,
        }
    }
    page.push_str("</g>\n");
}

/// 1, 2 or 5 × 10^k ms, so that there are at most 10 ticks.
fn tick_step(span_ms: u64) -> u64 {
    let mut magnitude = 1u64;
    loop {
        for factor in [1, 2, 5] {
            let step = factor * magnitude;
            if span_ms / step <= 10 {
                return step;
            }
        }
        magnitude *= 10;
    }
}

fn tick_label(ms: u64, step: u64) -> String {
    if step >= 1000 {
        format!("{} s", ms / 1000)
    } else if step >= 100 {
        format!("{}.{} s", ms / 1000, (ms % 1000) / 100)
    } else {
        format!("{ms} ms")
    }
}

fn shorten(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_string()
    } else {
        let mut short: String = text.chars().take(max_chars - 1).collect();
        short.push('…');
        short
    }
}

fn lane_events(page: &mut String, scale: &Scale, lane: &Lane<'_>, mid: f64, open_end: u64) {
    let bar_top = mid - BAR / 2.0;
    for (i, event) in lane.events.iter().enumerate() {
        let next_at = lane.events.get(i + 1).map(|n| n.at_ms);
        let end_ms = match (event.done_ms, event.closed_ms) {
            (Some(done), _) => done,
            // Never answered: open until the agent closed it, or until the agent was gone.
            (None, Some(closed)) => closed.max(event.at_ms),
            (None, None) => open_end.max(event.at_ms),
        };
        let x0 = scale.x(event.at_ms);
        let x1 = scale.x(end_ms).max(x0 + 2.0);

        // Wait before the next attempt on this endpoint.
        if let Some(next_at) = next_at.filter(|next_at| *next_at > end_ms) {
            let label = duration_text(next_at - end_ms);
            let nx = scale.x(next_at);
            let _ = write!(
                page,
                "<g class=\"wait\"><title>wait {label} before the next request</title>\
                 <line x1=\"{x1:.0}\" y1=\"{mid:.0}\" x2=\"{nx:.0}\" y2=\"{mid:.0}\"/>",
            );
            if nx - x1 >= label.len() as f64 * CHAR_PX + 4.0 {
                let _ = write!(
                    page,
                    "<text x=\"{cx:.0}\" y=\"{ty:.0}\">{label}</text>",
                    cx = (x1 + nx) / 2.0,
                    ty = mid + BAR / 2.0 + 7.0,
                );
            }
            page.push_str("</g>\n");
        }

        let class = event.answer_class().as_str();
        let mut classes = format!("req a-{class}");
        if event.fault {
            classes.push_str(" fault");
        }
        if event.done_ms.is_none() && event.closed_ms.is_none() {
            classes.push_str(" open");
        }
        let _ = write!(
            page,
            "<g class=\"{classes}\"><title>{}</title>\
             <line class=\"tick\" x1=\"{x0:.0}\" y1=\"{t1:.0}\" x2=\"{x0:.0}\" y2=\"{t2:.0}\"/>\
             <rect class=\"bar\" x=\"{x0:.0}\" y=\"{bar_top:.0}\" width=\"{w:.0}\" height=\"{BAR}\"/>",
            escape(&event_tooltip(event)),
            t1 = mid - LANE / 2.0 + 2.0,
            t2 = mid + LANE / 2.0 - 2.0,
            w = x1 - x0,
        );
        if event.fault {
            // A diamond on the tick: distinct from any answer colour.
            let _ = write!(
                page,
                "<path class=\"fault-mark\" d=\"M{x0:.0} {a:.0} L{r:.0} {mid:.0} L{x0:.0} {b:.0} L{l:.0} {mid:.0} Z\"/>",
                a = mid - 6.0,
                b = mid + 6.0,
                l = x0 - 6.0,
                r = x0 + 6.0,
            );
        }
        // The answer text above the bar, when it fits before the next request.
        let room = next_at.map_or(WIDTH - x0, |n| scale.x(n) - x0);
        let text = shorten(&event.answer, 12);
        if room >= text.chars().count() as f64 * CHAR_PX + 6.0 {
            let _ = write!(
                page,
                "<text class=\"answer\" x=\"{tx:.0}\" y=\"{ty:.0}\">{}</text>",
                escape(&text),
                tx = x0 + 3.0,
                ty = bar_top - 2.0,
            );
        }
        page.push_str("</g>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_steps_keep_at_most_ten_ticks() {
        assert_eq!(tick_step(1), 1);
        assert_eq!(tick_step(1000), 100);
        assert_eq!(tick_step(1_200_000), 200_000);
        for span in [1, 7, 99, 1234, 65_000, 3_600_000] {
            assert!(span / tick_step(span) <= 10, "span {span}");
        }
    }

    #[test]
    fn shorten_counts_characters_not_bytes() {
        assert_eq!(shorten("ééééé", 5), "ééééé");
        assert_eq!(shorten("éééééé", 5), "éééé…");
    }
}
