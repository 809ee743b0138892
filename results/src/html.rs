//! `report.html`: one self-contained page (inline CSS and JS, no fetches). First what a
//! reviewer needs: the verdict counts, an agent × scenario-group heatmap, the problems grouped
//! by cause ([`problems`]); then per agent, scenario group and scenario one request timeline
//! (inline SVG) with the scenario's checks as rows under it, reasons inline, and how the agent
//! ended (exit status, stderr tail). One timeline per scenario, not per check, keeps the page
//! small.
//!
//! Every string that came from an agent or the wire is hostile input: it goes
//! through [`escape`] before it reaches the page, ids and classes are built
//! only from indexes and fixed vocabularies, the one link built from data (a case's
//! artifacts folder, [`artifacts_href`]) cannot leave the results folder, and the page's
//! Content Security Policy forbids every fetch. Output is a pure function of the input.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::model::{AgentResults, CaseResult, RunResults, Timeline, Verdict, VerdictCounts};
use crate::output::{ResultsError, write_file};
use crate::problems;

mod markup;
mod timeline;

use markup::duration_text;
pub use markup::escape;

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
    let mut page = String::with_capacity(256 * 1024);
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

    let layout = Layout::new(results);
    header(&mut page, results);
    summary(&mut page, results);
    heatmap(&mut page, results, &layout);
    problems_section(&mut page, results);
    filters(&mut page, results);
    legend(&mut page);
    page.push_str("<main id=\"cases\">\n");
    if results.agents.iter().all(|a| a.cases.is_empty()) {
        page.push_str("<p class=\"empty\">No cases were run.</p>\n");
    }
    for (agent_index, agent) in results.agents.iter().enumerate() {
        agent_section(&mut page, agent_index, agent, &layout);
        for u in results
            .unclaimed_flows
            .iter()
            .filter(|u| u.agent == agent.agent)
        {
            let _ = writeln!(
                page,
                "<p class=\"unclaimed\">{}</p>",
                escape(&u.to_string())
            );
        }
    }
    page.push_str("</main>\n");
    let _ = writeln!(page, "<script>\n{BODY_SCRIPT}</script>\n</body>\n</html>");
    page
}

/// Anchor id of a case's row: indexes only, never agent-supplied text.
fn case_anchor(agent_index: usize, case_index: usize) -> String {
    format!("case-{agent_index}-{case_index}")
}

/// Anchor id of an agent's part of a scenario group.
fn group_anchor(agent_index: usize, group_index: usize) -> String {
    format!("g-{agent_index}-{group_index}")
}

/// `512 bytes`, `3.2 KB`, `1.4 MB`.
fn size_text(bytes: u64) -> String {
    if bytes < 1000 {
        format!("{bytes} bytes")
    } else if bytes < 1_000_000 {
        format!("{:.1} KB", bytes as f64 / 1000.0)
    } else {
        format!("{:.1} MB", bytes as f64 / 1_000_000.0)
    }
}

/// The scenario group of a case id: its first dotted part (as `wirecheck matrix` counts).
fn group_of(case_id: &str) -> &str {
    case_id.split('.').next().unwrap_or(case_id)
}

/// The scenario groups of the run, sorted by name (the rows of docs/matrix.md).
struct Layout<'a> {
    groups: Vec<&'a str>,
}

