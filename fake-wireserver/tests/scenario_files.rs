//! Scenario files: the examples load and round-trip; bad files are refused with a message that
//! names the file, the line and the field.

use crate::common;

use fake_wireserver::scenario::{Action, Body, EndPolicy, Preset, TriggerAction};
use fake_wireserver::{Scenario, ScenarioError};

use common::examples_dir;

#[test]
fn every_example_loads_and_round_trips() {
    let mut n = 0;
    for entry in std::fs::read_dir(examples_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        n += 1;
        let scenario = Scenario::from_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            scenario.name.is_some(),
            "{}: give examples a name",
            path.display()
        );
        let again = Scenario::from_toml_str(&scenario.to_toml_string(), &scenario.origin)
            .unwrap_or_else(|e| panic!("{}: re-parse: {e}", path.display()));
        assert_eq!(again, scenario, "{}", path.display());
    }
    assert!(n >= 5, "found {n} examples");
}

#[test]
fn the_contract_example_parses() {
    let s = Scenario::from_toml_str(
        r#"
name = "403 throttling burst then success"
seed = 42

[goalstate]
incarnation = "1"
container_id = "c"
instance_id = "i"

[imds]
vm_id = "v"
pps_type = "None"

[[endpoint]]
id = "wireserver.health.json"
end = "default"

[[endpoint.step]]
kind = "respond"
status = 403
preset = "throttled"
times = 3
probability = 1.0

[[endpoint.step]]
kind = "delay"
seconds = 2.5

[rate_limit]
requests = 5
window = 1.0
endpoints = ["wireserver.*"]

[[trigger]]
after = 5.0
action = "bump-incarnation"
"#,
        "contract.toml",
    )
    .unwrap();
    assert_eq!(s.seed, Some(42));
    assert_eq!(s.endpoints[0].end, EndPolicy::Default);
    assert_eq!(s.endpoints[0].steps[0].times, 3);
    match &s.endpoints[0].steps[0].action {
        Action::Respond(r) => {
            assert_eq!((r.status, r.preset), (Some(403), Some(Preset::Throttled)))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(s.endpoints[0].steps[1].action, Action::Delay { seconds, reply: None } if seconds == 2.5)
    );
    assert_eq!(s.triggers[0].action, TriggerAction::BumpIncarnation);
    assert_eq!(s.rate_limit.as_ref().unwrap().requests, 5);
}

#[test]
fn body_file_is_relative_to_the_scenario_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gs.xml"), "<GoalState/>").unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(
        &file,
        "[[endpoint]]\nid = \"wireserver.goalstate\"\n[[endpoint.step]]\nkind = \"respond\"\nstatus = 200\nbody_file = \"gs.xml\"\n",
    )
    .unwrap();
    let s = Scenario::from_file(&file).unwrap();
    match &s.endpoints[0].steps[0].action {
        Action::Respond(r) => assert_eq!(
            r.body,
            Some(Body::File {
                path: "gs.xml".into(),
                contents: b"<GoalState/>".to_vec()
            })
        ),
        other => panic!("{other:?}"),
    }
}

