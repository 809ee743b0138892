//! report.html: self-contained, escaped, deterministic; snapshot of a small fixture.

use crate::results_support;

use results_support::{HOSTILE, case_count, fixture};
use wirecheck_results::{AgentResults, RunResults, Verdict, html};

#[test]
fn deterministic_for_the_same_input() {
    assert_eq!(html::render(&fixture()), html::render(&fixture()));
}

#[test]
fn hostile_agent_strings_never_become_markup() {
    let page = html::render(&fixture());
    assert!(
        !page.contains("<script>alert"),
        "raw <script> from an agent"
    );
    assert!(!page.contains("<img"), "raw <img> from an agent");
    assert!(!page.contains("alert('x')"), "unescaped quote");
    assert!(!page.contains('\0'), "NUL must not reach the page");
    let escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &quot;quoted&quot; &amp; &lt;img src=x onerror=alert(1)&gt;";
    // Title, reason, note, agent name, lane label, tooltip...
    assert!(page.matches(escaped).count() >= 6, "escaped text shown");
    // A non-relative artifacts path is shown, not linked.
    assert!(!page.contains("href=\"javascript:"));
    assert!(page.contains("href=\"artifacts/provision-report/retry.health.503-burst/\""));
    // Only our own two scripts.
    assert_eq!(page.matches("<script>").count(), 2);
    let _ = HOSTILE;
}

#[test]
fn self_contained_no_fetches() {
    let page = html::render(&fixture());
    // The hostile fixture text mentions `src=` as (escaped) text; take it out first.
    let page = page.replace("&lt;img src=x", "&lt;img");
    for needle in [" src=", "<link", "@import", "url(", "https://"] {
        assert!(!page.contains(needle), "page references {needle}");
    }
    // The only http:// is the SVG namespace name, which is never fetched.
    assert_eq!(
        page.matches("http://").count(),
        page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );
    assert!(page.contains("Content-Security-Policy\" content=\"default-src 'none'"));
}

#[test]
fn summary_heatmap_and_filters_come_first() {
    let results = fixture();
    let page = html::render(&results);
    let at = |needle: &str| {
        page.find(needle)
            .unwrap_or_else(|| panic!("{needle} missing"))
    };
    // What a reviewer needs first: counts, then the heatmap, then the problems, then cases.
    assert!(at("<section id=\"summary\"") < at("<section id=\"heatmap\""));
    assert!(at("<section id=\"heatmap\"") < at("<section id=\"problems\""));
    assert!(at("<section id=\"problems\"") < at("<main id=\"cases\""));
    assert!(page.contains(
        "<a class=\"tile v-fail\" href=\"#show=fail\"><span class=\"n\">1</span> fail</a>"
    ));
    assert!(page.contains("<span class=\"n\">2</span> informational</a>"));
    for verdict in [
        "pass",
        "non-strict",
        "fail",
        "informational",
        "unimplemented",
        "skipped",
    ] {
        assert!(page.contains(&format!(
            "<input type=\"checkbox\" data-verdict=\"{verdict}\" checked>"
        )));
    }
    // Heatmap: one row per scenario group (kvp, retry, sandbox, wire) plus the total; the
    // hostile agent ran only `wire` cases, so three of its cells are empty. A cell links to
    // that agent's part of the group and is coloured by its worst verdict.
    let heatmap = &page[at("<section id=\"heatmap\"")..at("<section id=\"problems\"")];
    assert_eq!(heatmap.matches("<tr><th scope=\"row\">").count(), 4);
    assert_eq!(heatmap.matches("<td class=\"not-run\">").count(), 3);
    assert!(heatmap.contains("<td class=\"h-fail\"><a href=\"#g-0-1\">1 pass, 1 fail</a></td>"));
    assert!(heatmap.contains(
        "<td class=\"h-non-strict\"><a href=\"#g-1-3\">1 non-strict, 1 informational</a></td>"
    ));
    assert!(page.contains("<section class=\"group\" id=\"g-0-1\""));
    assert!(page.contains("<section class=\"group\" id=\"g-1-3\""));
    // Every case is a row with an anchor.
    assert_eq!(
        page.matches("<tr class=\"case v-").count(),
        case_count(&results)
    );
}

