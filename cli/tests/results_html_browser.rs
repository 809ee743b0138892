//! report.html in a real browser (headless Chromium): it loads without
//! console errors, its script runs to the end, it shows one timeline per
//! scenario, and the verdict filters work; and the report of a real run
//! (`wirecheck run` with the bundled reporter and a naive agent) shows a person
//! the summary, the problems grouped by cause, a failing case with its timeline,
//! exit status and stderr, and a filter that hides the passes. Screenshots go to
//! the test's output folder, `target/tmp/results_html_browser/`.
//!
//! Chromium is a test dependency (Debian package `chromium`); the test
//! command installs it. Missing Chromium is a failure, not a skip.

// The results crate's fixture (one copy for every suite that renders it).
use crate::results_support;
use crate::runner_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::OnceLock;

use results_support::{case_count, fixture};
use wirecheck_results::{RunResults, Verdict, html, json, problems};

const CHROMIUM: &str = "/usr/bin/chromium";

struct Loaded {
    dom: String,
    stderr: String,
}

impl Loaded {
    /// Value of `name="..."` on the `<html>` element of the dumped DOM.
    fn root_attr(&self, name: &str) -> Option<String> {
        let start = self.dom.find("<html")?;
        let tag = &self.dom[start..start + self.dom[start..].find('>')?];
        let key = format!(" {name}=\"");
        let from = tag.find(&key)? + key.len();
        Some(tag[from..from + tag[from..].find('"')?].to_string())
    }

    /// Console messages at error level, or uncaught exceptions, as Chromium logs them.
    fn console_errors(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.contains("CONSOLE") && (l.contains(":ERROR:") || l.contains("Uncaught")))
            .collect()
    }
}

fn chromium() -> &'static str {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install the Debian package `chromium` (apt-get install chromium); \
         the report.html browser test needs it"
    );
    CHROMIUM
}

