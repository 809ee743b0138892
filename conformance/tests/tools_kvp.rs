//! `wirecheck kvp dump`: the vector pools as the host sees them (snapshots),
//! JSON form, exit codes, and errors that name the file.

use std::path::{Path, PathBuf};

use conformance::tools::{EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, kvp_dump};
use serde_json::Value;
use wirecheck_oracle::kvp;

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors")
}

/// Runs the dump from the vectors folder so the file name in the output is stable.
fn dump(name: &str, json: bool) -> (String, i32) {
    let path = vectors().join("kvp").join(name);
    let out = kvp_dump(&path, json).unwrap();
    let shown = path.display().to_string();
    (
        out.stdout.replace(&shown, &format!("kvp/{name}")),
        out.exit_code,
    )
}

#[test]
fn events_pool_human() {
    let (text, code) = dump("cloud-init-22.4.2-events.bin", false);
    assert_eq!(code, EXIT_OK, "{text}");
    assert!(
        text.starts_with(
            "kvp/cloud-init-22.4.2-events.bin: 20480 bytes, 8 records of 2560 bytes\n"
        )
    );
    insta::assert_snapshot!("kvp_dump_events", text);
}

#[test]
fn split_pool_human_shows_the_rebuilt_event() {
    let (text, code) = dump("cloud-init-22.4.2-split.bin", false);
    assert_eq!(code, EXIT_OK, "{text}");
    assert!(text.contains("split event CLOUD_INIT|1795962378|diagnostic|diagnostic message|1aabfdc2-575d-4414-93ff-1f02bfc11d5f (records 0, 1, 2, 3, 4)"));
    assert!(text.contains("  | line 059: \"quoted\" back\\slash tab\\t é€ 😀\n"));
    insta::assert_snapshot!("kvp_dump_split", text);
}

#[test]
fn json_form_matches_the_sidecar() {
    for name in ["cloud-init-22.4.2-events", "cloud-init-22.4.2-split"] {
        let (text, code) = dump(&format!("{name}.bin"), true);
        assert_eq!(code, EXIT_OK);
        let dump: Value = serde_json::from_str(&text).unwrap();
        let sidecar: Value = serde_json::from_str(
            &std::fs::read_to_string(vectors().join(format!("kvp/{name}.json"))).unwrap(),
        )
        .unwrap();
        let records = dump["records"].as_array().unwrap();
        assert_eq!(records.len(), sidecar["records"].as_array().unwrap().len());
        for (mine, theirs) in records.iter().zip(sidecar["records"].as_array().unwrap()) {
            assert_eq!(mine["index"], theirs["index"]);
            assert_eq!(mine["key"], theirs["key"]);
            assert_eq!(mine["value_bytes"], theirs["value_bytes"]);
            assert_eq!(mine["value"], theirs["value"]);
        }
        let split = dump["split_events"].as_array().unwrap();
        let expected = sidecar["split_events"].as_array().unwrap();
        assert_eq!(split.len(), expected.len());
        for (mine, theirs) in split.iter().zip(expected) {
            assert_eq!(mine["message"], theirs["message"]);
            assert_eq!(mine["records"], theirs["records"]);
        }
        assert_eq!(dump["file"], format!("kvp/{name}.bin"));
    }
}

#[test]
fn error_findings_exit_1_and_show_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    let mut pool = kvp::encode_record(
        "PROVISIONING_REPORT",
        "result=success|agent=Cloud-Init/26.2",
    )
    .unwrap()
    .to_vec();
    pool.extend_from_slice(b"partial record"); // size not a multiple of 2560
    std::fs::write(&path, &pool).unwrap();
    let out = kvp_dump(&path, false).unwrap();
    assert_eq!(out.exit_code, EXIT_PROBLEMS, "{}", out.stdout);
    assert!(
        out.stdout.contains("error [kvp.pool.size]"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("PROVISIONING_REPORT (record 0, cloud-init dialect)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("  result = success\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn hostile_values_cannot_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    std::fs::write(
        &path,
        kvp::encode_record("k\u{1b}[2J", "line\nnext\r\u{7}").unwrap(),
    )
    .unwrap();
    let out = kvp_dump(&path, false).unwrap();
    assert!(
        !out.stdout.contains('\u{1b}')
            && !out.stdout.contains('\u{7}')
            && !out.stdout.contains('\r')
    );
    assert!(out.stdout.contains("k\\u{1b}[2J"), "{}", out.stdout);
    assert!(
        out.stdout.contains("line\\nnext\\r\\u{7}"),
        "{}",
        out.stdout
    );
    // JSON keeps the exact text.
    let json: Value = serde_json::from_str(&kvp_dump(&path, true).unwrap().stdout).unwrap();
    assert_eq!(json["records"][0]["value"], "line\nnext\r\u{7}");
}

#[test]
fn empty_pool_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty");
    std::fs::write(&path, b"").unwrap();
    let out = kvp_dump(&path, false).unwrap();
    assert_eq!(out.exit_code, EXIT_OK);
    assert!(
        out.stdout.contains(": 0 bytes, 0 records of 2560 bytes"),
        "{}",
        out.stdout
    );
}

#[test]
fn missing_file_and_directory_name_the_path_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-pool");
    let err = kvp_dump(&missing, false).unwrap_err();
    assert_eq!(err.exit_code(), EXIT_BAD_INPUT);
    let message = err.to_string();
    assert!(
        message.contains("no-such-pool") && message.contains("No such file"),
        "{message}"
    );

    let err = kvp_dump(dir.path(), true).unwrap_err();
    assert_eq!(err.exit_code(), EXIT_BAD_INPUT);
    let message = err.to_string();
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    assert!(
        message.contains("is a directory; expected a KVP pool file"),
        "{message}"
    );
}

/// The host keeps one record per key (docs/protocol.md §7.1): `kvp dump` of a pool holding two
/// `PROVISIONING_REPORT` records says so and names the records.
#[test]
fn two_reports_under_one_key_are_shown_as_the_host_keeps_them() {
    let host = |name: &str, json: bool| {
        let path = vectors().join("../kvp-host").join(name);
        kvp_dump(&path, json).unwrap()
    };
    let out = host("two-reports-one-key.bin", false);
    assert_eq!(out.exit_code, EXIT_OK, "a warning: {}", out.stdout);
    assert!(
        out.stdout.contains("pool findings:\n  warning [kvp.provisioning-report.multiple]: PROVISIONING_REPORT is also in record 0, before record 2: the host keeps one record per key"),
        "{}",
        out.stdout
    );

    // azure-init main's split report: an error, naming both chunks, and the cut character.
    let out = host("azure-init-main-split-report.bin", false);
    assert_eq!(out.exit_code, EXIT_PROBLEMS, "{}", out.stdout);
    assert!(out.stdout.contains("error [kvp.provisioning-report.split]: PROVISIONING_REPORT is written as 2 records under one key (records 1 and 2"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("warning [kvp.value.split-character]: records 1 and 2"),
        "{}",
        out.stdout
    );

    // PR #313's unique chunk keys: one event, joined in index order, no finding.
    let out = host("pr313-suffix-chunks.bin", false);
    assert_eq!(out.exit_code, EXIT_OK, "{}", out.stdout);
    assert!(
        out.stdout
            .contains("(records 3, 2, 1, 0, joined in index order)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("pool findings: none"), "{}", out.stdout);
    let json: Value = serde_json::from_str(&host("pr313-suffix-chunks.bin", true).stdout).unwrap();
    assert_eq!(
        json["chunked_events"][0]["records"],
        serde_json::json!([3, 2, 1, 0])
    );
}