/// wirecheck's sandbox attach writes a case's [fake] table to the case folder: the files the
/// scenario loaded go with it, bytes unchanged, and nothing is read from where it came from.
#[test]
fn a_self_contained_copy_carries_the_files_it_loaded() {
    let source = tempfile::tempdir().unwrap();
    let binary = [0xff_u8, 0x00, 0xfe, b'<', 0x80];
    std::fs::write(source.path().join("gs.bin"), binary).unwrap();
    std::fs::write(
        source.path().join("instance.json"),
        r#"{"vmId": "from-file"}"#,
    )
    .unwrap();
    let file = source.path().join("s.toml");
    std::fs::write(
        &file,
        "[imds]\ninstance_file = \"instance.json\"\n[[endpoint]]\nid = \"wireserver.goalstate\"\n[[endpoint.step]]\nkind = \"delay\"\nseconds = 0.1\nstatus = 200\nbody_file = \"gs.bin\"\n",
    )
    .unwrap();
    let s = Scenario::from_file(&file).unwrap();
    let case = tempfile::tempdir().unwrap();
    let text = s.to_self_contained_toml(case.path()).unwrap();
    // The originals are gone: the copy must not need them.
    drop(source);
    let copy = case.path().join("fake-scenario.toml");
    std::fs::write(&copy, &text).unwrap();
    let again = Scenario::from_file(&copy).unwrap_or_else(|e| panic!("{e}\n{text}"));
    match &again.endpoints[0].steps[0].action {
        Action::Delay { reply: Some(r), .. } => {
            assert_eq!(r.body.as_ref().map(Body::bytes), Some(&binary[..]))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(again.imds.instance_document, s.imds.instance_document);
}

#[test]
fn a_section_of_a_larger_document_keeps_its_line_numbers() {
    let doc = "title = \"conformance case\"\n[checks]\nx = 1\n\n[fake]\nseed = 3\n[[fake.endpoint]]\nid = \"imds.*\"\n[[fake.endpoint.step]]\nkind = \"sleep\"\n";
    let err = Scenario::from_toml_section(doc, "case.toml", "fake").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "case.toml:10:8: fake.endpoint[1].step[1].kind: unknown variant `sleep`, expected one of {}",
            step_kinds_listed()
        )
    );
    let ok = Scenario::from_toml_section(&doc.replace("sleep", "hang"), "case.toml", "fake")
        .unwrap()
        .unwrap();
    assert_eq!(ok.seed, Some(3));
    assert_eq!(
        Scenario::from_toml_section("a = 1", "x.toml", "fake").unwrap(),
        None
    );
}