impl<'a> Layout<'a> {
    fn new(results: &'a RunResults) -> Layout<'a> {
        let mut groups: Vec<&str> = results
            .agents
            .iter()
            .flat_map(|a| &a.cases)
            .map(|c| group_of(&c.id))
            .collect();
        groups.sort_unstable();
        groups.dedup();
        Layout { groups }
    }

    fn group_index(&self, case_id: &str) -> usize {
        self.groups
            .binary_search(&group_of(case_id))
            .unwrap_or_default()
    }
}

/// The verdict a set of counts is coloured by: the worst that occurs.
fn worst(counts: &VerdictCounts) -> Option<Verdict> {
    [
        Verdict::Fail,
        Verdict::NonStrict,
        Verdict::Pass,
        Verdict::Informational,
        Verdict::Unimplemented,
        Verdict::Skipped,
    ]
    .into_iter()
    .find(|v| counts.get(*v) > 0)
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
    page.push_str("</p>\n");
    if let Some(signal) = &results.interrupted {
        let _ = writeln!(
            page,
            "<p class=\"warning\">Interrupted by {}: the results are partial.</p>",
            escape(signal)
        );
    }
    if let Some(why) = &results.uncontained {
        let _ = writeln!(
            page,
            "<p class=\"warning\"><strong>Uncontained:</strong> the agents ran without containment (--uncontained): {}</p>",
            escape(why)
        );
    }
    page.push_str("</header>\n");
}

/// The verdict counts, each a link that shows only that verdict.
fn summary(page: &mut String, results: &RunResults) {
    let counts = results.counts();
    page.push_str("<section id=\"summary\" aria-label=\"verdict counts\">\n");
    for verdict in Verdict::ALL {
        let _ = writeln!(
            page,
            "<a class=\"tile v-{v}\" href=\"#show={v}\"><span class=\"n\">{n}</span> {v}</a>",
            v = verdict.as_str(),
            n = counts.get(verdict),
        );
    }
    page.push_str("</section>\n");
}

/// Agent × scenario group: verdict counts per cell, coloured by the worst verdict in it; a
/// cell links to that agent's part of the group.
fn heatmap(page: &mut String, results: &RunResults, layout: &Layout<'_>) {
    page.push_str("<section id=\"heatmap\">\n<h2>agent × scenario group</h2>\n");
    if layout.groups.is_empty() {
        page.push_str("<p class=\"empty\">No cases were run.</p>\n</section>\n");
        return;
    }
    let mut cells = vec![vec![VerdictCounts::default(); results.agents.len()]; layout.groups.len()];
    for (agent_index, agent) in results.agents.iter().enumerate() {
        for case in &agent.cases {
            cells[layout.group_index(&case.id)][agent_index].add(case.verdict);
        }
    }
    page.push_str("<table>\n<thead><tr><th scope=\"col\">group</th>");
    for agent in &results.agents {
        let _ = write!(page, "<th scope=\"col\">{}</th>", escape(&agent.agent));
    }
    page.push_str("</tr></thead>\n<tbody>\n");
    for (group_index, group) in layout.groups.iter().enumerate() {
        let _ = write!(
            page,
            "<tr><th scope=\"row\"><code>{}</code></th>",
            escape(group)
        );
        for (agent_index, counts) in cells[group_index].iter().enumerate() {
            match worst(counts) {
                Some(v) => {
                    let _ = write!(
                        page,
                        "<td class=\"h-{}\"><a href=\"#{}\">{}</a></td>",
                        v.as_str(),
                        group_anchor(agent_index, group_index),
                        counts
                    );
                }
                None => page.push_str("<td class=\"not-run\">—</td>"),
            }
        }
        page.push_str("</tr>\n");
    }
    page.push_str("<tr class=\"total\"><th scope=\"row\">all</th>");
    for (agent_index, agent) in results.agents.iter().enumerate() {
        let counts = agent.counts();
        let class = worst(&counts).map_or("not-run", Verdict::as_str);
        let _ = write!(
            page,
            "<td class=\"h-{class}\"><a href=\"#agent-{agent_index}\">{counts}</a></td>"
        );
    }
    page.push_str("</tr>\n</tbody>\n</table>\n</section>\n");
}

/// Groups shown open; the rest are one click away.
const PROBLEMS_OPEN: usize = 5;

/// Failures and non-strict verdicts grouped by cause, most frequent first.
fn problems_section(page: &mut String, results: &RunResults) {
    let groups = problems::group(results, &problems::PROBLEM_VERDICTS);
    let total: usize = groups.iter().map(|g| g.cases.len()).sum();
    let _ = writeln!(
        page,
        "<section id=\"problems\">\n<h2>problems: {total} case{} in {} group{}</h2>",
        plural(total),
        groups.len(),
        plural(groups.len())
    );
    if groups.is_empty() {
        page.push_str(
            "<p class=\"empty\">No failures and no non-strict verdicts.</p>\n</section>\n",
        );
        return;
    }
    page.push_str(
        "<p class=\"meta\">Failures and non-strict verdicts of the same check with the same reason \
         (numbers, paths and quoted values aside), most frequent first.</p>\n",
    );
    for (index, group) in groups.iter().enumerate() {
        let v = group.verdict.as_str();
        let agents = group.agent_count();
        let _ = writeln!(
            page,
            "<details class=\"problem v-{v}\"{open}><summary><span class=\"badge v-{v}\">{v}</span> \
             <span class=\"times\">×{n}</span> <code>{check}</code> {example} \
             <span class=\"meta\">({agents} agent{ap})</span></summary>\n<ul>",
            open = if index < PROBLEMS_OPEN { " open" } else { "" },
            n = group.cases.len(),
            check = escape(group.check),
            example = escape(group.example()),
            ap = plural(agents),
        );
        let example = group.example();
        for member in &group.cases {
            let _ = write!(
                page,
                "<li><a href=\"#{}\">{} · <code>{}</code></a>",
                case_anchor(member.agent_index, member.case_index),
                escape(member.agent),
                escape(&member.case.id),
            );
            let reason = member.case.reason.as_deref().unwrap_or("");
            if reason != example {
                let _ = write!(page, ": {}", escape(reason));
            }
            page.push_str("</li>\n");
        }
        page.push_str("</ul>\n</details>\n");
    }
    page.push_str("</section>\n");
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
         <button type=\"button\" id=\"show-problems\">problems only</button>\n\
         <span id=\"shown\" class=\"count\"></span>\n</nav>\n",
    );
}