fn base_args(profile: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--enable-logging=stderr",
        "--v=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

/// Runs Chromium with `args`, killing it after a generous time limit.
fn run(args: &[String]) -> (String, String) {
    let mut child = Command::new(chromium())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 180 s: {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (out.join().unwrap(), err.join().unwrap())
}

fn load(page: &Path, fragment: &str) -> Loaded {
    let profile = tempfile::tempdir().unwrap();
    let mut args = base_args(profile.path());
    args.push("--dump-dom".into());
    args.push(format!("file://{}{fragment}", page.display()));
    let (dom, stderr) = run(&args);
    assert!(
        dom.contains("<html"),
        "chromium printed no DOM; stderr:\n{stderr}"
    );
    Loaded { dom, stderr }
}

fn written_report(dir: &Path) -> PathBuf {
    html::write(dir, &fixture()).unwrap()
}

#[test]
fn report_loads_without_errors_and_shows_one_timeline_per_case() {
    let dir = tempfile::tempdir().unwrap();
    let page = written_report(dir.path());
    let loaded = load(&page, "");
    assert_eq!(
        loaded.root_attr("data-js").as_deref(),
        Some("ready"),
        "script did not run to the end\n{}",
        loaded.stderr
    );
    assert_eq!(
        loaded.root_attr("data-errors").as_deref(),
        Some("0"),
        "script errors\n{}",
        loaded.stderr
    );
    assert!(
        loaded.console_errors().is_empty(),
        "console errors: {:#?}",
        loaded.console_errors()
    );
    // A row per case, a timeline per scenario that ran (the fixture's two retry-health
    // checks have timelines of their own: both are drawn).
    let page = html::render(&fixture());
    let timelines = page.matches("<svg class=\"timeline\"").count();
    assert_eq!(timelines, 6);
    assert_eq!(
        loaded.root_attr("data-timelines"),
        Some(timelines.to_string())
    );
    assert_eq!(
        loaded.root_attr("data-cases"),
        Some(case_count(&fixture()).to_string())
    );
    // The hostile fixture text stayed text: no element was created from it.
    assert!(!loaded.dom.contains("<img"), "agent text became an element");
    assert!(!loaded.dom.contains("<script>alert"));
    // Nothing filtered by default.
    assert!(
        !loaded.dom.contains("class=\"hidden"),
        "something hidden by default"
    );
}

#[test]
fn verdict_filter_from_the_link_hides_other_cases() {
    let dir = tempfile::tempdir().unwrap();
    let page = written_report(dir.path());
    let loaded = load(&page, "#show=fail");
    assert_eq!(
        loaded.root_attr("data-errors").as_deref(),
        Some("0"),
        "{}",
        loaded.stderr
    );
    assert_eq!(loaded.root_attr("data-js").as_deref(), Some("ready"));
    // Every verdict but fail is hidden by a class on <main>; the counter says what is left.
    let main = &loaded.dom[loaded.dom.find("<main id=\"cases\"").unwrap()..];
    let main_tag = &main[..main.find('>').unwrap()];
    for verdict in [
        "pass",
        "non-strict",
        "informational",
        "unimplemented",
        "skipped",
    ] {
        assert!(main_tag.contains(&format!("hide-{verdict}")), "{main_tag}");
    }
    assert!(!main_tag.contains("hide-fail"), "{main_tag}");
    assert!(
        loaded.dom.contains(&format!(
            "<span id=\"shown\" class=\"count\">1 of {} cases shown</span>",
            case_count(&fixture())
        )),
        "counter"
    );
    // The other agent's section has nothing left to show.
    assert!(
        loaded
            .dom
            .contains("<section class=\"agent hidden\" id=\"agent-1\"")
    );
}

#[test]
fn harness_detects_a_script_error() {
    // Guard against a test that cannot fail: a page that throws must be caught.
    let dir = tempfile::tempdir().unwrap();
    let page = written_report(dir.path());
    let broken = std::fs::read_to_string(&page)
        .unwrap()
        .replace("</body>", "<script>undefinedFunction();</script></body>");
    std::fs::write(&page, broken).unwrap();
    let loaded = load(&page, "");
    assert_eq!(
        loaded.root_attr("data-errors").as_deref(),
        Some("1"),
        "{}",
        loaded.stderr
    );
    assert!(
        !loaded.console_errors().is_empty(),
        "stderr:\n{}",
        loaded.stderr
    );
}

#[test]
fn screenshot_renders() {
    let dir = tempfile::tempdir().unwrap();
    let page = written_report(dir.path());
    let profile = tempfile::tempdir().unwrap();
    let shot = dir.path().join("report.png");
    let mut args = base_args(profile.path());
    args.push(format!("--screenshot={}", shot.display()));
    args.push("--window-size=1280,2400".into());
    args.push(format!("file://{}", page.display()));
    let (_, stderr) = run(&args);
    let png =
        std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}); stderr:\n{stderr}"));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        png.len() > 20_000,
        "suspiciously small screenshot: {} bytes",
        png.len()
    );
    if let Ok(keep) = std::env::var("WIRECHECK_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

#[test]
fn show_all_or_an_unknown_word_in_the_link_hides_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let page = written_report(dir.path());
    for hash in ["#show=all", "#show=passed"] {
        let loaded = load(&page, hash);
        assert_eq!(loaded.root_attr("data-js").as_deref(), Some("ready"));
        assert!(
            !loaded.dom.contains("class=\"hidden") && !loaded.dom.contains(" hidden\""),
            "{hash} hid cases: a user following such a link would see a blank report"
        );
        let main = &loaded.dom[loaded.dom.find("<main id=\"cases\"").unwrap()..];
        assert!(
            !main[..main.find('>').unwrap()].contains("hide-"),
            "{hash} hid a verdict"
        );
    }
}

// ---------------------------------------------------------------------------------------
// The report of a real run.

/// Where the screenshots (and the report they show) are left for people to look at.
fn output_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("results_html_browser")
}

/// A naive agent: one POST of its report as text/plain, no retry; it says so on stderr.
const NAIVE_AGENT: &str = r#"
import os, sys, urllib.request
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
state = "NotReady" if sys.argv[1:] == ["failure"] else "Ready"
sys.stderr.write("naive: posting %s as text/plain\n" % state)
request = urllib.request.Request(url, data=('{"state":"%s"}' % state).encode(), method="POST",
                                 headers={"Content-Type": "text/plain"})
