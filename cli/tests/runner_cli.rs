//! The `wirecheck` command line: help texts, `list`, and bad input (exit 2 with the file, line
//! and field named).

use crate::runner_support;

use runner_support::{repo, stderr, stdout, wirecheck, write_files};

fn help(args: &[&str]) -> String {
    let out = wirecheck(&repo())
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?} --help: {}",
        stderr(&out)
    );
    stdout(&out)
}

#[test]
fn help_texts() {
    insta::assert_snapshot!("help_wirecheck", help(&[]));
    insta::assert_snapshot!("help_run", help(&["run"]));
    insta::assert_snapshot!("help_list", help(&["list"]));
    insta::assert_snapshot!("help_kvp", help(&["kvp"]));
    insta::assert_snapshot!("help_kvp_dump", help(&["kvp", "dump"]));
    insta::assert_snapshot!("help_report", help(&["report"]));
    insta::assert_snapshot!("help_vectors", help(&["vectors"]));
    insta::assert_snapshot!("help_report_parse", help(&["report", "parse"]));
    insta::assert_snapshot!("help_vectors_check", help(&["vectors", "check"]));
    insta::assert_snapshot!("help_matrix", help(&["matrix"]));
    insta::assert_snapshot!("help_merge", help(&["merge"]));
    insta::assert_snapshot!("help_scenarios_export", help(&["scenarios", "export"]));
    insta::assert_snapshot!("help_prop", help(&["prop"]));
}

#[test]
fn list_shows_every_case_without_running() {
    let out = wirecheck(&repo())
        .args(["list", "--scenarios", "scenarios"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // Ids are unique and hierarchical: <scenario id>.<check id>.
    let lines: Vec<&str> = text.lines().collect();
    let (count_line, case_lines) = lines.split_last().unwrap();
    let ids: Vec<&str> = case_lines
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "duplicate case ids");
    assert!(
        count_line.starts_with(&format!("{} cases in ", ids.len())),
        "{count_line}"
    );
    assert!(text.contains("wire.health.xml.ready.report.state"));
    insta::assert_snapshot!("list", text);
}

#[test]
fn list_with_an_agent_shows_what_its_profile_changes() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            (
                "agents/json-only.toml",
                r#"name = "json-only"
description = "claims the JSON endpoint and Ready only"
capabilities = ["json"]

[commands]
ready = ["true"]

[reactions]
retryable = [503]
transport_errors = "fatal"
status_403 = "fatal"

[[deviation]]
cases = "*.behaviour.budget"
verdict = "unimplemented"
reason = "no retry budget"
"#,
            ),
            (
                "scenarios/a.toml",
                r#"id = "a.xml"
title = "XML ready"
checks = ["report.state", "kvp.report"]
[agent]
action = "ready"
protocol = "xml"
"#,
            ),
            (
                "scenarios/b.toml",
                r#"id = "b.json"
title = "JSON ready"
checks = ["report.state", "kvp.report", "behaviour.budget"]
[agent]
action = "ready"
"#,
            ),
        ],
    );
    let out = wirecheck(dir.path())
        .args([
            "list",
            "--agent",
            "json-only",
            "--agents-dir",
            "agents",
            "--scenarios",
            "scenarios",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!("list_with_agent", stdout(&out));
}

/// Runs `wirecheck args...` in a folder holding `files`; returns (exit code, stderr).
fn bad(files: &[(&str, &str)], args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), files);
    let out = wirecheck(dir.path()).args(args).output().unwrap();
    assert!(
        stdout(&out).is_empty(),
        "nothing on stdout on bad input: {}",
        stdout(&out)
    );
    (out.status.code(), stderr(&out))
}

const GOOD_SCENARIO: &str = r#"id = "ok"
title = "ok"
checks = ["report.state"]
[agent]
action = "ready"
"#;

const GOOD_PROFILE: &str = r#"name = "demo"
description = "demo"
capabilities = ["json"]

[commands]
ready = ["true"]

[reactions]
retryable = [503]
transport_errors = "retry"
status_403 = "fatal"
"#;

fn list_scenario(text: &str) -> String {
    let (code, err) = bad(
        &[("scenarios/bad.toml", text)],
        &["list", "--scenarios", "scenarios"],
    );
    assert_eq!(code, Some(2), "{err}");
    err
}