fn legend(page: &mut String) {
    page.push_str(
        "<details id=\"legend\">\n<summary>reading a timeline</summary>\n<p>One timeline per agent and scenario, \
         the scenario's checks as rows under it. One lane per endpoint; time runs left to right from the \
         start of the case. A bar is one request, from its arrival (tick) to the end of the answer; \
         its colour is the answer: <span class=\"key a-ok\">2xx</span> <span class=\"key a-redirect\">3xx</span> \
         <span class=\"key a-client-error\">4xx</span> <span class=\"key a-server-error\">5xx</span> \
         <span class=\"key a-transport\">transport fault</span> (hang, reset, close, malformed, partial, slow). \
         <span class=\"key fault-key\">◆</span> marks an injected fault. Dashed lines are the waits between \
         attempts on one endpoint, labelled with their length. A request never answered (hang) ends where the agent \
         closed the connection, or is drawn open (dashed) until the agent was gone. The red band starts at the agent's budget; \
         the blue line is the agent's exit, the grey dashed line the runner's deadline. Hover any mark for details.</p>\n</details>\n",
    );
}

/// The cases of one scenario of one agent, by index into the agent's cases.
struct ScenarioBlock<'a> {
    name: &'a str,
    cases: Vec<usize>,
}

/// An agent's cases by scenario (first-seen order), and those by group (sorted by name).
fn scenario_blocks<'a>(
    agent: &'a AgentResults,
    layout: &Layout<'_>,
) -> Vec<Vec<ScenarioBlock<'a>>> {
    let mut by_group: Vec<Vec<ScenarioBlock<'a>>> =
        (0..layout.groups.len()).map(|_| Vec::new()).collect();
    for (index, case) in agent.cases.iter().enumerate() {
        let blocks = &mut by_group[layout.group_index(&case.id)];
        match blocks.iter_mut().find(|b| b.name == case.scenario) {
            Some(block) => block.cases.push(index),
            None => blocks.push(ScenarioBlock {
                name: &case.scenario,
                cases: vec![index],
            }),
        }
    }
    by_group
}

fn verdict_list(agent: &AgentResults, indexes: &[usize]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for i in indexes {
        let v = agent.cases[*i].verdict.as_str();
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    seen.join(" ")
}

fn agent_section(page: &mut String, agent_index: usize, agent: &AgentResults, layout: &Layout<'_>) {
    let all: Vec<usize> = (0..agent.cases.len()).collect();
    let _ = writeln!(
        page,
        "<section class=\"agent\" id=\"agent-{agent_index}\" data-verdicts=\"{}\">\n<h2>{} <span class=\"agent-counts\">{}</span></h2>",
        verdict_list(agent, &all),
        escape(&agent.agent),
        escape(&agent.counts().to_string())
    );
    if agent.cases.is_empty() {
        page.push_str("<p class=\"empty\">No cases were run against this agent.</p>\n");
    }
    for (group_index, blocks) in scenario_blocks(agent, layout).iter().enumerate() {
        if blocks.is_empty() {
            continue;
        }
        let indexes: Vec<usize> = blocks
            .iter()
            .flat_map(|b| b.cases.iter().copied())
            .collect();
        let mut counts = VerdictCounts::default();
        for i in &indexes {
            counts.add(agent.cases[*i].verdict);
        }
        let _ = writeln!(
            page,
            "<section class=\"group\" id=\"{}\" data-verdicts=\"{}\">\n<h3><code>{}</code> <span class=\"agent-counts\">{} · {}</span></h3>",
            group_anchor(agent_index, group_index),
            verdict_list(agent, &indexes),
            escape(layout.groups[group_index]),
            escape(&agent.agent),
            counts,
        );
        for block in blocks {
            scenario_section(page, agent_index, agent, block);
        }
        page.push_str("</section>\n");
    }
    page.push_str("</section>\n");
}

/// `<scenario title>: ` shared by every title of the block (the runner titles cases
/// `<scenario title>: <check title>`), or `""` when there is no such common part.
fn common_title_prefix<'a>(titles: &[&'a str]) -> &'a str {
    let Some(first) = titles.first() else {
        return "";
    };
    if titles.len() < 2 {
        return "";
    }
    // The longest "…: " prefix of the first title that every title has.
    for (index, _) in first.rmatch_indices(": ") {
        let prefix = &first[..index + 2];
        if titles
            .iter()
            .all(|t| t.starts_with(prefix) && t.len() > prefix.len())
        {
            return prefix;
        }
    }
    ""
}

