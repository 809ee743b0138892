//! report.html in a real browser (headless Chromium): it loads without
//! console errors, its script runs to the end, it shows one timeline per
//! case, and the verdict filters work.
//!
//! Chromium is a test dependency (Debian package `chromium`); the test
//! command installs it. Missing Chromium is a failure, not a skip.

mod results_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use conformance::results::html;
use results_support::{case_count, fixture};

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
    let cases = case_count(&fixture()).to_string();
    assert_eq!(loaded.root_attr("data-timelines"), Some(cases.clone()));
    assert_eq!(loaded.root_attr("data-cases"), Some(cases));
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
    let visible = loaded.dom.matches("<article class=\"case v-fail\"").count();
    let hidden = loaded.dom.matches("<article class=\"case v-").count() - visible;
    assert_eq!(visible, 1);
    // Every non-fail case is hidden (class gets "hidden" appended by the script).
    let hidden_articles = loaded
        .dom
        .split("<article ")
        .skip(1)
        .filter(|a| a.split('>').next().unwrap().contains("hidden"))
        .count();
    assert_eq!(hidden_articles, hidden);
    assert_eq!(hidden, case_count(&fixture()) - 1);
    // Matrix: only the row with a failing cell stays; 5 of 6 rows hidden.
    assert_eq!(loaded.dom.matches("<tr class=\"hidden\">").count(), 5);
    // The other agent's section has nothing left to show.
    assert!(
        loaded
            .dom
            .contains("<section class=\"agent hidden\" id=\"agent-1\">")
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
    }
}
