//! `wirecheck prop` end to end: the built binary against the bundled reporter, cloud-init
//! 22.4.2 (scripts/install-agents.sh) and a planted mis-quoting agent.

use crate::runner_support;

use std::path::{Path, PathBuf};

use runner_support::{case, repo, results, stderr, stdout, wirecheck};

fn agents_dir() -> PathBuf {
    repo().join("conformance/agents")
}

/// The failure evidence's smallest input (the excerpt after the "smallest ..." note).
fn smallest_input(case: &serde_json::Value, what: &str) -> serde_json::Value {
    let evidence = case["evidence"].as_array().unwrap();
    let e = evidence
        .iter()
        .find(|e| e["note"].as_str().unwrap().starts_with(what))
        .unwrap_or_else(|| panic!("no evidence {what:?} in {case:#}"));
    serde_json::from_str(e["excerpt"].as_str().unwrap()).unwrap()
}

fn reason_of(input: &serde_json::Value) -> String {
    input["reason"].as_str().unwrap().to_owned()
}

#[test]
fn the_bundled_reporter_passes_256_generated_cases_per_property() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = wirecheck(dir.path())
        .args(["prop", "--quiet", "--cases", "256", "--seed", "16"])
        .args(["--property", "failure.json", "--property", "failure.xml"])
        .args([
            "--property",
            "in-progress.json",
            "--property",
            "in-progress.xml",
        ])
        .args(["--no-regressions", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let r = results(&out);
    for p in [
        "failure.json",
        "failure.xml",
        "in-progress.json",
        "in-progress.xml",
    ] {
        let c = case(&r, "provision-report", &format!("prop.{p}"));
        assert_eq!(c["verdict"], "pass", "{c:#}");
        assert!(
            c["evidence"][0]["note"]
                .as_str()
                .unwrap()
                .starts_with("256 generated input(s) (seed 16)"),
            "{c:#}"
        );
    }
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains("prop.failure.xml"), "{junit}");
    assert!(stderr(&o).contains("seed 16"), "{}", stderr(&o));
}