fn scenario_section(
    page: &mut String,
    agent_index: usize,
    agent: &AgentResults,
    block: &ScenarioBlock<'_>,
) {
    let cases: Vec<&CaseResult> = block.cases.iter().map(|i| &agent.cases[*i]).collect();
    let first = cases[0];
    let titles: Vec<&str> = cases.iter().map(|c| c.title.as_str()).collect();
    let prefix = common_title_prefix(&titles);
    let check = problems::check_of(&first.id);
    let scenario_id = first
        .id
        .strip_suffix(check)
        .and_then(|s| s.strip_suffix('.'))
        .unwrap_or("");
    let mut counts = VerdictCounts::default();
    for case in &cases {
        counts.add(case.verdict);
    }
    let _ = writeln!(
        page,
        "<section class=\"scenario\" data-verdicts=\"{}\">\n<h4><code>{}</code> {} <span class=\"agent-counts\">{}</span></h4>",
        verdict_list(agent, &block.cases),
        escape(if scenario_id.is_empty() {
            block.name
        } else {
            scenario_id
        }),
        escape(prefix.trim_end_matches(": ")),
        counts,
    );
    let _ = write!(
        page,
        "<p class=\"meta\">scenario <code>{}</code> · {}",
        escape(block.name),
        run_text(first),
    );
    artifacts_link(page, first.artifacts.as_deref());
    page.push_str("</p>\n");
    run_ends(page, &first.timeline);
    let shared = shared_reasons(&cases);
    for (verdict, reason, n) in &shared {
        let _ = writeln!(
            page,
            "<p class=\"reason\"><span class=\"badge v-{v}\">{v}</span> {n} of {} checks: {}</p>",
            cases.len(),
            escape(reason),
            v = verdict.as_str(),
        );
    }
    if ran(&first.timeline) {
        timeline::render(page, &first.timeline);
    }
    page.push_str("<table class=\"checks\">\n");
    for (case_index, case) in block.cases.iter().zip(&cases) {
        let v = case.verdict.as_str();
        let shown_id = match case
            .id
            .strip_prefix(scenario_id)
            .and_then(|s| s.strip_prefix('.'))
        {
            Some(rest) if !scenario_id.is_empty() => rest,
            _ => case.id.as_str(),
        };
        let title = case.title.strip_prefix(prefix).unwrap_or(&case.title);
        let _ = write!(
            page,
            "<tr class=\"case v-{v}\" id=\"{}\"><td class=\"b\">{v}</td><td><code>{}</code></td><td>{}",
            case_anchor(agent_index, *case_index),
            escape(shown_id),
            escape(title),
        );
        let said = |r: &str| shared.iter().any(|(v, s, _)| *v == case.verdict && *s == r);
        if let Some(reason) = case
            .reason
            .as_deref()
            .filter(|r| !said(r) || !case.evidence.is_empty())
        {
            let _ = write!(page, "<div class=\"reason\">{}</div>", escape(reason));
        }
        // What the scenario block does not already show for it.
        if case.duration_ms != first.duration_ms || case.artifacts != first.artifacts {
            let _ = write!(
                page,
                "<div class=\"meta\">took {}",
                duration_text(case.duration_ms)
            );
            artifacts_link(page, case.artifacts.as_deref());
            page.push_str("</div>");
        }
        evidence(page, case);
        if case.timeline != first.timeline {
            run_ends(page, &case.timeline);
            timeline::render(page, &case.timeline);
        }
        page.push_str("</td></tr>\n");
    }
    page.push_str("</table>\n</section>\n");
}