fn run_profile(text: &str) -> String {
    let (code, err) = bad(
        &[
            ("scenarios/ok.toml", GOOD_SCENARIO),
            ("agents/demo.toml", text),
        ],
        &[
            "run",
            "--agent",
            "demo",
            "--agents-dir",
            "agents",
            "--scenarios",
            "scenarios",
            "--out",
            "out",
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    err
}

#[test]
fn bad_scenarios_name_file_line_and_field() {
    let unknown = list_scenario(&format!("{GOOD_SCENARIO}retries = 3\n"));
    let wrong_type = list_scenario(&GOOD_SCENARIO.replace(
        "action = \"ready\"",
        "action = \"ready\"\nbudget = \"soon\"",
    ));
    let no_check = list_scenario(&GOOD_SCENARIO.replace("report.state", "report.nope"));
    let fake = list_scenario(&format!(
        "{GOOD_SCENARIO}\n[[fake.endpoint]]\nid = \"wireserver.health.json\"\n\n[[fake.endpoint.step]]\nkind = \"explode\"\n"
    ));
    let failure_without_reason = list_scenario(&GOOD_SCENARIO.replace("\"ready\"", "\"failure\""));
    insta::assert_snapshot!(
        "bad_scenarios",
        [unknown, wrong_type, no_check, fake, failure_without_reason].join("")
    );
}

#[test]
fn bad_profiles_name_file_line_and_field() {
    let placeholder =
        run_profile(&GOOD_PROFILE.replace("[\"true\"]", "[\"true\", \"{wireserver}\"]"));
    let unset =
        run_profile(&GOOD_PROFILE.replace("[\"true\"]", "[\"true\", \"--vm-id\", \"{vm_id}\"]"));
    let unknown = run_profile(&GOOD_PROFILE.replace("transport_errors", "transport_error"));
    let missing_program = run_profile(&GOOD_PROFILE.replace(
        "[\"true\"]",
        "[\"no-such-agent-wirecheck-test\", \"ready\"]",
    ));
    // The folder wirecheck runs from differs per machine.
    let bin_dir = runner_support::wirecheck_path()
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap();
    let missing_program = missing_program.replace(&bin_dir.display().to_string(), "<bin_dir>");
    insta::assert_snapshot!(
        "bad_profiles",
        [placeholder, unset, unknown, missing_program].join("")
    );
}

#[test]
fn unknown_agents_and_bad_flags_are_usage_errors() {
    let (code, err) = bad(
        &[
            ("scenarios/ok.toml", GOOD_SCENARIO),
            ("agents/demo.toml", GOOD_PROFILE),
        ],
        &[
            "run",
            "--agent",
            "nobody",
            "--agents-dir",
            "agents",
            "--scenarios",
            "scenarios",
        ],
    );
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no agent profile named \"nobody\" (known in agents: demo)"),
        "{err}"
    );

    let (code, err) = bad(&[], &["run", "--partition", "5/4"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is not K/N"), "{err}");

    let (code, err) = bad(
        &[
            ("scenarios/ok.toml", GOOD_SCENARIO),
            ("agents/demo.toml", GOOD_PROFILE),
        ],
        &[
            "run",
            "--agent",
            "demo",
            "--agents-dir",
            "agents",
            "--scenarios",
            "scenarios",
            "--cases",
            "nothing.*",
        ],
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("no case matches"), "{err}");

    let (code, err) = bad(
        &[("scenarios/README.md", "no toml here")],
        &["list", "--scenarios", "scenarios"],
    );
    assert_eq!(code, Some(2));
    assert!(
        err.contains("scenarios: no scenario files (*.toml)"),
        "{err}"
    );
}

#[test]
fn duplicate_scenario_ids_are_rejected() {
    let (code, err) = bad(
        &[
            ("scenarios/a.toml", GOOD_SCENARIO),
            ("scenarios/b.toml", GOOD_SCENARIO),
        ],
        &["list", "--scenarios", "scenarios"],
    );
    assert_eq!(code, Some(2));
    assert!(
        err.contains("scenarios/b.toml: field `id`: \"ok\" is already used by scenarios/a.toml"),
        "{err}"
    );
}
