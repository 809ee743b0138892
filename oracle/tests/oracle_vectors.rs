//! The oracle against the captured real-agent vectors (testdata/vectors, see its README.md):
//! every encoded report, every health request and every KVP pool must decode to exactly what
//! the vectors say. The insta snapshots of the decoded vectors are the oracle's regression net.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;
use wirecheck_oracle::{
    Dialect, Mode, ServedIds, encoded, health,
    kvp::{self, HOST_VALUE_MAX},
};

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors")
}

/// Files with `ext` directly in `dir`, sorted (snapshot order must not depend on the disk).
fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    found.sort();
    found
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn pairs(value: &Value) -> Vec<(String, String)> {
    value
        .as_array()
        .expect("fields is an array")
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_string(),
                pair[1].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn dialect(name: &str) -> Dialect {
    serde_json::from_value(Value::String(name.to_string())).unwrap()
}

fn snapshot_name(parts: &[&str]) -> String {
    parts.join("__").replace(['.', '/'], "_")
}

/// ServedIds of the fake that recorded the vectors (vectors README, "Fixed fake values").
fn vector_served_ids() -> ServedIds {
    ServedIds {
        incarnation: "7".into(),
        container_id: "c0ffee00-1111-2222-3333-444444444444".into(),
        instance_id: "11111111222233334444555555555555.vector-vm".into(),
    }
}

#[test]
fn report_vectors_parse_to_their_fields_in_both_modes() {
    let mut checked = 0;
    for path in files(&vectors().join("reports"), "json") {
        let file = path.file_stem().unwrap().to_string_lossy().into_owned();
        for vector in read_json(&path).as_array().unwrap() {
            let name = vector["name"].as_str().unwrap();
            let input = vector["encoded"].as_str().unwrap();
            let want_fields = pairs(&vector["fields"]);
            let want_dialect = dialect(vector["dialect"].as_str().unwrap());
            for mode in [Mode::Strict, Mode::Lenient] {
                let report = encoded::parse(input, mode)
                    .unwrap_or_else(|e| panic!("{file}/{name} ({mode:?}): {e}"));
                assert_eq!(report.fields, want_fields, "{file}/{name} ({mode:?})");
                assert_eq!(report.dialect, Some(want_dialect), "{file}/{name}");
                assert!(!report.truncated, "{file}/{name}");
                // Real agents' reports are the reference: not even a warning.
                assert!(
                    report.findings.is_empty(),
                    "{file}/{name} ({mode:?}): {:#?}",
                    report.findings
                );
            }
            assert!(encoded::looks_encoded(input));
            let report = encoded::parse(input, Mode::Strict).unwrap();
            insta::assert_yaml_snapshot!(snapshot_name(&["report", &file, name]), report);
            checked += 1;
        }
    }
    assert_eq!(
        checked, 10,
        "the vectors README lists 3 + 3 + 2 reports, and cloud-init 26.2's driver 2"
    );
}

/// The request body, from `body_b64` when present (then authoritative), else `body`.
fn request_body(vector: &Value) -> Vec<u8> {
    match vector.get("body_b64").and_then(Value::as_str) {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("body_b64 is base64"),
        None => vector["body"]
            .as_str()
            .unwrap_or_default()
            .as_bytes()
            .to_vec(),
    }
}

#[test]
fn health_request_vectors_parse_to_their_expected_values() {
    let served = vector_served_ids();
    let mut checked = 0;
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(vectors().join("http"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let agent = dir.file_name().unwrap().to_string_lossy().into_owned();
        for path in files(&dir, "json") {
            let vector = read_json(&path);
            let expected = &vector["expected"];
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let report = match expected["endpoint"].as_str() {
                Some("wireserver.health.xml") => {
                    let report = health::parse_xml(&request_body(&vector), Some(&served));
                    for (got, key) in [
                        (&report.goal_state_incarnation, "goal_state_incarnation"),
                        (&report.container_id, "container_id"),
                        (&report.instance_id, "instance_id"),
                    ] {
                        assert_eq!(
                            got.as_deref(),
                            expected[key].as_str(),
                            "{agent}/{name}: {key}"
                        );
                    }
                    report
                }
                Some("wireserver.health.json") => health::parse_json(&request_body(&vector)),
                _ => continue,
            };
            assert_eq!(
                report.state.as_ref().map(|s| s.as_str()),
                expected["state"].as_str(),
                "{agent}/{name}: state"
            );
            assert_eq!(
                report.substatus.as_ref().map(|s| s.as_str()),
                expected["substatus"].as_str(),
                "{agent}/{name}: substatus"
            );
            assert_eq!(
                report.description.as_deref(),
                expected["description"].as_str(),
                "{agent}/{name}: description"
            );
            match expected.get("report") {
                Some(want) => {
                    let got = report.encoded.as_ref().unwrap_or_else(|| {
                        panic!("{agent}/{name}: description not parsed as a report")
                    });
                    assert_eq!(
                        got.fields,
                        pairs(&want["fields"]),
                        "{agent}/{name}: report fields"
                    );
                    assert_eq!(
                        got.dialect,
                        Some(dialect(want["dialect"].as_str().unwrap())),
                        "{agent}/{name}: report dialect"
                    );
                }
                None => assert_eq!(report.encoded, None, "{agent}/{name}"),
            }
            // The ids echo what the fake served, and the agents' documents are well-formed.
            // WALA's `[ClassName] message` failures carry one note saying so, nothing else.
            let wala_failure =
                agent.starts_with("walinuxagent-") && expected["substatus"] == "ProvisioningFailed";
            let ids: Vec<&str> = report.findings.iter().map(|f| f.id.as_str()).collect();
            if wala_failure {
                assert_eq!(ids, ["health.description.exception"], "{agent}/{name}");
                assert_eq!(report.exception_class.as_deref(), Some("ProvisionError"));
            } else {
                assert!(ids.is_empty(), "{agent}/{name}: {:#?}", report.findings);
            }
            insta::assert_yaml_snapshot!(snapshot_name(&["health", &agent, &name]), report);
            checked += 1;
        }
    }
    assert_eq!(
        checked, 40,
        "2 afterburn + 4 cloud-init 22.4.2 + 2 cloud-init 25.1.4 + 2 cloud-init 26.2 + 11 WALinuxAgent 2.7.3.0 + 11 2.12.0.2 + 8 2.16.0.2 health requests in the vectors"
    );
}

#[test]
fn kvp_pool_vectors_decode_to_their_sidecars() {
    let mut pools = 0;
    for bin in files(&vectors().join("kvp"), "bin") {
        let name = bin.file_stem().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&bin).unwrap();
        let sidecar = read_json(&bin.with_extension("json"));
        let view = kvp::decode_pool(&bytes);

        assert_eq!(view.size, bytes.len());
        assert_eq!(sidecar["record_size"], kvp::RECORD_SIZE);
        let records = sidecar["records"].as_array().unwrap();
        assert_eq!(view.records.len(), records.len(), "{name}: record count");
        for (got, want) in view.records.iter().zip(records) {
            let at = format!("{name} record {}", got.index);
            assert_eq!(got.index as u64, want["index"].as_u64().unwrap(), "{at}");
            assert_eq!(got.offset, got.index * kvp::RECORD_SIZE, "{at}");
            assert_eq!(got.key, want["key"].as_str().unwrap(), "{at}: key");
            assert_eq!(
                got.value_bytes as u64,
                want["value_bytes"].as_u64().unwrap(),
                "{at}"
            );
            assert!(
                want.get("value_b64").is_none(),
                "{at}: the vectors' values are UTF-8"
            );
            let value = want["value"].as_str().unwrap();
            assert!(value.len() <= HOST_VALUE_MAX, "{at}: within the host limit");
            assert_eq!(got.value, value, "{at}: value");
            assert!(got.findings.is_empty(), "{at}: {:#?}", got.findings);
            if let Some(event) = want.get("event") {
                let parsed: Value = serde_json::from_str(&got.value).unwrap();
                assert_eq!(&parsed, event, "{at}: event JSON");
            }
        }
        assert!(view.findings.is_empty(), "{name}: {:#?}", view.findings);

        // Split events: the raw chunks the oracle extracts are the sidecar's, and they rebuild
        // (concatenated in msg_i order, then JSON-unescaped) into the sidecar's message.
        let events = kvp::cloud_init_split_events(&view);
        let want_events = sidecar["split_events"].as_array().unwrap();
        assert_eq!(events.len(), want_events.len(), "{name}: split events");
        for (got, want) in events.iter().zip(want_events) {
            assert_eq!(got.key, want["key"].as_str().unwrap());
            let want_records: Vec<usize> = want["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(got.records, want_records, "{name}: slice order");
            let raw: String = want_records
                .iter()
                .map(|&i| records[i]["msg_chunk_raw"].as_str().unwrap())
                .collect();
            let from_sidecar: String = serde_json::from_str(&format!("\"{raw}\"")).unwrap();
            assert_eq!(from_sidecar, want["message"].as_str().unwrap());
            assert_eq!(
                got.message.as_deref(),
                want["message"].as_str(),
                "{name}: message"
            );
            assert!(got.findings.is_empty(), "{name}: {:#?}", got.findings);
            let invalid = want_records
                .iter()
                .filter(|&&i| records[i]["slice_valid_json"] == Value::Bool(false))
                .count();
            assert_eq!(
                invalid as u64,
                want["invalid_json_slices"].as_u64().unwrap()
            );
        }

        insta::assert_yaml_snapshot!(snapshot_name(&["kvp", &name]), view);
        insta::assert_yaml_snapshot!(snapshot_name(&["kvp", &name, "split-events"]), events);
        pools += 1;
    }
    assert_eq!(pools, 6, "six pool files in the vectors");
}