#[test]
fn problems_are_grouped_by_cause_most_frequent_first() {
    let mut results = fixture();
    // Three more agents fail the interval check the same way, with other numbers; one fails
    // it differently.
    let failing = results.agents[0].cases[1].clone();
    for (n, reason) in [
        (1, "attempts 1 and 2 were 3 ms apart (expected >= 500 ms)"),
        (2, "attempts 5 and 6 were 40 ms apart (expected >= 500 ms)"),
        (3, "attempts 2 and 3 were 7 ms apart (expected >= 500 ms)"),
        (4, "no second attempt was made"),
    ] {
        let mut case = failing.clone();
        case.reason = Some(reason.into());
        results.agents.push(AgentResults {
            agent: format!("naive-{n}"),
            cases: vec![case],
        });
    }
    let page = html::render(&results);
    let problems = &page
        [page.find("<section id=\"problems\"").unwrap()..page.find("<nav id=\"filters\"").unwrap()];
    assert!(
        problems.contains("<h2>problems: 6 cases in 3 groups</h2>"),
        "{problems}"
    );
    let groups: Vec<&str> = problems.split("<details class=\"problem").skip(1).collect();
    assert_eq!(groups.len(), 3);
    // Most frequent first: the interval failure of four agents, then the two single ones.
    assert!(
        groups[0]
            .contains("×4</span> <code>health.interval</code> attempts 3 and 4 were 12 ms apart")
    );
    assert!(groups[0].contains("(4 agents)"));
    assert_eq!(groups[0].matches("<li>").count(), 4);
    // The first case is the example; the others show their own reason.
    assert!(groups[0].contains(
        "<li><a href=\"#case-0-1\">provision-report · <code>retry.health.interval</code></a></li>"
    ));
    assert!(groups[0].contains("<a href=\"#case-2-0\">naive-1 · <code>retry.health.interval</code></a>: attempts 1 and 2 were 3 ms apart"));
    assert!(groups[1].contains(" v-fail") || groups[2].contains(" v-fail"));
    assert!(
        groups
            .iter()
            .any(|g| g.contains("no second attempt was made"))
    );
    assert!(groups.iter().any(|g| g.contains(" v-non-strict")));
    // Passing, informational, skipped cases are not problems.
    assert!(!problems.contains("x-ms-agent-name is recorded"));

    // A run without problems says so.
    let mut clean = fixture();
    for case in clean.agents.iter_mut().flat_map(|a| &mut a.cases) {
        if matches!(case.verdict, Verdict::Fail | Verdict::NonStrict) {
            case.verdict = Verdict::Pass;
        }
    }
    assert!(html::render(&clean).contains("No failures and no non-strict verdicts."));
}

#[test]
fn one_timeline_per_scenario_with_its_checks_as_rows() {
    // Five checks of one scenario share the scenario's timeline (as the runner builds them).
    let mut results = fixture();
    results.agents.truncate(1);
    let base = results.agents[0].cases[0].clone();
    results.agents[0].cases = [
        "protocol.request",
        "protocol.headers",
        "behaviour.retry",
        "behaviour.interval",
        "kvp.report",
    ]
    .iter()
    .enumerate()
    .map(|(i, check)| {
        let mut case = base.clone();
        case.id = format!("retry.status.503.{check}");
        case.scenario = "retry-status-503".into();
        case.title = format!("retries 503: check number {i}");
        if i == 3 {
            case.verdict = Verdict::Fail;
            case.reason = Some("waited 12 ms (expected >= 500 ms)".into());
        }
        case
    })
    .collect();
    let page = html::render(&results);
    assert_eq!(page.matches("<svg class=\"timeline\"").count(), 1);
    assert_eq!(page.matches("<section class=\"scenario\"").count(), 1);
    assert_eq!(page.matches("<tr class=\"case v-").count(), 5);
    // The scenario heading carries its id and title once; rows the check and its title rest.
    assert!(page.contains("<h4><code>retry.status.503</code> retries 503 <span class=\"agent-counts\">4 pass, 1 fail</span></h4>"));
    assert!(page.contains("<tr class=\"case v-fail\" id=\"case-0-3\"><td class=\"b\">fail</td><td><code>behaviour.interval</code></td><td>check number 3<div class=\"reason\">waited 12 ms (expected &gt;= 500 ms)</div>"));
    // How the agent ended and its stderr, once, with the artifacts link.
    assert_eq!(page.matches("<ul class=\"runs\">").count(), 1);
    assert!(page.contains("<li>run 1: <span class=\"exit ok\">exit status 0</span> · <details class=\"stderr\"><summary>stderr (45 bytes)</summary><pre>provision-report: reported Ready (4 attempts)</pre></details></li>"));
    assert_eq!(
        page.matches("href=\"artifacts/provision-report/retry.health.503-burst/\"")
            .count(),
        1
    );
    // Evidence stays with each check.
    assert_eq!(page.matches("<details class=\"evidence\"").count(), 5);

    // A case whose timeline differs from its scenario's keeps its own (nothing lost).
    let mut odd = results.clone();
    odd.agents[0].cases[4].timeline.events.pop();
    let page = html::render(&odd);
    assert_eq!(page.matches("<svg class=\"timeline\"").count(), 2);
}