/// Reasons said once above a scenario's rows instead of on each: one every check shares (a
/// scenario not run, a harness error), and for the verdicts nobody judged (skipped,
/// unimplemented) any reason two or more rows without evidence share. In first-seen order,
/// with how many rows it covers.
fn shared_reasons<'a>(cases: &[&'a CaseResult]) -> Vec<(Verdict, &'a str, usize)> {
    let mut shared: Vec<(Verdict, &'a str, usize)> = Vec::new();
    for case in cases.iter().filter(|c| c.evidence.is_empty()) {
        let Some(reason) = case.reason.as_deref() else {
            continue;
        };
        match shared
            .iter_mut()
            .find(|(v, r, _)| *v == case.verdict && *r == reason)
        {
            Some(entry) => entry.2 += 1,
            None => shared.push((case.verdict, reason, 1)),
        }
    }
    let everyone = |(_, _, n): &(Verdict, &str, usize)| *n == cases.len();
    shared.retain(|entry| {
        entry.2 >= 2
            && (everyone(entry) || matches!(entry.0, Verdict::Skipped | Verdict::Unimplemented))
    });
    shared
}

/// Whether the agent ran in this scenario at all (a scenario skipped has an empty timeline).
fn ran(timeline: &Timeline) -> bool {
    timeline.deadline_ms > 0
        || timeline.agent_exit_ms.is_some()
        || !timeline.events.is_empty()
        || !timeline.runs.is_empty()
}

fn run_text(case: &CaseResult) -> String {
    if !ran(&case.timeline) {
        return "not run".into();
    }
    // `took` is the wall clock's; the timeline's times are the agent's.
    let clock = match case.timeline.time_scale {
        Some(scale) => format!(" · agent time x{scale}: the timeline's times are the agent's"),
        None => String::new(),
    };
    format!(
        "took {} · {}{clock}",
        duration_text(case.duration_ms),
        exit_text(&case.timeline)
    )
}

fn artifacts_link(page: &mut String, dir: Option<&str>) {
    let Some(dir) = dir else { return };
    match artifacts_href(dir) {
        Some(href) => {
            let _ = write!(page, " · <a href=\"{href}/\">artifacts</a>");
        }
        None => {
            let _ = write!(page, " · artifacts <code>{}</code>", escape(dir));
        }
    }
}

/// The link to a case's artifacts folder, when `dir` is one as the runner writes them
/// (`artifacts/<agent>/<scenario id>`): a path below `artifacts/` without `.` or `..` parts,
/// every byte but `A-Z a-z 0-9 - . _ ~` percent-encoded. Whatever a results.json says
/// (`wirecheck merge` reads others'), the link stays inside the results folder: no scheme, no
/// host (`//`, `\\`, a tab or space a browser strips), no way up. `None`: shown as text.
pub fn artifacts_href(dir: &str) -> Option<String> {
    let rest = dir.strip_prefix("artifacts/")?;
    let mut href = String::from("artifacts");
    for part in rest.split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return None;
        }
        href.push('/');
        for byte in part.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
                href.push(char::from(byte));
            } else {
                let _ = write!(href, "%{byte:02X}");
            }
        }
    }
    Some(href)
}

/// Each invocation's end and the tail of its stderr (the whole of it is in the artifacts).
fn run_ends(page: &mut String, timeline: &Timeline) {
    if timeline.runs.is_empty() {
        return;
    }
    page.push_str("<ul class=\"runs\">\n");
    for (index, run) in timeline.runs.iter().enumerate() {
        let class = if run.exit_code == Some(0) {
            "ok"
        } else {
            "bad"
        };
        let _ = write!(
            page,
            "<li>run {}: <span class=\"exit {class}\">{}</span>",
            index + 1,
            escape(&run.exit)
        );
        if run.stderr_tail.is_empty() {
            page.push_str(" · no stderr</li>\n");
            continue;
        }
        let lines = run.stderr_tail.lines().count();
        // The tail drops the stream's final line end (`\n` or `\r\n`): a stderr of one line
        // and its newline is shown whole, not as its "last line".
        let whole = run.stderr_bytes <= run.stderr_tail.len() as u64 + 2;
        let _ = writeln!(
            page,
            " · <details class=\"stderr\"><summary>stderr{}</summary><pre>{}</pre></details></li>",
            if whole {
                format!(" ({})", size_text(run.stderr_bytes))
            } else {
                format!(
                    ", last {lines} line{} of {}",
                    plural(lines),
                    size_text(run.stderr_bytes)
                )
            },
            escape(&run.stderr_tail),
        );
    }
    page.push_str("</ul>\n");
}

fn evidence(page: &mut String, case: &CaseResult) {
    if case.evidence.is_empty() {
        return;
    }
    let open = if case.verdict == Verdict::Pass {
        ""
    } else {
        " open"
    };
    let _ = write!(
        page,
        "<details class=\"evidence\"{open}><summary>evidence ({})</summary><ul>",
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
        page.push_str("</li>");
    }
    page.push_str("</ul></details>");
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