try:
    urllib.request.urlopen(request, timeout=2).read()
except Exception as error:
    sys.stderr.write("naive: gave up: %s\n" % error)
    sys.exit(1)
"#;

struct RealRun {
    out: PathBuf,
    results: RunResults,
}

/// One `wirecheck run` for every test here: the bundled `provision-report` and the naive
/// agent on three scenarios' worth of cases.
fn real_run() -> &'static RealRun {
    static RUN: OnceLock<RealRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let root = output_dir().join("real-run");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let agents = runner_support::script_agent(
            &root,
            "naive",
            "url",
            "\"json\", \"failure\"",
            NAIVE_AGENT,
        );
        let _ = runner_support::provision_report();
        std::fs::copy(
            runner_support::repo().join("conformance/agents/provision-report.toml"),
            agents.join("provision-report.toml"),
        )
        .unwrap();
        let out = root.join("out");
        let output = runner_support::wirecheck(&runner_support::repo())
            .args([
                "run",
                "--quiet",
                "--agent",
                "provision-report",
                "--agent",
                "naive",
            ])
            .arg("--agents-dir")
            .arg(&agents)
            .args([
                "--cases",
                "wire.health.json.*",
                "--cases",
                "retry.status.503.*",
                "--cases",
                "retry.throttle.403.burst.*",
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(1),
            "the naive agent fails cases\n{}\n{}",
            runner_support::stdout(&output),
            runner_support::stderr(&output)
        );
        let results = json::read(out.join("results.json")).unwrap();
        RealRun { out, results }
    })
}

/// What the page shows, measured in the page after its own script ran: text a person can
/// see (`innerText` leaves out what CSS hides and closed `<details>`), what is on the first
/// screen, and which rows are visible.
const PROBE: &str = r##"<script>
(function () {
  var seen = function (el) { return !!el && el.offsetParent !== null; };
  var text = function (sel) { var el = document.querySelector(sel); return el ? el.innerText : null; };
  var top = function (sel) { var el = document.querySelector(sel); return el ? el.getBoundingClientRect().top : null; };
  if (window.PROBE_CLICK) { document.querySelector(window.PROBE_CLICK).click(); }
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.case"));
  var visible = rows.filter(seen);
  var target = window.PROBE_CASE ? document.getElementById(window.PROBE_CASE) : null;
  var scenario = target ? target.closest("section.scenario") : null;
  if (scenario) { scenario.scrollIntoView(); }
  var probe = {
    height: window.innerHeight,
    summary: text("#summary"), summary_top: top("#summary"),
    heatmap: text("#heatmap"), heatmap_top: top("#heatmap"),
    problems: text("#problems"), problems_top: top("#problems"),
    first_problem: text("#problems details.problem summary"),
    shown: text("#shown"),
    visible_rows: visible.length,
    visible_classes: visible.map(function (r) { return r.className; }),
    visible_timelines: Array.prototype.slice.call(document.querySelectorAll("svg.timeline")).filter(seen).length,
    agents_visible: Array.prototype.slice.call(document.querySelectorAll("section.agent")).map(seen),
    target_visible: seen(target),
    target_row: target ? target.innerText : null,
    scenario: scenario ? scenario.innerText : null,
    scenario_timeline: scenario ? (scenario.querySelector("svg.timeline") || {textContent: null}).textContent : null,
    scenario_timeline_height: scenario && scenario.querySelector("svg.timeline") ? scenario.querySelector("svg.timeline").getBoundingClientRect().height : 0,
    scenario_stderr: scenario && scenario.querySelector("details.stderr pre") ? scenario.querySelector("details.stderr pre").textContent : null
  };
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(probe);
  document.body.appendChild(pre);
})();
</script>"##;

/// Loads a copy of the real report with [`PROBE`] (and `setup`, a script run before it)
/// appended, at `fragment`; returns what it measured. With `shot`, also a screenshot of the
/// page into the output folder (`shot_setup` run first: headless Chromium draws a blank
/// screenshot of a scrolled page, so a case further down is shown by itself).
fn probe(setup: &str, fragment: &str, shot: Option<&str>) -> serde_json::Value {
    probe_and_shoot(setup, fragment, shot, "")
}