#[test]
fn a_failed_agent_shows_its_exit_and_the_end_of_its_stderr() {
    let page = html::render(&fixture());
    // The hostile agent: exit status 3, a stderr tail of 9000 bytes, escaped.
    assert!(page.contains("<li>run 1: <span class=\"exit bad\">exit status 3 &lt;script&gt;"));
    assert!(page.contains("<summary>stderr, last 2 lines of 9.0 KB</summary><pre>&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    assert!(page.contains("\u{fffd}\nlast line</pre>"));
    // A stderr of one line and its newline is shown whole, not as "its last line".
    let mut short = fixture();
    let run = &mut short.agents[0].cases[0].timeline.runs;
    run.clear();
    run.push(wirecheck_results::RunEnd {
        exit: "exit status 1".into(),
        exit_code: Some(1),
        stderr_tail: wirecheck_results::RunEnd::tail("no module named azure\n"),
        stderr_bytes: 22,
    });
    let page = html::render(&short);
    let at = page
        .find("no module named azure")
        .expect("the stderr is shown");
    assert!(
        page[..at].ends_with("<summary>stderr (22 bytes)</summary><pre>"),
        "{}",
        &page[at.saturating_sub(120)..at]
    );
}

#[test]
fn reasons_every_skipped_check_shares_are_said_once() {
    let mut results = fixture();
    results.agents.truncate(1);
    let skipped = results.agents[0].cases[4].clone();
    results.agents[0].cases = (0..4)
        .map(|i| {
            let mut case = skipped.clone();
            case.id = format!("sandbox.netns.check.{i}");
            case
        })
        .collect();
    let page = html::render(&results);
    assert_eq!(
        page.matches("needs root for the network namespace").count(),
        1
    );
    assert!(page.contains("<p class=\"reason\"><span class=\"badge v-skipped\">skipped</span> 4 of 4 checks: needs root for the network namespace</p>"));
    // Not run: no timeline drawn for it.
    assert!(!page.contains("<svg class=\"timeline\""));
    assert!(page.contains("· not run"));
}

#[test]
fn timeline_shows_retries_faults_waits_budget_and_exit() {
    let results = fixture();
    let mut one = results.clone();
    one.agents.truncate(1);
    one.agents[0].cases.truncate(1); // the 503 burst
    let page = html::render(&one);
    let svg = &page[page.find("<svg class=\"timeline\"").unwrap()..page.find("</svg>").unwrap()];
    assert_eq!(
        svg.matches("<g class=\"req a-server-error fault\">")
            .count(),
        3
    );
    assert_eq!(svg.matches("<g class=\"req a-ok\">").count(), 2);
    assert_eq!(svg.matches("class=\"fault-mark\"").count(), 3);
    // Three waits between the four health attempts, labelled with their length.
    assert_eq!(svg.matches("<g class=\"wait\">").count(), 3);
    assert!(svg.contains("<title>wait 1.006 s before the next request</title>"));
    assert!(svg.contains(">budget 10.000 s</text>"));
    assert!(svg.contains(">exit 3.150 s</text>"));
    assert!(svg.contains(">503</text>") && svg.contains(">201</text>"));
    // Lanes: one per endpoint, first request first.
    let imds = svg.find(">imds.instance ×1</text>").unwrap();
    let health = svg.find(">wireserver.health.json ×4</text>").unwrap();
    assert!(imds < health);

    // A hang is drawn open until the agent exits.
    let page = html::render(&results);
    assert!(page.contains("<g class=\"req a-transport fault open\"><title>POST /provisioning/health [wireserver.health.json] → hang (injected fault) · at 70 ms, never answered</title>"));

    // One the agent closed ends there instead.
    let mut closed = results.clone();
    let hang = closed
        .agents
        .iter_mut()
        .flat_map(|a| &mut a.cases)
        .flat_map(|c| &mut c.timeline.events)
        .find(|e| e.answer == "hang")
        .unwrap();
    hang.closed_ms = Some(1_070);
    let page = html::render(&closed);
    assert!(page.contains("<g class=\"req a-transport fault\"><title>POST /provisioning/health [wireserver.health.json] → hang (injected fault) · at 70 ms, never answered; the agent closed the connection at 1.070 s (after 1.000 s)</title>"));
    assert!(!page.contains("fault open"));
}

#[test]
fn empty_run_still_renders() {
    let page = html::render(&RunResults::new("2025-01-01T00:00:00Z", "0.1.0"));
    assert!(page.contains("No cases were run."));
    assert!(!page.contains("<svg class=\"timeline\""));
}

#[test]
fn written_to_the_out_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = html::write(dir.path(), &fixture()).unwrap();
    assert_eq!(path, dir.path().join("report.html"));
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        html::render(&fixture())
    );
}

