//! report.html: self-contained, escaped, deterministic; snapshot of a small fixture.

mod results_support;

use conformance::results::{RunResults, html};
use results_support::{HOSTILE, case_count, fixture};

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
fn matrix_filters_and_one_timeline_per_case() {
    let results = fixture();
    let page = html::render(&results);
    assert_eq!(
        page.matches("<svg class=\"timeline\"").count(),
        case_count(&results)
    );
    assert_eq!(
        page.matches("<article class=\"case").count(),
        case_count(&results)
    );
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
    // Matrix: 6 distinct case ids (one shared by both agents), 12 cells, 7 cases run.
    assert_eq!(page.matches("<tr><th scope=\"row\">").count(), 6);
    assert_eq!(page.matches("<td class=\"not-run\">").count(), 5);
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
