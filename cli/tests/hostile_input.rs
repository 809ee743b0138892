//! Issue 13, "every parser of untrusted input bounded", as `wirecheck` users meet it: scenario
//! files and profiles from others, and agents whose text reaches the terminal. Each runs the
//! binary: the findings were panics, aborts and raw escapes in the process's own output.

use crate::runner_support;

use std::path::Path;

use runner_support::{results, stderr, stdout, wirecheck, write_files};

const SCENARIO: &str = r#"id = "ok"
title = "ok"
checks = ["report.state"]
[agent]
action = "ready"
"#;

const PROFILE: &str = r#"name = "demo"
description = "demo"
capabilities = ["json"]

[commands]
ready = ["true"]

[reactions]
retryable = [503]
transport_errors = "retry"
status_403 = "fatal"
"#;

/// `wirecheck run` of agent `demo` in a folder holding `files`.
fn run(dir: &Path, files: &[(&str, &str)]) -> std::process::Output {
    write_files(dir, files);
    wirecheck(dir)
        .args([
            "run",
            "--agent",
            "demo",
            "--agents-dir",
            "agents",
            "--scenarios",
            "scenarios",
            "--out",
            "out",
        ])
        .output()
        .unwrap()
}

/// A refused input: exit 2, an error naming `place` (file:line) and `field`, no panic, no
/// results (so nothing is scored as the agent's failure).
fn refused(files: &[(&str, &str)], place: &str, field: &str, expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), files);
    let err: String = stderr(&out).chars().take(3000).collect();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains(place) && err.contains(&format!("field `{field}`")) && err.contains(expected),
        "expected {place} / {field} / {expected}: {err}"
    );
    assert!(err.len() < 2000, "the error echoes the whole input: {err}");
    assert!(
        !dir.path().join("out/results.json").exists(),
        "a refused scenario must not be run and scored"
    );
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

#[test]
fn deadline_1e300_is_a_clear_error_not_the_agents_failure() {
    let scenario = SCENARIO.replace("action = \"ready\"", "action = \"ready\"\ndeadline = 1e300");
    refused(
        &[
            ("scenarios/ok.toml", &scenario),
            ("agents/demo.toml", PROFILE),
        ],
        "scenarios/ok.toml:6:",
        "agent.deadline",
        "up to 86400",
    );
    for field in ["budget", "retry_interval", "request_timeout"] {
        let scenario = SCENARIO.replace(
            "action = \"ready\"",
            &format!("action = \"ready\"\n{field} = inf"),
        );
        refused(
            &[
                ("scenarios/ok.toml", &scenario),
                ("agents/demo.toml", PROFILE),
            ],
            "scenarios/ok.toml:6:",
            &format!("agent.{field}"),
            "up to 86400",
        );
    }
}

#[test]
fn profile_durations_and_rates_are_bounded() {
    for (line, field, expected) in [
        ("budget = 1e300", "reactions.budget", "up to 86400"),
        (
            "request_timeout = 1e300",
            "reactions.request_timeout",
            "up to 86400",
        ),
        (
            "retry_interval_min = 1e300",
            "reactions.retry_interval_min",
            "up to 86400",
        ),
        ("max_rate = 1e300", "reactions.max_rate", "up to 10000"),
    ] {
        let profile = format!("{PROFILE}{line}\n");
        refused(
            &[
                ("scenarios/ok.toml", SCENARIO),
                ("agents/demo.toml", &profile),
            ],
            "agents/demo.toml:12:",
            field,
            expected,
        );
    }
}

#[test]
fn huge_repeat_is_a_clear_error_not_an_abort() {
    let scenario = r#"id = "ok"
title = "ok"
checks = ["report.state"]
[agent]
[[agent.run]]
action = "in-progress"
description = { text = "x", repeat = "ab", times = 4000000000 }
[[agent.run]]
action = "ready"
"#;
    refused(
        &[
            ("scenarios/ok.toml", scenario),
            ("agents/demo.toml", PROFILE),
        ],
        "scenarios/ok.toml:7:",
        "agent.run[1].description",
        "over the 1048576-byte limit",
    );
}