fn probe_and_shoot(
    setup: &str,
    fragment: &str,
    shot: Option<&str>,
    shot_setup: &str,
) -> serde_json::Value {
    let run = real_run();
    let report = std::fs::read_to_string(run.out.join("report.html")).unwrap();
    let name = format!("probe-{}.html", shot.unwrap_or("dom"));
    let page = run.out.join(&name);
    let probed = report.replace(
        "</body>",
        &format!("<script>{setup}</script>{PROBE}</body>"),
    );
    std::fs::write(&page, probed).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let mut args = base_args(profile.path());
    args.push("--window-size=1280,900".into());
    args.push("--dump-dom".into());
    args.push(format!("file://{}{fragment}", page.display()));
    let (dom, stderr) = run_chromium(&args);
    if let Some(shot) = shot {
        let page = run.out.join(format!("shot-{shot}.html"));
        std::fs::write(
            &page,
            report.replace("</body>", &format!("<script>{shot_setup}</script></body>")),
        )
        .unwrap();
        let profile = tempfile::tempdir().unwrap();
        let file = output_dir().join(format!("{shot}.png"));
        let mut args = base_args(profile.path());
        args.push("--window-size=1280,900".into());
        args.push(format!("--screenshot={}", file.display()));
        args.push(format!("file://{}{fragment}", page.display()));
        let (_, shot_err) = run_chromium(&args);
        let png = std::fs::read(&file)
            .unwrap_or_else(|e| panic!("no screenshot {} ({e}): {shot_err}", file.display()));
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
        assert!(
            png.len() > 20_000,
            "suspiciously small screenshot: {} bytes",
            png.len()
        );
    }
    let loaded = Loaded {
        dom: dom.clone(),
        stderr: stderr.clone(),
    };
    assert_eq!(
        loaded.root_attr("data-errors").as_deref(),
        Some("0"),
        "{stderr}"
    );
    assert!(
        loaded.console_errors().is_empty(),
        "{:#?}",
        loaded.console_errors()
    );
    let start = dom.find("<pre id=\"probe\">").expect("the probe ran") + "<pre id=\"probe\">".len();
    let raw = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    let text = raw
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("probe output {e}: {text}"))
}

fn run_chromium(args: &[String]) -> (String, String) {
    run(args)
}

fn str_of<'a>(probe: &'a serde_json::Value, key: &str) -> &'a str {
    probe[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} missing: {probe}"))
}

#[test]
fn real_report_opens_with_the_summary_the_heatmap_and_the_problems() {
    let run = real_run();
    let counts = run.results.counts();
    let p = probe("", "", Some("first-screen"));
    let height = p["height"].as_f64().unwrap();
    // All three start on the first screen, in that order.
    let (summary, heatmap, problems_top) = (
        p["summary_top"].as_f64().unwrap(),
        p["heatmap_top"].as_f64().unwrap(),
        p["problems_top"].as_f64().unwrap(),
    );
    assert!(
        summary < heatmap && heatmap < problems_top && problems_top < height,
        "{p}"
    );
    // The verdict counts as a person reads them.
    let summary = str_of(&p, "summary");
    for verdict in Verdict::ALL {
        let line = format!("{}\n{}", counts.get(verdict), verdict.as_str());
        assert!(summary.contains(&line), "{line:?} not in {summary:?}");
    }
    assert!(counts.fail > 0, "the naive agent failed nothing: {counts}");
    // The heatmap names both agents and the groups.
    let heatmap = str_of(&p, "heatmap");
    for needle in ["provision-report", "naive", "retry", "wire"] {
        assert!(heatmap.contains(needle), "{needle} not in {heatmap:?}");
    }
    // The most frequent cause first: the naive agent's Content-Type, on every scenario it ran.
    let groups = problems::group(&run.results, &problems::PROBLEM_VERDICTS);
    let first = &groups[0];
    assert_eq!(first.check, "protocol.headers", "{groups:#?}");
    assert!(first.cases.len() >= 3, "{groups:#?}");
    let shown = str_of(&p, "first_problem");
    assert!(
        shown.contains(&format!("×{} protocol.headers", first.cases.len()))
            && shown.contains("text/plain"),
        "{shown:?}"
    );
    let problems_text = str_of(&p, "problems");
    for member in &first.cases {
        assert!(
            problems_text.contains(&format!("naive · {}", member.case.id)),
            "{} not listed: {problems_text:?}",
            member.case.id
        );
    }
    // Every check is a row, and one timeline per scenario that ran, not per check; a case
    // whose timeline is not its scenario's first (its verdict taken from another attempt of a
    // re-run pair) shows its own.
    let cases = counts.total() as u64;
    assert_eq!(p["visible_rows"].as_u64(), Some(cases), "{p}");
    let mut timelines = 0u64;
    for agent in &run.results.agents {
        let mut firsts: Vec<(&str, &wirecheck_results::Timeline)> = Vec::new();
        for c in &agent.cases {
            match firsts.iter().find(|(s, _)| *s == c.scenario) {
                None => {
                    firsts.push((c.scenario.as_str(), &c.timeline));
                    timelines += u64::from(c.timeline.deadline_ms > 0);
                }
                Some((_, first)) => timelines += u64::from(c.timeline != **first),
            }
        }
    }
    assert_eq!(p["visible_timelines"].as_u64(), Some(timelines), "{p}");
    assert!(
        timelines < cases / 5,
        "{timelines} timelines for {cases} cases"
    );
}

