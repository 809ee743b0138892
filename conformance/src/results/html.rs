//! `report.html`: one self-contained page (inline CSS and JS, no fetches)
//! with the agent x case matrix, verdict filters, and per case a request
//! timeline drawn as inline SVG.
//!
//! Every string that came from an agent or the wire is hostile input: it goes
//! through [`escape`] before it reaches the page, ids and classes are built
//! only from indexes and fixed vocabularies, and the page's Content Security
//! Policy forbids every fetch. Output is a pure function of the input.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::model::{AgentResults, CaseResult, RunResults, Timeline, TimelineEvent, Verdict};
use super::output::{ResultsError, write_file};

mod timeline;

/// File name inside the results folder.
pub const FILE_NAME: &str = "report.html";

const STYLE: &str = include_str!("html/report.css");
const HEAD_SCRIPT: &str = include_str!("html/report-head.js");
const BODY_SCRIPT: &str = include_str!("html/report.js");

/// Writes `dir/report.html`; returns its path.
pub fn write(dir: impl AsRef<Path>, results: &RunResults) -> Result<PathBuf, ResultsError> {
    write_file(dir.as_ref(), FILE_NAME, render(results).as_bytes())
}

/// Renders the whole page.
pub fn render(results: &RunResults) -> String {
    let mut page = String::with_capacity(64 * 1024);
    let counts = results.counts();
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    page.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n",
    );
    page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(
        page,
        "<title>wirecheck report: {}</title>",
        escape(&counts.to_string())
    );
    let _ = writeln!(page, "<script>\n{HEAD_SCRIPT}</script>");
    let _ = writeln!(page, "<style>\n{STYLE}</style>\n</head>\n<body>");

    header(&mut page, results);
    filters(&mut page, results);
    matrix(&mut page, results);
    legend(&mut page);
    page.push_str("<main id=\"cases\">\n");
    for (agent_index, agent) in results.agents.iter().enumerate() {
        agent_section(&mut page, agent_index, agent);
    }
    page.push_str("</main>\n");
    let _ = writeln!(page, "<script>\n{BODY_SCRIPT}</script>\n</body>\n</html>");
    page
}

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

/// Anchor id of a case's section: indexes only, never agent-supplied text.
fn case_anchor(agent_index: usize, case_index: usize) -> String {
    format!("case-{agent_index}-{case_index}")
}

/// `1.234 s`, or `850 ms` below a second.
pub(crate) fn duration_text(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{}.{:03} s", ms / 1000, ms % 1000)
    }
}

fn header(page: &mut String, results: &RunResults) {
    page.push_str("<header>\n<h1>wirecheck report</h1>\n<p class=\"meta\">");
    let _ = write!(
        page,
        "started <span class=\"started\">{}</span> · took {} · wirecheck {} · {} agent{} · {} case{}",
        escape(&results.started),
        duration_text(results.duration_ms),
        escape(&results.wirecheck_version),
        results.agents.len(),
        plural(results.agents.len()),
        results.counts().total(),
        plural(results.counts().total()),
    );
    page.push_str("</p>\n</header>\n");
}

fn filters(page: &mut String, results: &RunResults) {
    let counts = results.counts();
    page.push_str("<nav id=\"filters\" aria-label=\"filter by verdict\">\n<span class=\"label\">show</span>\n");
    for verdict in Verdict::ALL {
        let _ = writeln!(
            page,
            "<label class=\"filter v-{v}\"><input type=\"checkbox\" data-verdict=\"{v}\" checked> \
             <span class=\"badge v-{v}\">{v}</span> <span class=\"count\">{n}</span></label>",
            v = verdict.as_str(),
            n = counts.get(verdict),
        );
    }
    page.push_str(
        "<button type=\"button\" id=\"show-all\">all</button>\n\
         <button type=\"button\" id=\"show-problems\">problems only</button>\n</nav>\n",
    );
}

