//! `wirecheck kvp dump` as a user runs it on pools the host does not read as written: two
//! `PROVISIONING_REPORT` records under one key (the host keeps one record per key,
//! docs/protocol.md §7.1), and azure-init main's long report in chunks under that key.

use crate::runner_support;

use std::path::PathBuf;

use runner_support::{stderr, stdout, wirecheck};

fn vector(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/kvp-host")
        .join(name)
}

#[test]
fn kvp_dump_shows_that_the_host_keeps_one_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = wirecheck(dir.path())
        .args(["kvp", "dump"])
        .arg(vector("two-reports-one-key.bin"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("warning [kvp.provisioning-report.multiple]: PROVISIONING_REPORT is also in record 0, before record 2: the host keeps one record per key"),
        "{text}"
    );

    let out = wirecheck(dir.path())
        .args(["kvp", "dump", "--json"])
        .arg(vector("azure-init-main-split-report.bin"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "an error finding: {}",
        stderr(&out)
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let ids: Vec<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["kvp.provisioning-report.split", "kvp.value.split-character"]
    );
}