#[test]
fn real_report_filter_hides_the_passes() {
    let run = real_run();
    let counts = run.results.counts();
    let p = probe("", "#show=fail,non-strict", Some("problems-only"));
    let wanted = (counts.fail + counts.non_strict) as u64;
    assert_eq!(p["visible_rows"].as_u64(), Some(wanted), "{p}");
    for class in p["visible_classes"].as_array().unwrap() {
        let class = class.as_str().unwrap();
        assert!(
            class.contains("v-fail") || class.contains("v-non-strict"),
            "{class}"
        );
    }
    assert_eq!(
        str_of(&p, "shown"),
        format!("{wanted} of {} cases shown", counts.total())
    );
    // provision-report passed everything: its whole section is gone; the naive one stays.
    assert_eq!(p["agents_visible"], serde_json::json!([false, true]), "{p}");

    // Following a problem's link to a case the filter hides shows everything again.
    let pass = run.results.agents[1]
        .cases
        .iter()
        .position(|c| c.verdict == Verdict::Pass)
        .unwrap();
    let setup = format!(
        "var a = document.createElement('a'); a.id = 'probe-link'; a.href = '#case-1-{pass}'; \
         a.textContent = 'x'; document.body.appendChild(a); window.PROBE_CLICK = '#probe-link';"
    );
    let p = probe(&setup, "#show=fail", None);
    assert_eq!(
        p["visible_rows"].as_u64(),
        Some(counts.total() as u64),
        "{p}"
    );
}

#[test]
fn real_report_shows_a_failing_case_with_its_timeline_exit_and_stderr() {
    let run = real_run();
    let naive = &run.results.agents[1];
    let (index, case) = naive
        .cases
        .iter()
        .enumerate()
        .find(|(_, c)| c.verdict == Verdict::Fail && c.id.starts_with("retry.status.503."))
        .expect("a failing retry case");
    let setup = format!("window.PROBE_CASE = 'case-1-{index}';");
    let alone = format!(
        "var s = document.getElementById('case-1-{index}').closest('section.scenario'); \
         document.getElementById('cases').replaceChildren(s); \
         document.querySelectorAll('body > :not(main):not(script)').forEach(function (e) {{ e.remove(); }});"
    );
    let p = probe_and_shoot(&setup, "", Some("failing-case"), &alone);
    assert_eq!(p["target_visible"], true, "{p}");
    // The row: verdict, check, reason inline.
    let row = str_of(&p, "target_row");
    assert!(row.contains("fail"), "{row:?}");
    assert!(row.contains(case.reason.as_deref().unwrap()), "{row:?}");
    // Its scenario: the timeline (drawn, with the health endpoint's lane), how the agent
    // ended, its stderr one click away, the artifacts link.
    let scenario = str_of(&p, "scenario");
    let exit = &case.timeline.runs[0].exit;
    assert!(scenario.contains(&format!("run 1: {exit}")), "{scenario:?}");
    assert!(scenario.contains("stderr"), "{scenario:?}");
    assert!(scenario.contains("artifacts"), "{scenario:?}");
    assert!(scenario.contains("retry.status.503"), "{scenario:?}");
    assert!(
        p["scenario_timeline_height"].as_f64().unwrap() > 50.0,
        "{p}"
    );
    assert!(
        str_of(&p, "scenario_timeline").contains("wireserver.health.json"),
        "{p}"
    );
    assert!(
        str_of(&p, "scenario_stderr").contains("naive: posting NotReady as text/plain"),
        "{p}"
    );
    // The stderr shown is what the agent wrote (whole file in the artifacts).
    let artifacts = run.out.join(case.artifacts.as_deref().unwrap());
    let written = std::fs::read_to_string(artifacts.join("run-1.stderr")).unwrap();
    assert!(
        written.contains(str_of(&p, "scenario_stderr").trim_end()),
        "{written:?}"
    );
}