/// Rows: case ids in first-seen order over all agents; columns: agents.
fn matrix(page: &mut String, results: &RunResults) {
    let mut rows: Vec<(&str, &str)> = Vec::new();
    for case in results.agents.iter().flat_map(|a| &a.cases) {
        if !rows.iter().any(|(id, _)| *id == case.id) {
            rows.push((&case.id, &case.title));
        }
    }
    page.push_str("<section id=\"matrix\">\n<h2>agent × case</h2>\n");
    if rows.is_empty() {
        page.push_str("<p class=\"empty\">No cases were run.</p>\n</section>\n");
        return;
    }
    page.push_str("<table>\n<thead><tr><th scope=\"col\">case</th>");
    for agent in &results.agents {
        let _ = write!(
            page,
            "<th scope=\"col\" title=\"{}\">{}<br><span class=\"agent-counts\">{}</span></th>",
            escape(&agent.agent),
            escape(&agent.agent),
            escape(&agent.counts().to_string()),
        );
    }
    page.push_str("</tr></thead>\n<tbody>\n");
    for (id, title) in rows {
        let _ = write!(
            page,
            "<tr><th scope=\"row\"><code>{}</code> <span class=\"title\">{}</span></th>",
            escape(id),
            escape(title)
        );
        for (agent_index, agent) in results.agents.iter().enumerate() {
            let found = agent.cases.iter().enumerate().find(|(_, c)| c.id == id);
            match found {
                Some((case_index, case)) => {
                    let _ = write!(
                        page,
                        "<td data-verdict=\"{v}\"><a class=\"badge v-{v}\" href=\"#{anchor}\" title=\"{reason}\">{v}</a></td>",
                        v = case.verdict.as_str(),
                        anchor = case_anchor(agent_index, case_index),
                        reason = escape(case.reason.as_deref().unwrap_or("")),
                    );
                }
                None => page.push_str("<td class=\"not-run\">—</td>"),
            }
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</tbody>\n</table>\n</section>\n");
}

fn legend(page: &mut String) {
    page.push_str(
        "<section id=\"legend\">\n<h2>reading a timeline</h2>\n<p>One lane per endpoint; time runs left to right from the \
         start of the case. A bar is one request, from its arrival (tick) to the end of the answer; \
         its colour is the answer: <span class=\"key a-ok\">2xx</span> <span class=\"key a-redirect\">3xx</span> \
         <span class=\"key a-client-error\">4xx</span> <span class=\"key a-server-error\">5xx</span> \
         <span class=\"key a-transport\">transport fault</span> (hang, reset, close, malformed, partial, slow). \
         <span class=\"key fault-key\">◆</span> marks an injected fault. Dashed lines are the waits between \
         attempts on one endpoint, labelled with their length. A request never answered (hang) ends where the agent \
         closed the connection, or is drawn open (dashed) until the agent was gone. The red band starts at the agent's budget; \
         the blue line is the agent's exit, the grey dashed line the runner's deadline. Hover any mark for details.</p>\n</section>\n",
    );
}

fn agent_section(page: &mut String, agent_index: usize, agent: &AgentResults) {
    let _ = writeln!(
        page,
        "<section class=\"agent\" id=\"agent-{agent_index}\">\n<h2>{} <span class=\"agent-counts\">{}</span></h2>",
        escape(&agent.agent),
        escape(&agent.counts().to_string())
    );
    if agent.cases.is_empty() {
        page.push_str("<p class=\"empty\">No cases were run against this agent.</p>\n");
    }
    for (case_index, case) in agent.cases.iter().enumerate() {
        case_article(page, &case_anchor(agent_index, case_index), case);
    }
    page.push_str("</section>\n");
}

fn case_article(page: &mut String, anchor: &str, case: &CaseResult) {
    let v = case.verdict.as_str();
    let _ = writeln!(
        page,
        "<article class=\"case v-{v}\" id=\"{anchor}\" data-verdict=\"{v}\">\n\
         <h3><span class=\"badge v-{v}\">{v}</span> <code>{}</code> {}</h3>",
        escape(&case.id),
        escape(&case.title),
    );
    let _ = write!(
        page,
        "<p class=\"meta\">scenario <code>{}</code> · took {} · {}",
        escape(&case.scenario),
        duration_text(case.duration_ms),
        exit_text(&case.timeline),
    );
    if let Some(dir) = &case.artifacts {
        // Only a relative path becomes a link (the runner writes these, but be safe).
        if dir.contains(':') || dir.starts_with('/') || dir.starts_with("//") {
            let _ = write!(page, " · artifacts <code>{}</code>", escape(dir));
        } else {
            let _ = write!(page, " · <a href=\"{}/\">artifacts</a>", escape(dir));
        }
    }
    page.push_str("</p>\n");
    if let Some(reason) = &case.reason {
        let _ = writeln!(page, "<p class=\"reason\">{}</p>", escape(reason));
    }
    timeline::render(page, &case.timeline);
    if !case.evidence.is_empty() {
        let open = if case.verdict == Verdict::Pass {
            ""
        } else {
            " open"
        };
        let _ = writeln!(
            page,
            "<details class=\"evidence\"{open}><summary>evidence ({})</summary>\n<ul>",
            case.evidence.len()
        );
        for evidence in &case.evidence {
            let _ = write!(page, "<li>{}", escape(&evidence.note));
            if !evidence.journal_seq.is_empty() {
                let seqs: Vec<String> = evidence
                    .journal_seq
                    .iter()
                    .map(|s| format!("#{s}"))
                    .collect();
                let _ = write!(
                    page,
                    " <span class=\"seq\">journal {}</span>",
                    seqs.join(" ")
                );
            }
            if let Some(excerpt) = &evidence.excerpt {
                let _ = write!(page, "<pre>{}</pre>", escape(excerpt));
            }
            page.push_str("</li>\n");
        }
        page.push_str("</ul>\n</details>\n");
    }
    page.push_str("</article>\n");
}

fn exit_text(timeline: &Timeline) -> String {
    match timeline.agent_exit_ms {
        Some(ms) => format!("agent exited at {}", duration_text(ms)),
        None => format!(
            "agent did not exit (deadline {})",
            duration_text(timeline.deadline_ms)
        ),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
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