/// The bundled reporter meets 256 generated fault schedules, 128 on each flow, as its profile's
/// reactions oblige: none failed, none too long to run, and at most a tenth left unjudged (a
/// timing a loaded machine stalled on every attempt).
#[test]
fn the_bundled_reporter_passes_256_generated_schedules() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = wirecheck(dir.path())
        .args(["prop", "--quiet", "--cases", "128", "--seed", "16"])
        .args(["--property", "schedule.json", "--property", "schedule.xml"])
        .args(["--no-regressions", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let r = results(&out);
    for p in ["schedule.json", "schedule.xml"] {
        let c = case(&r, "provision-report", &format!("prop.{p}"));
        assert_eq!(c["verdict"], "pass", "{c:#}");
        let note = c["evidence"][0]["note"].as_str().unwrap();
        assert!(
            note.starts_with("128 generated input(s) (seed 16)"),
            "{c:#}"
        );
        assert!(!note.contains("not run"), "{c:#}");
        assert!(not_judged(note) <= 128 / 10, "{c:#}");
    }
}

/// The inputs a property's note counts as not judged (`, N not judged (...)`), 0 without.
fn not_judged(note: &str) -> usize {
    note.split(", ")
        .find_map(|part| part.split_once(" not judged"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(0)
}

/// XML 1.0 cannot carry U+0001, not even as a reference: the reporter sends U+FFFD, and the
/// checks judge the XML flow by what it can carry (before: report.description and kvp.report
/// failed on every such input, whatever the agent did).
#[test]
fn the_xml_flow_is_judged_by_what_xml_can_carry() {
    let dir = tempfile::tempdir().unwrap();
    for (property, input) in [
        ("in-progress.xml", r#"{"description":"a\u0001"}"#),
        (
            "failure.xml",
            r#"{"reason":"a\u0001b","data":[["k","\u001f"]]}"#,
        ),
        (
            "failure.json",
            r#"{"reason":"a\u0001b","data":[["k","\u001f"]]}"#,
        ),
    ] {
        let out = dir.path().join(property);
        let o = wirecheck(dir.path())
            .args([
                "prop",
                "--quiet",
                "--no-regressions",
                "--property",
                property,
                "--input",
                input,
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{property}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        let r = results(&out);
        let c = case(&r, "provision-report", &format!("prop.{property}"));
        assert_eq!(c["verdict"], "pass", "{c:#}");
        assert!(
            c["evidence"][0]["note"]
                .as_str()
                .unwrap()
                .contains("1 replayed"),
            "{c:#}"
        );
    }
}

/// A profile copy in its own folder, with `edit` applied to its text.
fn profile_copy(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let agents = dir.join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let text = std::fs::read_to_string(agents_dir().join(format!("{name}.toml"))).unwrap();
    std::fs::write(agents.join(format!("{name}.toml")), edit(text)).unwrap();
    agents
}

fn run_cloud_init(dir: &Path, agents: &Path) -> (std::process::Output, serde_json::Value) {
    let out = dir.join("out");
    let o = wirecheck(dir)
        .args([
            "prop",
            "--quiet",
            "--agent",
            "cloud-init",
            "--property",
            "failure.xml",
        ])
        // Shrinking bounded by steps, not by the clock: the smallest input must not depend on
        // how loaded the machine is.
        .args(["--max-shrink-time", "900"])
        .args([
            "--cases",
            "64",
            "--seed",
            "1",
            "--no-regressions",
            "--agents-dir",
        ])
        .arg(agents)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let r = results(&out);
    (o, r)
}

fn has_non_latin1(text: &str) -> bool {
    text.chars().any(|c| u32::from(c) > 0xFF)
}

#[test]
fn cloud_init_22_4_2_non_latin1_limitation_is_found_shrunk_and_declared() {
    let dir = tempfile::tempdir().unwrap();
    let (o, r) = run_cloud_init(dir.path(), &agents_dir());
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let c = case(&r, "cloud-init", "prop.failure.xml");
    assert_eq!(c["verdict"], "non-strict", "{c:#}");
    let reason = c["reason"].as_str().unwrap();
    assert!(
        reason.contains("known limitation (input non-latin-1"),
        "{reason}"
    );
    let input = smallest_input(c, "declared limitation (input non-latin-1");
    let shrunk = reason_of(&input);
    assert!(
        (1..=2).contains(&shrunk.chars().count()) && has_non_latin1(&shrunk),
        "not shrunk to one or two characters beyond Latin-1: {input}"
    );
    // What gave it away: nothing was sent.
    let notes: Vec<&str> = c["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["note"].as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("behaviour.terminal failed")),
        "{notes:#?}"
    );
}

#[test]
fn cloud_init_22_4_2_without_the_declaration_fails_with_the_shrunk_input() {
    let dir = tempfile::tempdir().unwrap();
    let agents = profile_copy(dir.path(), "cloud-init", |text| {
        let start = text
            .find("[[limitation]]\nproperty = \"failure.xml\"\ninput = \"non-latin-1\"")
            .unwrap();
        let end = start + text[start..].find("\n\n").unwrap();
        format!("{}{}", &text[..start], &text[end..])
    });
    let profile = std::fs::read_to_string(agents.join("cloud-init.toml")).unwrap();
    assert!(!profile.contains("\"non-latin-1\"") && profile.contains("\"non-ascii\""));
    let (o, r) = run_cloud_init(dir.path(), &agents);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let c = case(&r, "cloud-init", "prop.failure.xml");
    assert_eq!(c["verdict"], "fail", "{c:#}");
    let input = smallest_input(c, "smallest failing input");
    let shrunk = reason_of(&input);
    assert!(
        (1..=2).contains(&shrunk.chars().count()) && has_non_latin1(&shrunk),
        "{input}"
    );
    // The terminal shows the input and the command that replays it.
    assert!(
        stdout(&o).contains("--property failure.xml --input '{\"reason\":"),
        "{}",
        stdout(&o)
    );
}

fn misquoting_agent(dir: &Path) -> PathBuf {
    let agents = dir.join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/prop_support");
    let profile = std::fs::read_to_string(support.join("misquoting.toml.in"))
        .unwrap()
        .replace(
            "@SCRIPT@",
            &support.join("misquoting_agent.py").display().to_string(),
        );
    std::fs::write(agents.join("misquoting.toml"), profile).unwrap();
    agents
}

#[test]
fn a_planted_misquoting_agent_is_caught_shrunk_persisted_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let agents = misquoting_agent(dir.path());
    let regressions = dir.path().join("regressions.txt");
    let run = |extra: &[&str]| {
        let out = dir.path().join("out");
        let o = wirecheck(dir.path())
            .args([
                "prop",
                "--quiet",
                "--agent",
                "misquoting",
                "--property",
                "failure.json",
            ])
            .args(["--max-shrink-time", "900"])
            .args(["--cases", "64", "--seed", "3", "--agents-dir"])
            .arg(&agents)
            .arg("--regressions")
            .arg(&regressions)
            .args(extra)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let r = results(&out);
        (o, r)
    };
    let (o, r) = run(&[]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let c = case(&r, "misquoting", "prop.failure.json").clone();
    assert_eq!(c["verdict"], "fail", "{c:#}");
    // The quote left undoubled breaks the report's quoting (report.shape) or changes what it
    // says (report.description), depending on where the shrunk input puts it.
    let reason = c["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("report.description failed")
            || reason.starts_with("report.shape failed"),
        "{c:#}"
    );
    let input = smallest_input(&c, "smallest failing input");
    // That character and little else: every text together is at most 3 characters, one a '.
    let texts: String = std::iter::once(reason_of(&input))
        .chain(
            input["data"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| p[1].as_str().unwrap().to_owned()),
        )
        .collect();
    assert!(
        texts.contains('\'') && texts.chars().count() <= 3,
        "{input}"
    );
    assert!(input["data"].as_array().map_or(0, Vec::len) <= 1, "{input}");
    assert!(
        c["artifacts"]
            .as_str()
            .is_some_and(|a| a.ends_with("prop.failure.json")),
        "{c:#}"
    );

    // Persisted, and replayed first (nothing generated after a failure replayed).
    let file = std::fs::read_to_string(&regressions).unwrap();
    assert!(file.contains("failure.json {"), "{file}");
    let (o, r) = run(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let again = case(&r, "misquoting", "prop.failure.json");
    assert!(
        again["evidence"][0]["note"]
            .as_str()
            .unwrap()
            .starts_with("0 generated input(s) (seed 3), 1 replayed"),
        "{again:#}"
    );
    assert_eq!(smallest_input(again, "smallest failing input"), input);

    // The printed replay command runs exactly that input.
    let command = c["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["note"] == "replay exactly this input")
        .unwrap()["excerpt"]
        .as_str()
        .unwrap()
        .to_owned();
    let o = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} --no-regressions --quiet --out {}",
            command.replacen(
                "wirecheck",
                &runner_support::wirecheck_path().display().to_string(),
                1
            ),
            dir.path().join("replay").display()
        ))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{command}: {}{}",
        stdout(&o),
        stderr(&o)
    );
    let r = results(&dir.path().join("replay"));
    let replayed = case(&r, "misquoting", "prop.failure.json");
    assert_eq!(replayed["verdict"], "fail");
    assert_eq!(smallest_input(replayed, "smallest failing input"), input);
}

#[test]
fn bad_input_is_a_usage_error_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let usage = |args: &[&str]| {
        let o = wirecheck(dir.path())
            .arg("prop")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        stderr(&o)
    };
    assert!(usage(&["--property", "nope"]).contains("--property \"nope\": unknown"));
    assert!(usage(&["--input", r#"{"reason":"a"}"#]).contains("exactly one --property"));
    assert!(
        usage(&[
            "--property",
            "failure.json",
            "--input",
            r#"{"reason":"a","data":[["1k","v"]]}"#
        ])
        .contains("\"1k\"")
    );
    assert!(
        usage(&[
            "--property",
            "in-progress.json",
            "--input",
            r#"{"reason":"a"}"#
        ])
        .contains("takes a \"description\"")
    );
    let regressions = dir.path().join("bad.txt");
    std::fs::write(&regressions, "failure.json not-json\n").unwrap();
    let e = usage(&["--regressions", regressions.to_str().unwrap()]);
    assert!(e.contains("bad.txt:1") && e.contains("not an input"), "{e}");
    let agents = profile_copy(dir.path(), "cloud-init", |t| {
        t.replace("input = \"non-ascii\"", "input = \"klingon\"")
    });
    let e = usage(&[
        "--agent",
        "cloud-init",
        "--agents-dir",
        agents.to_str().unwrap(),
    ]);
    assert!(
        e.contains("cloud-init.toml:") && e.contains("klingon"),
        "{e}"
    );
}

/// The printed replay command runs the same agent as the run: an ad-hoc agent's claims too
/// (without them the replay judges checks the run never applied).
#[test]
fn the_replay_command_keeps_an_ad_hoc_agents_claims() {
    let dir = tempfile::tempdir().unwrap();
    let out = wirecheck(&repo())
        .args([
            "prop",
            "--agent-cmd",
            "true {action}",
            "--claims",
            "xml,failure",
        ])
        .args([
            "--property",
            "failure.xml",
            "--cases",
            "1",
            "--max-shrink-time",
            "1",
        ])
        .args(["--jobs", "1", "--no-regressions", "--seed", "1", "--out"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    let replay = all
        .lines()
        .find(|l| l.contains("wirecheck prop --agent-cmd"))
        .unwrap_or_else(|| panic!("no replay command in:\n{all}"));
    assert!(replay.contains("--claims xml,failure"), "{replay}");
}

/// A limitation explains the failures its characters cause, not every failure of an input
/// that holds one: a false `non-ascii` limitation does not hide the planted quoting bug, and
/// the generated search still shrinks it to the quote.
#[test]
fn a_limitation_does_not_hide_a_failure_its_characters_do_not_cause() {
    let dir = tempfile::tempdir().unwrap();
    let agents = misquoting_agent(dir.path());
    let profile = agents.join("misquoting.toml");
    let text = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(
        &profile,
        format!(
            "{text}\n[[limitation]]\nproperty = \"failure.json\"\ninput = \"non-ascii\"\nchecks = \"report.*\"\nverdict = \"non-strict\"\nreason = \"(false) no text beyond ASCII\"\n"
        ),
    )
    .unwrap();
    let prop = |extra: &[&str]| {
        wirecheck(dir.path())
            .args(["prop", "--quiet", "--agent", "misquoting", "--agents-dir"])
            .arg(&agents)
            .args(["--property", "failure.json", "--no-regressions", "--out"])
            .arg(dir.path().join("out"))
            .args(extra)
            .output()
            .unwrap()
    };
    // The quote bug in a reason that also holds an é: a failure, not the limitation.
    let o = prop(&["--input", r#"{"reason":"x'y \u00e9"}"#]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    // An é alone is fine for this agent: the limitation is never confirmed, so it passes.
    let o = prop(&["--input", r#"{"reason":"y \u00e9"}"#]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
}

/// An agents folder with the planted retrying agent, one profile per bug (`retrying-<bug>`).
fn retrying_agents(dir: &Path) -> PathBuf {
    let agents = dir.join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/prop_support");
    let template = std::fs::read_to_string(support.join("retrying.toml.in")).unwrap();
    let script = support.join("retrying_agent.py").display().to_string();
    for bug in [
        "none",
        "third-503",
        "retry-after",
        "throttle-fatal",
        "refetch-once",
        "stale-incarnation",
    ] {
        std::fs::write(
            agents.join(format!("retrying-{bug}.toml")),
            template.replace("@SCRIPT@", &script).replace("@BUG@", bug),
        )
        .unwrap();
    }
    agents
}

/// `wirecheck prop --property <property>` against one retrying agent.
fn prop_schedules(
    dir: &Path,
    agents: &Path,
    bug: &str,
    property: &str,
) -> (std::process::Output, PathBuf) {
    let out = dir.join(format!("out-{bug}"));
    let o = wirecheck(dir)
        .args(["prop", "--quiet", "--agent", &format!("retrying-{bug}")])
        .args(["--property", property, "--cases", "64", "--seed", "29"])
        .args([
            "--max-shrink-time",
            "120",
            "--no-regressions",
            "--agents-dir",
        ])
        .arg(agents)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    (o, out)
}

/// Each planted retry-loop bug is found by generated schedules and shrunk to a schedule of at
/// most three faulted answers that shows it (the refresh bugs on the XML flow, where a 410 asks
/// for the goal state again: the stale incarnation only when the goal state moved on as the 410
/// was given); the shrunk schedule is kept as a scenario file
/// that `wirecheck run --scenarios` replays: failing the planted agent, passing the right one.
#[test]
fn planted_retry_loop_bugs_are_found_and_shrunk_to_three_faults_at_most() {
    let dir = tempfile::tempdir().unwrap();
    let agents = retrying_agents(dir.path());
    let bugs: [(&str, &str, ShowsIt); 5] = [
        ("third-503", "schedule.json", |s| {
            s.as_array().unwrap().iter().filter(|a| is_503(a)).count() >= 3
        }),
        ("retry-after", "schedule.json", |s| {
            s.as_array().unwrap().iter().any(|a| {
                a["retry-after"]["seconds"]
                    .as_u64()
                    .is_some_and(|secs| secs > 3)
            })
        }),
        ("throttle-fatal", "schedule.json", |s| {
            s.as_array().unwrap().iter().any(|a| a == "throttled")
        }),
        ("refetch-once", "schedule.xml", |s| {
            s.as_array()
                .unwrap()
                .iter()
                .filter(|a| a["status"] == 410)
                .count()
                >= 2
        }),
        ("stale-incarnation", "schedule.xml", |s| {
            s.as_array().unwrap().iter().any(|a| a == "moved")
        }),
    ];
    // The five searches mostly wait (the agents sleep): run side by side.
    let runs: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = bugs
            .iter()
            .map(|(bug, property, _)| {
                scope.spawn(|| prop_schedules(dir.path(), &agents, bug, property))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((bug, property, shows_it), (o, out)) in bugs.into_iter().zip(runs) {
        assert_eq!(
            o.status.code(),
            Some(1),
            "{bug}: {}{}",
            stdout(&o),
            stderr(&o)
        );
        let r = results(&out);
        let c = case(&r, &format!("retrying-{bug}"), &format!("prop.{property}")).clone();
        assert_eq!(c["verdict"], "fail", "{bug}: {c:#}");
        let input = smallest_input(&c, "smallest failing input");
        let schedule = &input["schedule"];
        // Faulted answers on every endpoint: the goal state's and IMDS's shrink away.
        let faults = ["schedule", "goalstate", "imds"]
            .iter()
            .filter_map(|key| input[key].as_array())
            .flatten()
            .filter(|a| a.get("delay").is_none())
            .count();
        assert!(faults <= 3, "{bug}: {input}");
        assert!(shows_it(schedule), "{bug}: {input}");
        // The scenario file beside the artifacts replays it with `wirecheck run`.
        let file = out
            .join(c["artifacts"].as_str().unwrap())
            .join("scenario.toml");
        let replay = |agent: &str| {
            wirecheck(dir.path())
                .args(["run", "--quiet", "--agent", agent, "--agents-dir"])
                .arg(&agents)
                .arg("--scenarios")
                .arg(&file)
                .arg("--out")
                .arg(dir.path().join(format!("replay-{agent}")))
                .output()
                .unwrap()
        };
        let planted = replay(&format!("retrying-{bug}"));
        assert_eq!(
            planted.status.code(),
            Some(1),
            "{bug}: {}",
            stdout(&planted)
        );
        let right = replay("retrying-none");
        assert_eq!(right.status.code(), Some(0), "{bug}: {}", stdout(&right));
    }
}

/// Whether a shrunk schedule shows the planted bug.
type ShowsIt = fn(&serde_json::Value) -> bool;

fn is_503(answer: &serde_json::Value) -> bool {
    answer["status"] == 503 || answer["retry-after"]["status"] == 503
}

/// A limitation of one kind of answer covers a failure only when the schedule with those
/// answers made plain passes, the answers after them still met: declaring `retry-after` does
/// not hide the third-503 bug behind a Retry-After at the front (made a normal answer, the
/// report would have gone through before the 503s and "passed").
#[test]
fn a_limitation_of_answers_does_not_hide_a_failure_the_answers_after_them_cause() {
    let dir = tempfile::tempdir().unwrap();
    let agents = retrying_agents(dir.path());
    let declared = std::fs::read_to_string(agents.join("retrying-third-503.toml"))
        .unwrap()
        .replace(
            "name = \"retrying-third-503\"",
            "name = \"retrying-declared\"",
        )
        + "\n[[limitation]]\nproperty = \"schedule.*\"\ninput = \"retry-after\"\nchecks = \"behaviour.*\"\nverdict = \"non-strict\"\nreason = \"a test's false excuse\"\n";
    std::fs::write(agents.join("retrying-declared.toml"), declared).unwrap();
    let out = dir.path().join("out");
    let o = wirecheck(dir.path())
        .args(["prop", "--quiet", "--agent", "retrying-declared"])
        .args(["--property", "schedule.json", "--no-regressions", "--input"])
        .arg(r#"{"schedule":[{"retry-after":{"status":503,"seconds":1}},{"status":503},{"status":503}]}"#)
        .arg("--agents-dir")
        .arg(&agents)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let c = case(&results(&out), "retrying-declared", "prop.schedule.json").clone();
    assert_eq!(c["verdict"], "fail", "{c:#}");
}

/// The same loop without a bug passes 64 generated schedules on each flow.
#[test]
fn the_retrying_agent_without_a_bug_passes_64_schedules_per_flow() {
    let dir = tempfile::tempdir().unwrap();
    let agents = retrying_agents(dir.path());
    let out = dir.path().join("out");
    let o = wirecheck(dir.path())
        .args(["prop", "--quiet", "--agent", "retrying-none"])
        .args(["--property", "schedule.json", "--property", "schedule.xml"])
        .args([
            "--cases",
            "64",
            "--seed",
            "29",
            "--no-regressions",
            "--agents-dir",
        ])
        .arg(&agents)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let r = results(&out);
    for property in ["schedule.json", "schedule.xml"] {
        let c = case(&r, "retrying-none", &format!("prop.{property}")).clone();
        assert_eq!(c["verdict"], "pass", "{c:#}");
        let note = c["evidence"][0]["note"].as_str().unwrap();
        assert!(note.starts_with("64 generated input(s)"), "{c:#}");
        assert!(!note.contains("not run"), "{c:#}");
        assert!(not_judged(note) <= 64 / 10, "{c:#}");
    }
}

/// A failing schedule is kept in the regression file and replayed first on the next run
/// (nothing generated after it fails again), as a failing text input is.
#[test]
fn a_failing_schedule_is_kept_in_the_regression_file_and_replayed_first() {
    let dir = tempfile::tempdir().unwrap();
    let agents = retrying_agents(dir.path());
    let regressions = dir.path().join("regressions.txt");
    let run = |n: usize| {
        let out = dir.path().join(format!("out-{n}"));
        let o = wirecheck(dir.path())
            .args(["prop", "--quiet", "--agent", "retrying-throttle-fatal"])
            .args([
                "--property",
                "schedule.xml",
                "--cases",
                "64",
                "--seed",
                "29",
            ])
            .args(["--max-shrink-time", "120", "--agents-dir"])
            .arg(&agents)
            .arg("--regressions")
            .arg(&regressions)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
        case(
            &results(&out),
            "retrying-throttle-fatal",
            "prop.schedule.xml",
        )
        .clone()
    };
    let first = run(1);
    let input = smallest_input(&first, "smallest failing input");
    let file = std::fs::read_to_string(&regressions).unwrap();
    assert!(
        file.lines().any(|l| l.starts_with("schedule.xml {")
            && serde_json::from_str::<serde_json::Value>(&l["schedule.xml ".len()..]).unwrap()
                == input),
        "{file}"
    );
    let again = run(2);
    let note = again["evidence"][0]["note"].as_str().unwrap();
    assert!(
        note.starts_with("0 generated input(s) (seed 29), 1 replayed"),
        "{again:#}"
    );
    assert_eq!(smallest_input(&again, "smallest failing input"), input);
}
