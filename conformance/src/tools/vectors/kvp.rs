//! `kvp/*.bin` + `.json` sidecar: the pool through oracle::kvp (host view,
//! provisioning report, split-event rebuild) against the sidecar.

use std::path::Path;

use serde_json::{Value, json};
use wirecheck_oracle::kvp::{self, HOST_VALUE_MAX, PoolView};

use super::{VectorOutcome, differs, read_json, relative};

pub(super) fn check(dir: &Path, pool_path: &Path) -> VectorOutcome {
    let name = relative(dir, pool_path);
    let sidecar_path = pool_path.with_extension("json");
    let bytes = match std::fs::read(pool_path) {
        Ok(bytes) => bytes,
        Err(e) => return VectorOutcome::new(name, vec![format!("cannot read: {e}")]),
    };
    let sidecar = match read_json(&sidecar_path) {
        Ok(sidecar) => sidecar,
        Err(e) => {
            return VectorOutcome::new(
                name,
                vec![format!("{}: {e}", relative(dir, &sidecar_path))],
            );
        }
    };
    let pool = kvp::decode_pool(&bytes);
    let mut mismatches = Vec::new();
    geometry(&sidecar, &pool, &mut mismatches);
    records(&sidecar, &pool, &mut mismatches);
    split_events(&sidecar, &pool, &mut mismatches);
    let errors: Vec<String> = pool
        .all_findings()
        .filter(|f| f.is_error())
        .map(|f| format!("oracle finding {}: {}", f.id, f.message))
        .collect();
    mismatches.extend(errors);
    VectorOutcome::new(name, mismatches)
}

fn geometry(sidecar: &Value, pool: &PoolView, mismatches: &mut Vec<String>) {
    for (key, ours) in [
        ("record_size", kvp::RECORD_SIZE),
        ("key_size", kvp::KEY_SIZE),
        ("value_size", kvp::VALUE_SIZE),
    ] {
        if !sidecar[key].is_null() && sidecar[key] != json!(ours) {
            mismatches.push(differs(key, &sidecar[key], &json!(ours)));
        }
    }
    let count = sidecar["records"].as_array().map_or(0, Vec::len);
    if pool.records.len() != count {
        mismatches.push(differs(
            "record count",
            &json!(count),
            &json!(pool.records.len()),
        ));
    }
    if pool.size != count * kvp::RECORD_SIZE {
        mismatches.push(differs(
            "pool size",
            &json!(count * kvp::RECORD_SIZE),
            &json!(pool.size),
        ));
    }
}

fn records(sidecar: &Value, pool: &PoolView, mismatches: &mut Vec<String>) {
    let Some(expected) = sidecar["records"].as_array() else {
        mismatches.push("sidecar: missing list `records`".into());
        return;
    };
    for (position, want) in expected.iter().enumerate() {
        let index = want["index"].as_u64().map_or(position, |i| i as usize);
        let Some(got) = pool.records.get(index) else {
            mismatches.push(format!("record {index}: not in the pool"));
            continue;
        };
        let at = |field: &str| format!("record {index} {field}");
        if want["key"] != json!(got.key) {
            mismatches.push(differs(&at("key"), &want["key"], &json!(got.key)));
        }
        if want["value_bytes"] != json!(got.value_bytes) {
            mismatches.push(differs(
                &at("value_bytes"),
                &want["value_bytes"],
                &json!(got.value_bytes),
            ));
        }
        // The sidecar has the whole value; the host sees the first 1022 bytes.
        if let Some(value) = want["value"].as_str() {
            let bytes = value.as_bytes();
            let host = String::from_utf8_lossy(&bytes[..bytes.len().min(HOST_VALUE_MAX)]);
            if host != got.value {
                mismatches.push(differs(
                    &at("value (host view)"),
                    &json!(host),
                    &json!(got.value),
                ));
            }
        }
        if !want["event"].is_null() {
            match serde_json::from_str::<Value>(&got.value) {
                Ok(event) if event == want["event"] => {}
                Ok(event) => mismatches.push(differs(&at("event"), &want["event"], &event)),
                Err(e) => {
                    mismatches.push(format!("{}: the host view is not JSON: {e}", at("event")))
                }
            }
        }
        if let Some(valid) = want["slice_valid_json"].as_bool() {
            let parses = serde_json::from_str::<Value>(&got.value).is_ok();
            if parses != valid {
                mismatches.push(differs(
                    &at("slice_valid_json"),
                    &json!(valid),
                    &json!(parses),
                ));
            }
        }
        if !want["report"].is_null() {
            let parsed = pool
                .provisioning_report
                .as_ref()
                .filter(|(i, _)| *i == index)
                .map(|(_, report)| json!({"dialect": report.dialect, "fields": report.fields}));
            match parsed {
                Some(parsed) => {
                    for key in ["dialect", "fields"] {
                        if !want["report"][key].is_null() && want["report"][key] != parsed[key] {
                            mismatches.push(differs(
                                &at(&format!("report {key}")),
                                &want["report"][key],
                                &parsed[key],
                            ));
                        }
                    }
                }
                None => mismatches.push(format!(
                    "{}: the sidecar has a report, the oracle parsed no PROVISIONING_REPORT here",
                    at("report")
                )),
            }
        }
    }
}

fn split_events(sidecar: &Value, pool: &PoolView, mismatches: &mut Vec<String>) {
    let expected = sidecar["split_events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let rebuilt = kvp::cloud_init_split_events(pool);
    if rebuilt.len() != expected.len() {
        mismatches.push(differs(
            "split event count",
            &json!(expected.len()),
            &json!(rebuilt.len()),
        ));
    }
    for want in &expected {
        let Some(event) = rebuilt.iter().find(|e| want["key"] == json!(e.key)) else {
            mismatches.push(format!(
                "split event {}: not rebuilt by the oracle",
                want["key"]
            ));
            continue;
        };
        let at = |field: &str| format!("split event {} {field}", event.key);
        if want["records"] != json!(event.records) {
            mismatches.push(differs(
                &at("records"),
                &want["records"],
                &json!(event.records),
            ));
        }
        if want["message"] != json!(event.message) {
            mismatches.push(differs(
                &at("message"),
                &want["message"],
                &json!(event.message),
            ));
        }
        if let Some(invalid) = want["invalid_json_slices"].as_u64() {
            let count = event
                .records
                .iter()
                .filter(|&&i| serde_json::from_str::<Value>(&pool.records[i].value).is_err())
                .count() as u64;
            if count != invalid {
                mismatches.push(differs(
                    &at("invalid_json_slices"),
                    &json!(invalid),
                    &json!(count),
                ));
            }
        }
        for finding in event.findings.iter().filter(|f| f.is_error()) {
            mismatches.push(format!(
                "{}: {} {}",
                at("rebuild"),
                finding.id,
                finding.message
            ));
        }
    }
}