#[test]
fn glob_of_200000_stars_is_a_clear_error_not_a_panic() {
    let stars = "*".repeat(200_000);
    // A scenario's `checks`.
    let scenario = SCENARIO.replace("\"report.state\"", &format!("\"{stars}\""));
    refused(
        &[
            ("scenarios/ok.toml", &scenario),
            ("agents/demo.toml", PROFILE),
        ],
        "scenarios/ok.toml:3:",
        "checks[1]",
        "longer than 1024 bytes",
    );
    // A profile's deviation.
    let profile = format!(
        "{PROFILE}\n[[deviation]]\ncases = \"{stars}\"\nverdict = \"non-strict\"\nreason = \"r\"\n"
    );
    refused(
        &[
            ("scenarios/ok.toml", SCENARIO),
            ("agents/demo.toml", &profile),
        ],
        "agents/demo.toml:14:",
        "deviation[1].cases",
        "longer than 1024 bytes",
    );
    // The `[fake]` table's endpoint glob (parsed by the fake's scenario reader).
    let scenario = format!(
        "{SCENARIO}[[fake.endpoint]]\nid = \"{stars}\"\n[[fake.endpoint.step]]\nkind = \"hang\"\n"
    );
    refused(
        &[
            ("scenarios/ok.toml", &scenario),
            ("agents/demo.toml", PROFILE),
        ],
        "scenarios/ok.toml:7:",
        "fake.endpoint[1].id",
        "at most 256 characters and 32 wildcards",
    );
    // `--cases` on the command line (an argument is at most 128 KiB, so 100,000 here).
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            ("scenarios/ok.toml", SCENARIO),
            ("agents/demo.toml", PROFILE),
        ],
    );
    let out = wirecheck(dir.path())
        .args([
            "run",
            "--agent",
            "demo",
            "--agents-dir",
            "agents",
            "--scenarios",
            "scenarios",
            "--out",
            "out",
            "--cases",
        ])
        .arg("*".repeat(100_000))
        .output()
        .unwrap();
    let err: String = stderr(&out).chars().take(3000).collect();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--cases") && err.contains("longer than 1024 bytes"),
        "{err}"
    );
    assert!(!err.contains("panicked") && err.len() < 2000, "{err}");
}

/// The agent's own text (here its report's state, which report.state quotes in its reason)
/// holds ESC and OSC sequences; the summary on the terminal shows them escaped, while
/// results.json keeps the exact text and junit.xml/report.html stay valid.
#[test]
fn terminal_escapes_from_the_agent_are_not_printed_raw() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hostile-agent.py");
    std::fs::write(
        &script,
        r#"import sys, urllib.request
body = r'{"state":"Ready\u001b[2J\u001b]0;owned\u0007\u009b1m"}'
req = urllib.request.Request(sys.argv[1] + "/provisioning/health", data=body.encode(),
                             headers={"Content-Type": "application/json"}, method="POST")
urllib.request.urlopen(req, timeout=5).read()
"#,
    )
    .unwrap();
    let profile = PROFILE.replace(
        "ready = [\"true\"]",
        &format!(
            "ready = [\"/usr/bin/python3\", {:?}, \"{{wireserver_url}}\"]",
            script.display().to_string()
        ),
    );
    let out = run(
        dir.path(),
        &[
            ("scenarios/ok.toml", SCENARIO),
            ("agents/demo.toml", &profile),
        ],
    );
    let (so, se) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{so}\n{se}");
    for text in [&so, &se] {
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\u{9b}']),
            "raw control characters on the terminal: {text:?}"
        );
    }
    assert!(
        so.contains("FAIL demo ok.report.state:")
            && so.contains("got Ready\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\u{9b}1m"),
        "{so}"
    );
    // The serialized results keep the exact text.
    let r = results(&dir.path().join("out"));
    let reason = runner_support::case(&r, "demo", "ok.report.state")["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        reason.contains("Ready\u{1b}[2J\u{1b}]0;owned\u{7}"),
        "{reason:?}"
    );
    // XML 1.0 cannot hold ESC or BEL even as references; quick-junit drops them, and the
    // HTML report replaces them.
    for file in ["junit.xml", "report.html"] {
        let text = std::fs::read_to_string(dir.path().join("out").join(file)).unwrap();
        assert!(
            !text.contains(['\u{1b}', '\u{7}']),
            "{file} holds raw control characters"
        );
    }
    let junit = std::fs::read_to_string(dir.path().join("out/junit.xml")).unwrap();
    quick_junit::Report::deserialize_from_str(&junit).expect("junit.xml parses");
}