fn message(text: &str) -> String {
    match Scenario::from_toml_str(text, "inline.toml") {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_files_name_file_line_and_field() {
    let mut out = String::new();
    let mut files: Vec<_> = std::fs::read_dir("tests/data/scenarios")
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let err = Scenario::from_file(&path).unwrap_err();
        if let ScenarioError::Invalid { line, .. } = &err {
            assert!(*line > 0, "{err}");
        }
        out.push_str(&format!("{err}\n"));
    }
    insta::assert_snapshot!("bad_scenario_files", out);
}

#[test]
fn semantic_errors() {
    let step = |body: &str| {
        format!("[[endpoint]]\nid = \"wireserver.goalstate\"\n[[endpoint.step]]\n{body}\n")
    };
    let cases = [
        step("kind = \"respond\""),
        step("kind = \"respond\"\nstatus = 99"),
        step("kind = \"hang\"\nseconds = 3"),
        step("kind = \"delay\""),
        step("kind = \"delay\"\nseconds = -1"),
        step("kind = \"slow\"\nchunk = 0\ninterval = 1"),
        step("kind = \"slow\"\nchunk = 4"),
        step("kind = \"partial\""),
        step("kind = \"malformed\""),
        step("kind = \"reset\"\ntimes = 0"),
        step("kind = \"close\"\nprobability = 1.5"),
        step("kind = \"respond\"\nstatus = 200\nheaders = [[\"Content-Length\", \"3\"]]"),
        step("kind = \"respond\"\nstatus = 200\nheaders = [[\"Bad Name\", \"3\"]]"),
        step("kind = \"respond\"\nstatus = 200\nbody = \"a\"\nbody_file = \"b\""),
        "[[endpoint]]\nid = \"wireserver.goalstate\"\n".to_owned(),
        "[[endpoint]]\nid = \"wireserver.nothing\"\n[[endpoint.step]]\nkind = \"hang\"\n".to_owned(),
        "[[endpoint]]\nid = \"wire server\"\n[[endpoint.step]]\nkind = \"hang\"\n".to_owned(),
        "[[endpoint]]\nid = \"imds.*\"\nend = \"forever\"\n[[endpoint.step]]\nkind = \"hang\"\n".to_owned(),
        "[rate_limit]\nrequests = 5\n".to_owned(),
        "[rate_limit]\nrequests = 0\nwindow = 1\n".to_owned(),
        "[rate_limit]\nrequests = 1\nwindow = 1\nendpoints = [\"nothing.*\"]\n".to_owned(),
        "[goalstate]\nincarnation = \"abc\"\n[[trigger]]\nafter = 1\naction = \"bump-incarnation\"\n".to_owned(),
        "[[trigger]]\nafter = 1\naction = \"reboot\"\n".to_owned(),
        "[goalstate]\nincarnation = 7\n".to_owned(),
        "[imds]\nvm_id = \"x\"\nflavour = \"y\"\n".to_owned(),
        "[imds]\nvm_id = \"x\"\nrate_limit = 0\n".to_owned(),
        "[imds]\nrate_limit = \"fast\"\n".to_owned(),
        "[imds]\nrate_limit = 2.5\n".to_owned(),
        "name = \"n\"\n[imds]\nrate_limit = 5000\n".to_owned(),
        "seed = -1\n".to_owned(),
        "surprise = true\n".to_owned(),
        "[goalstate]\nincarnation = \"abc\"\n[[endpoint]]\nid = \"wireserver.health.*\"\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"gone\"\nthen = \"bump-incarnation\"\n".to_owned(),
        step("kind = \"hang\"\nthen = \"reboot\""),
    ];
    let out: Vec<String> = cases.iter().map(|c| message(c)).collect();
    insta::assert_snapshot!("semantic_errors", out.join("\n"));
}

/// Issue 13: counts and durations a scenario gives are bounded, with an error naming the file,
/// the line and the field (the plan is counted, never expanded).
#[test]
fn huge_repeat_counts_and_durations_are_clear_errors() {
    let step = |body: &str| {
        format!("[[endpoint]]\nid = \"wireserver.goalstate\"\n[[endpoint.step]]\n{body}\n")
    };
    let cases = [
        (
            step("kind = \"reset\"\ntimes = 4000000000"),
            "step[1].times",
            "1-1000000",
        ),
        (
            step("kind = \"delay\"\nseconds = 1e300"),
            "step[1].seconds",
            "at most 86400",
        ),
        (
            step("kind = \"delay\"\nseconds = inf"),
            "step[1].seconds",
            "at most 86400",
        ),
        (
            step("kind = \"slow\"\nchunk = 1\ninterval = 1e300"),
            "step[1].interval",
            "at most 86400",
        ),
        (
            "[rate_limit]\nrequests = 4000000000\nwindow = 1\n".to_owned(),
            "rate_limit.requests",
            "1-1000",
        ),
        (
            "[rate_limit]\nrequests = 1\nwindow = 1e300\n".to_owned(),
            "rate_limit.window",
            "up to 86400",
        ),
        (
            "[[trigger]]\nafter = 1e300\naction = \"reprovision-available\"\n".to_owned(),
            "trigger[1].after",
            "0 to 86400",
        ),
    ];
    for (text, field, expected) in cases {
        let e = message(&text);
        assert!(
            e.starts_with("inline.toml:") && e.contains(field) && e.contains(expected),
            "{text}\n→ {e}"
        );
    }
    // Too many steps over all plans.
    let many: String = (0..10_001)
        .map(|_| "[[endpoint.step]]\nkind = \"reset\"\n")
        .collect();
    let e = message(&format!(
        "[[endpoint]]\nid = \"wireserver.goalstate\"\n{many}"
    ));
    assert!(e.contains("at most 10000 steps"), "{e}");
    // The maxima themselves are accepted.
    Scenario::from_toml_str(
        &step("kind = \"delay\"\nseconds = 86400.0\ntimes = 1000000"),
        "ok.toml",
    )
    .unwrap();
}

/// `--scenario` names a file the user was given: a FIFO is refused at once (not waited on),
/// a sparse file of gigabytes is refused, not read whole.
#[test]
fn a_scenario_file_that_is_a_fifo_or_huge_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("s.toml");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let e = Scenario::from_file(&fifo).unwrap_err().to_string();
    assert!(e.contains("FIFO"), "{e}");
    let huge = dir.path().join("huge.toml");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(10 << 30)
        .unwrap();
    let e = Scenario::from_file(&huge).unwrap_err().to_string();
    assert!(e.contains("larger than"), "{e}");
}