#[test]
fn snapshot() {
    insta::assert_snapshot!("report_html", html::render(&fixture()));
}

/// Every agent-supplied string of the hostile agent's case replaced by `text`.
fn with_text(text: &str) -> RunResults {
    let mut results = fixture();
    let agent = &mut results.agents[1];
    agent.agent = text.to_string();
    let case = &mut agent.cases[0];
    case.id = format!("p.{text}");
    case.title = text.to_string();
    case.scenario = text.to_string();
    case.reason = Some(text.to_string());
    case.evidence[0].note = text.to_string();
    case.evidence[0].excerpt = Some(text.to_string());
    let event = &mut case.timeline.events[0];
    event.endpoint = text.to_string();
    event.label = text.to_string();
    event.answer = text.to_string();
    results
}

proptest::proptest! {
    /// Whatever an agent sends, it adds no markup: the page has exactly the
    /// structure it has for a harmless string of the same length.
    #[test]
    fn agent_text_never_adds_markup(chars in proptest::collection::vec(proptest::prelude::any::<char>(), 0..40)) {
        let text: String = chars.into_iter().collect();
        let harmless = "x".repeat(text.chars().count());
        let page = html::render(&with_text(&text));
        let reference = html::render(&with_text(&harmless));
        for markup in ['<', '>', '"', '\''] {
            proptest::prop_assert_eq!(
                page.matches(markup).count(),
                reference.matches(markup).count(),
                "{:?} count differs for {:?}", markup, text
            );
        }
    }
}

/// Every `href` of the page.
fn hrefs(page: &str) -> Vec<&str> {
    page.split("href=\"")
        .skip(1)
        .map(|rest| &rest[..rest.find('"').unwrap()])
        .collect()
}

/// A link that stays on the page or goes to a folder below `artifacts/`, written in
/// characters no browser reads as a scheme, a host or a way up.
fn stays_home(href: &str) -> bool {
    if let Some(anchor) = href.strip_prefix('#') {
        return anchor
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-=,".contains(c));
    }
    href.starts_with("artifacts/")
        && href
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._~%/".contains(c))
        && !href.split('/').any(|part| part == "..")
}

/// Every case's artifacts folder set to `dir`.
fn with_artifacts(dir: &str) -> RunResults {
    let mut results = fixture();
    for case in results.agents.iter_mut().flat_map(|a| &mut a.cases) {
        case.artifacts = Some(dir.to_string());
    }
    results
}

/// The finding: a crafted `wirecheck merge` part (its results.json) put an off-site link into
/// report.html: `\\host` and ` //host` are links to another host once a browser has read them.
#[test]
fn crafted_artifacts_paths_never_link_off_site() {
    for crafted in [
        "\\\\evil.example/x",
        "/\\evil.example/x",
        "\\/evil.example/x",
        " //evil.example/x",
        "\t//evil.example/x",
        "/\t/evil.example/x",
        "\u{1}//evil.example/x",
        "//evil.example/x",
        "https://evil.example/x",
        "javascript:alert(1)",
        "JaVaScRiPt\t:alert(1)",
        "artifacts/../../../etc",
        "artifacts/a/\\\\evil.example",
        "artifacts//evil.example/x",
        "artifacts/a b/c?d#e",
    ] {
        let page = html::render(&with_artifacts(crafted));
        for href in hrefs(&page) {
            assert!(stays_home(href), "{crafted:?} made the link {href:?}");
        }
        assert!(!page.contains("href=\"javascript"), "{crafted:?}");
    }
    // The runner's own paths are still links, characters a URL cannot hold encoded.
    let page = html::render(&with_artifacts("artifacts/my agent/wire.x?y"));
    assert!(
        page.contains("<a href=\"artifacts/my%20agent/wire.x%3Fy/\">artifacts</a>"),
        "{page}"
    );
}

proptest::proptest! {
    /// Whatever a results.json says a case's artifacts folder is, the page links nowhere else.
    #[test]
    fn no_artifacts_path_links_off_site(
        chars in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::sample::select(vec!['/', '\\', ':', '.', ' ', '\t', '\n', '#', '?', '@', '%', 'a']),
                proptest::prelude::any::<char>(),
            ],
            0..24,
        ),
        prefixed in proptest::prelude::any::<bool>(),
    ) {
        let tail: String = chars.into_iter().collect();
        let dir = if prefixed { format!("artifacts/{tail}") } else { tail };
        let page = html::render(&with_artifacts(&dir));
        for href in hrefs(&page) {
            proptest::prop_assert!(stays_home(href), "{:?} made the link {:?}", dir, href);
        }
    }
}