/// Times, in the page, a click on "problems only" and then on "all" (each followed by a
/// forced layout), after the page's own script ran.
const FILTER_TIMING: &str = r##"<script>
window.addEventListener("load", function () {
  var t0 = performance.now();
  document.getElementById("show-problems").click();
  document.body.offsetHeight;
  var t1 = performance.now();
  document.getElementById("show-all").click();
  document.body.offsetHeight;
  var t2 = performance.now();
  var pre = document.createElement("pre");
  pre.id = "timing";
  pre.textContent = Math.round(t1 - t0) + " " + Math.round(t2 - t1);
  document.body.appendChild(pre);
});
</script>"##;

/// The limit for one filter click on a report of thousands of cases: a person notices a pause
/// from about a tenth of a second; this allows for a shared machine. Measured on this report:
/// 4-35 ms; with every scenario block rendered (no `content-visibility`), "all" took 0.45-1 s.
const FILTER_LIMIT_MS: u64 = 250;

#[test]
fn a_report_of_thousands_of_cases_filters_without_a_pause() {
    // The real run's agents twenty times over: 3240 cases, 620 scenario blocks.
    let run = real_run();
    let mut big = run.results.clone();
    big.agents = (0..20)
        .flat_map(|i| {
            run.results.agents.iter().map(move |a| {
                let mut a = a.clone();
                a.agent = format!("{}-{i}", a.agent);
                a
            })
        })
        .collect();
    let dir = output_dir().join("big");
    std::fs::create_dir_all(&dir).unwrap();
    let page = html::write(&dir, &big).unwrap();
    let timed = dir.join("timed.html");
    let text = std::fs::read_to_string(&page).unwrap();
    std::fs::write(
        &timed,
        text.replace("</body>", &format!("{FILTER_TIMING}</body>")),
    )
    .unwrap();
    let loaded = load_sized(&timed);
    assert_eq!(
        loaded.root_attr("data-errors").as_deref(),
        Some("0"),
        "{}",
        loaded.stderr
    );
    let start =
        loaded.dom.find("<pre id=\"timing\">").expect("timed") + "<pre id=\"timing\">".len();
    let times: Vec<u64> = loaded.dom[start..start + loaded.dom[start..].find("</pre>").unwrap()]
        .split(' ')
        .map(|t| t.parse().unwrap())
        .collect();
    assert!(
        times.iter().all(|t| *t < FILTER_LIMIT_MS),
        "filter clicks took {times:?} ms (problems only, all) on {} cases",
        big.counts().total()
    );
}

/// [`load`] in a window of a person's size (what is laid out depends on it).
fn load_sized(page: &Path) -> Loaded {
    let profile = tempfile::tempdir().unwrap();
    let mut args = base_args(profile.path());
    args.push("--window-size=1280,900".into());
    args.push("--dump-dom".into());
    args.push(format!("file://{}", page.display()));
    let (dom, stderr) = run(&args);
    Loaded { dom, stderr }
}