/// The step and section errors the `semantic_errors` snapshot does not hold, word for word, and
/// which error of several is the one reported (the checks run in a fixed order).
#[test]
fn the_first_error_of_a_step_or_section_is_reported_word_for_word() {
    let step = |body: &str| {
        format!("[[endpoint]]\nid = \"wireserver.goalstate\"\n[[endpoint.step]]\n{body}\n")
    };
    let cases = [
        // A missing chunk is named before a missing interval.
        (
            step("kind = \"slow\""),
            "inline.toml:4:8: endpoint[1].step[1].chunk: required for kind = \"slow\" (bytes per write)",
        ),
        // A reply part without a status, on a kind whose reply is optional.
        (
            step("kind = \"delay\"\nseconds = 1\nbody = \"x\""),
            "inline.toml:4:8: endpoint[1].step[1].status: headers/body need a status or a preset",
        ),
        // A field the kind does not use comes before a bad `times`.
        (
            step("kind = \"hang\"\ntimes = 0\nbytes = \"x\""),
            "inline.toml:6:9: endpoint[1].step[1].bytes: not used by kind = \"hang\"",
        ),
        // `times` before `probability`, both before the reply.
        (
            step("kind = \"respond\"\nprobability = 2\ntimes = 0\nstatus = 99"),
            "inline.toml:6:9: endpoint[1].step[1].times: must be 1-1000000, got 0",
        ),
        // The reply before the kind's own fields.
        (
            step("kind = \"slow\"\nchunk = 0\nstatus = 99"),
            "inline.toml:6:10: endpoint[1].step[1].status: must be an HTTP status 100..=599, got 99",
        ),
        // A later trigger's field is named with its index.
        (
            "[[trigger]]\nafter = 1\naction = \"bump-incarnation\"\n[[trigger]]\nafter = -1\naction = \"bump-incarnation\"\n".to_owned(),
            "inline.toml:4:1: trigger[2].after: must be a number of seconds from 0 to 86400, got -1",
        ),
    ];
    for (text, expected) in &cases {
        assert_eq!(&message(text), expected, "{text}");
    }
}

/// `imds.instance_file` must hold a JSON object; the error names the file and what it is not.
#[test]
fn an_instance_file_that_is_not_a_json_object_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let origin = dir.path().join("s.toml");
    let origin = origin.to_str().unwrap();
    std::fs::write(dir.path().join("text.json"), "not json").unwrap();
    std::fs::write(dir.path().join("list.json"), "[1]").unwrap();
    let error = |file: &str| {
        Scenario::from_toml_str(&format!("[imds]\ninstance_file = \"{file}\"\n"), origin)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        error("text.json"),
        format!(
            "{origin}:1:1: imds.instance_file: \"text.json\" is not a JSON document: expected \
             ident at line 1 column 2"
        )
    );
    assert_eq!(
        error("list.json"),
        format!(
            "{origin}:1:1: imds.instance_file: \"list.json\" must hold a JSON object (the \
             instance document)"
        )
    );
}

/// The step kinds as an error lists them (their spellings are pinned once, in the journal's
/// tests): `` `respond`, `delay`, ... ``.
fn step_kinds_listed() -> String {
    fake_wireserver::AnswerKind::STEP_KINDS
        .map(|k| format!("`{k}`"))
        .join(", ")
}

#[test]
fn step_kinds_are_the_answer_kinds_a_step_can_have() {
    // `throttled` and `default` name answers in the journal, never a step: refused with the
    // step kinds listed (the names come from `AnswerKind`, the list from its step kinds).
    for kind in ["throttled", "default", "Hang", "5"] {
        let doc = format!("[[endpoint]]\nid = \"imds.*\"\n[[endpoint.step]]\nkind = \"{kind}\"\n");
        let err = Scenario::from_toml_str(&doc, "k.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "k.toml:4:8: endpoint[1].step[1].kind: unknown variant `{kind}`, expected one of {}",
                step_kinds_listed()
            )
        );
    }
    // Not a string at all: TOML's own message, as for any enum field.
    let err = Scenario::from_toml_str(
        "[[endpoint]]\nid = \"imds.*\"\n[[endpoint.step]]\nkind = 5\n",
        "k.toml",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "k.toml:4:8: endpoint[1].step[1].kind: wanted string or table"
    );
    // That every step kind parses, and journals as itself, is `rust_api`'s
    // `every_step_constructor_is_the_step_its_toml_parses_to` (a TOML step of each kind).
}