/// Scenario and profile files come from others, and a pool to inspect off a VM: a sparse file
/// of gigabytes or a FIFO under a `.toml` name is refused with the file named, never read
/// whole (or waited on).
#[test]
fn huge_or_special_input_files_are_refused_not_read_whole() {
    // A scenario of 10 GiB (sparse: it costs no disk).
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            ("agents/demo.toml", PROFILE),
            ("scenarios/ok.toml", SCENARIO),
        ],
    );
    let huge = std::fs::File::create(dir.path().join("scenarios/huge.toml")).unwrap();
    huge.set_len(10 << 30).unwrap();
    let started = std::time::Instant::now();
    let out = run(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("huge.toml") && stderr(&out).contains("larger than"),
        "{}",
        stderr(&out)
    );
    assert!(
        started.elapsed().as_secs() < 20,
        "took {:?}",
        started.elapsed()
    );

    // A profile that is a FIFO: refused at once, not waited on.
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &[("scenarios/ok.toml", SCENARIO)]);
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    let fifo = dir.path().join("agents/demo.toml");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = run(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("FIFO"), "{}", stderr(&out));
    assert!(
        started.elapsed().as_secs() < 20,
        "took {:?}",
        started.elapsed()
    );

    // `wirecheck kvp dump` of a FIFO, and of a pool over its cap.
    let out = wirecheck(dir.path())
        .args(["kvp", "dump"])
        .arg(&fifo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("FIFO"), "{}", stderr(&out));
    let big = dir.path().join("big_pool");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(8 << 30)
        .unwrap();
    let out = wirecheck(dir.path())
        .args(["kvp", "dump"])
        .arg(&big)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("larger than"), "{}", stderr(&out));
}

/// The finding: a scenario reason over 128 KiB (Linux's limit on one argument or environment
/// variable) was not refused: the agent could not be started, and that was scored as the
/// agent's failure. It is refused when the scenario loads, naming the file, line, field and
/// the limit.
/// The demo profile, claiming failure reports too (its failure command prints the reason).
fn failure_profile(command: &str) -> String {
    PROFILE
        .replace("[\"json\"]", "[\"json\", \"failure\"]")
        .replace(
            "ready = [\"true\"]",
            &format!("ready = [\"true\"]\n{command}"),
        )
}

#[test]
fn a_scenario_reason_over_128_kib_is_refused_at_load_not_the_agents_failure() {
    let profile = failure_profile("failure = [\"echo\", \"{reason}\"]");
    let over = "{ text = \"x\", repeat = \"abcd\", times = 50000 }";
    let failure = format!(
        "id = \"ok\"\ntitle = \"ok\"\nchecks = [\"report.state\"]\n[agent]\naction = \"failure\"\nreason = {over}\n"
    );
    refused(
        &[
            ("scenarios/ok.toml", &failure),
            ("agents/demo.toml", &profile),
        ],
        "scenarios/ok.toml:6:",
        "agent.reason",
        "200001 bytes, over the 122880-byte limit",
    );
    let in_progress = format!(
        "id = \"ok\"\ntitle = \"ok\"\nchecks = [\"report.state\"]\n[agent]\n[[agent.run]]\naction = \"in-progress\"\ndescription = {over}\n[[agent.run]]\naction = \"ready\"\n"
    );
    refused(
        &[
            ("scenarios/ok.toml", &in_progress),
            ("agents/demo.toml", &profile),
        ],
        "scenarios/ok.toml:7:",
        "agent.run[1].description",
        "over the 122880-byte limit",
    );
    // Items small one by one, too large together ({data} is one environment variable).
    let item = format!("\"k={}\"", "v".repeat(60_000));
    let data = format!(
        "id = \"ok\"\ntitle = \"ok\"\nchecks = [\"report.state\"]\n[agent]\naction = \"failure\"\nreason = \"r\"\ndata = [{item}, {item}, {item}]\n"
    );
    refused(
        &[("scenarios/ok.toml", &data), ("agents/demo.toml", &profile)],
        "scenarios/ok.toml:7:",
        "agent.data",
        "over the 122880-byte limit",
    );
}

/// Just under the limit still runs: the bound is the kernel's, not a guess.
#[test]
fn a_scenario_reason_just_under_the_limit_reaches_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let reason = format!(
        "{{ text = \"\", repeat = \"a\", times = {} }}",
        conformance::scenario::MAX_AGENT_TEXT
    );
    let scenario = format!(
        "id = \"ok\"\ntitle = \"ok\"\nchecks = [\"behaviour.exit\"]\n[agent]\naction = \"failure\"\nreason = {reason}\n"
    );
    let profile = failure_profile(
        "failure = [\"sh\", \"-c\", \"test ${{#1}} -eq $((120 * 1024)) && test ${{#WIRECHECK_CASE_REASON}} -eq ${{#1}}\", \"sh\", \"{reason}\"]",
    );
    let out = run(
        dir.path(),
        &[
            ("scenarios/ok.toml", &scenario),
            ("agents/demo.toml", &profile),
        ],
    );
    let r = results(&dir.path().join("out"));
    let case = &r["agents"][0]["cases"][0];
    assert_eq!(
        case["timeline"]["runs"][0]["exit_code"],
        0,
        "{case}\n{}",
        stderr(&out)
    );
}
