//! results.json: round trip, versioning, and the committed JSON Schema
//! matches what is written (a small structural validator, both directions).

use crate::results_support;

use std::collections::BTreeSet;
use std::path::Path;

use results_support::fixture;
use serde_json::Value;
use wirecheck_results::{ResultsError, SCHEMA_VERSION, json};

fn schema() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/results.schema.json");
    let text = std::fs::read_to_string(&path).expect("schema file is committed");
    assert_eq!(text, json::SCHEMA, "json::SCHEMA embeds the committed file");
    serde_json::from_str(&text).expect("schema is valid JSON")
}

#[test]
fn written_file_reads_back_into_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let results = fixture();
    let path = json::write(dir.path().join("nested/out"), &results).unwrap();
    assert_eq!(path, dir.path().join("nested/out/results.json"));
    assert_eq!(json::read(&path).unwrap(), results);

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with("}\n"));
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["schema_version"], SCHEMA_VERSION);
    assert_eq!(value["agents"][0]["cases"][2]["verdict"], "informational");
    // Nothing else (no temporary files) is left in the folder.
    let names: Vec<_> = std::fs::read_dir(dir.path().join("nested/out"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["results.json"]);
}

/// `attempts` is optional: a file without it (every file before retries existed) reads back as
/// cases run once, and keeps its bytes; one with it round-trips.
#[test]
fn attempts_are_optional_and_absent_means_once() {
    let results = fixture();
    let text = json::render(&results).unwrap();
    assert!(!text.contains("\"attempts\""), "{text}");
    let back = json::from_str(&text, Path::new("results.json")).unwrap();
    assert!(
        back.agents[0]
            .cases
            .iter()
            .all(|c| c.attempt_count() == 1 && !c.is_flaky())
    );
    assert_eq!(json::render(&back).unwrap(), text);

    let mut retried = fixture();
    retried.agents[0].cases[0].attempts = Some(wirecheck_results::Attempts {
        count: 3,
        stalled: 0,
        judged: vec![
            wirecheck_results::Verdict::Pass,
            wirecheck_results::Verdict::Fail,
            wirecheck_results::Verdict::Fail,
        ],
        flaky: true,
    });
    let text = json::render(&retried).unwrap();
    let back = json::from_str(&text, Path::new("results.json")).unwrap();
    assert_eq!(back, retried);
    assert!(back.agents[0].cases[0].is_flaky());
    assert_eq!(back.agents[0].cases[0].attempt_count(), 3);
}

#[test]
fn other_schema_versions_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.json");
    let mut value = serde_json::to_value(fixture()).unwrap();
    value["schema_version"] = 2.into();
    std::fs::write(&path, value.to_string()).unwrap();
    let err = json::read(&path).unwrap_err();
    assert!(matches!(
        err,
        ResultsError::SchemaVersion {
            found: 2,
            expected: 1,
            ..
        }
    ));
    let message = err.to_string();
    assert!(message.contains("results.json"), "{message}");
    assert!(message.contains("schema_version is 2"), "{message}");
}

#[test]
fn runs_are_optional_so_files_without_them_keep_their_bytes() {
    // A case whose scenario never ran (or a file from before `runs` existed) has no `runs`
    // key at all: reading and writing it again gives the same bytes.
    let mut results = fixture();
    for case in results.agents.iter_mut().flat_map(|a| &mut a.cases) {
        case.timeline.runs.clear();
    }
    let text = json::render(&results).unwrap();
    assert!(!text.contains("\"runs\""), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.json");
    std::fs::write(&path, &text).unwrap();
    let back = json::read(&path).unwrap();
    assert_eq!(back, results);
    assert_eq!(json::render(&back).unwrap(), text);

    // With runs, they round-trip.
    let full = fixture();
    let text = json::render(&full).unwrap();
    assert!(text.contains("\"stderr_tail\""));
    std::fs::write(&path, &text).unwrap();
    assert_eq!(json::read(&path).unwrap(), full);
}

#[test]
fn broken_files_are_reported_with_their_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = json::read(dir.path().join("nope.json")).unwrap_err();
    assert!(missing.to_string().contains("nope.json"), "{missing}");

    let path = dir.path().join("results.json");
    let mut value = serde_json::to_value(fixture()).unwrap();
    value["agents"][0]["cases"][0]["verdict"] = "great".into();
    std::fs::write(&path, value.to_string()).unwrap();
    let message = json::read(&path).unwrap_err().to_string();
    assert!(message.contains("results.json"), "{message}");
    assert!(message.contains("great"), "{message}");
}

#[test]
fn written_file_validates_against_the_schema() {
    let schema = schema();
    // The fixture fills every field; `interrupted` and `uncontained` are written only for an
    // interrupted run and one the machine would not contain.
    let mut results = fixture();
    results.interrupted = Some("SIGINT".into());
    results.uncontained = Some("this machine refuses part of that".into());
    // `wirecheck_commit`: every run since it exists (the fixture stands for an older file).
    results.wirecheck_commit = Some("0123456789abcdef0123456789abcdef01234567".into());
    // `run` (plan and partition) is written by every run since `wirecheck merge` exists.
    results.run = Some(wirecheck_results::RunInfo {
        id: Some("4242".into()),
        plan: "0123456789abcdef".into(),
        plan_cases: 12,
        partition: wirecheck_results::PartInfo { k: 2, n: 3 },
    });
    // `never_started` only when an agent never got going.
    results.never_started = vec![wirecheck_results::NeverStartedAgent {
        agent: "provision-report".into(),
        message: "agent provision-report never got going".into(),
    }];
    // `unclaimed_flows` only when an agent does not claim a flow the plan has.
    results.unclaimed_flows = vec![wirecheck_results::UnclaimedFlow {
        agent: "provision-report".into(),
        flow: wirecheck_results::NotOffered::Json,
        scenarios: 29,
        cases: 347,
    }];
    // `attempts` only on a case run more than once (its timing unjudged by the machine's stalls).
    results.agents[0].cases[0].attempts = Some(wirecheck_results::Attempts {
        count: 2,
        stalled: 1,
        judged: vec![wirecheck_results::Verdict::Pass],
        flaky: false,
    });
    // `time_scale` only on a case run in agent time.
    results.agents[0].cases[0].timeline.time_scale = Some(20);
    let value = serde_json::to_value(results).unwrap();
    let mut used = BTreeSet::new();
    let errors = validate(&schema, &schema, &value, "$", &mut used);
    assert!(
        errors.is_empty(),
        "results.json does not match the schema:\n{}",
        errors.join("\n")
    );

    // Every property the schema documents occurs in the fixture (which fills
    // every field), so the schema does not describe fields that do not exist.
    let documented = documented_properties(&schema);
    let missing: Vec<_> = documented.difference(&used).collect();
    assert!(
        missing.is_empty(),
        "schema documents fields never written: {missing:?}"
    );
}

#[test]
fn schema_rejects_what_the_model_would_not_write() {
    let schema = schema();
    let mut value = serde_json::to_value(fixture()).unwrap();
    value["agents"][0]["cases"][0]["extra"] = 1.into();
    value["agents"][0]["cases"][1]["verdict"] = "nonstrict".into();
    value["agents"][0]["cases"][2]["timeline"]
        .as_object_mut()
        .unwrap()
        .remove("deadline_ms");
    value["schema_version"] = 9.into();
    let errors = validate(&schema, &schema, &value, "$", &mut BTreeSet::new());
    let text = errors.join("\n");
    assert!(
        text.contains("$.agents[0].cases[0]: unexpected property extra"),
        "{text}"
    );
    assert!(
        text.contains("$.agents[0].cases[1].verdict: \"nonstrict\" not in enum"),
        "{text}"
    );
    assert!(
        text.contains("$.agents[0].cases[2].timeline: missing required deadline_ms"),
        "{text}"
    );
    assert!(
        text.contains("$.schema_version: expected const 1"),
        "{text}"
    );
    assert_eq!(errors.len(), 4, "{text}");
}

/// Validates `value` against the subset of JSON Schema the results schema
/// uses: `$ref` (local), `type` (string or list), `const`, `enum`,
/// `properties`, `required`, `additionalProperties: false`, `items`, `minimum`.
/// Records `<def>.<property>` names it visited in `used`.
fn validate(
    root: &Value,
    schema: &Value,
    value: &Value,
    at: &str,
    used: &mut BTreeSet<String>,
) -> Vec<String> {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.strip_prefix("#/$defs/").expect("local $ref");
        let target = &root["$defs"][name];
        assert!(!target.is_null(), "dangling $ref {reference}");
        return validate_named(root, target, value, at, used, name);
    }
    validate_named(root, schema, value, at, used, "root")
}

fn validate_named(
    root: &Value,
    schema: &Value,
    value: &Value,
    at: &str,
    used: &mut BTreeSet<String>,
    name: &str,
) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(expected) = schema.get("const")
        && value != expected
    {
        errors.push(format!("{at}: expected const {expected}, found {value}"));
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        errors.push(format!("{at}: {value} not in enum"));
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            other => panic!("bad type {other}"),
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        if !types.contains(&actual) {
            errors.push(format!("{at}: expected {types:?}, found {actual}"));
        }
    }
    if let (Some(min), Some(n)) = (
        schema.get("minimum").and_then(Value::as_i64),
        value.as_i64(),
    ) && n < min
    {
        errors.push(format!("{at}: {n} below minimum {min}"));
    }
    if let (Some(properties), Some(object)) = (
        schema.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) {
        for required in schema["required"].as_array().into_iter().flatten() {
            let key = required.as_str().unwrap();
            if !object.contains_key(key) {
                errors.push(format!("{at}: missing required {key}"));
            }
        }
        for (key, child) in object {
            match properties.get(key) {
                Some(child_schema) => {
                    used.insert(format!("{name}.{key}"));
                    errors.extend(validate(
                        root,
                        child_schema,
                        child,
                        &format!("{at}.{key}"),
                        used,
                    ));
                }
                None if schema["additionalProperties"] == Value::Bool(false) => {
                    errors.push(format!("{at}: unexpected property {key}"));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (index, item) in array.iter().enumerate() {
            errors.extend(validate(root, items, item, &format!("{at}[{index}]"), used));
        }
    }
    errors
}

/// `<def>.<property>` for every property the schema lists.
fn documented_properties(schema: &Value) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut add = |def: &str, node: &Value| {
        for key in node["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            names.insert(format!("{def}.{key}"));
        }
    };
    add("root", schema);
    for (def, node) in schema["$defs"].as_object().unwrap() {
        add(def, node);
        // Every documented property is also required: the model always writes it; except
        // those documented as optional (added within a version, written only when there is
        // something to say, so older files keep their bytes).
        let required: BTreeSet<&str> = node["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let listed: BTreeSet<&str> = node["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, v)| {
                !v["description"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("Optional"))
            })
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(
            required, listed,
            "$defs/{def}: required and properties differ"
        );
    }
    names
}
