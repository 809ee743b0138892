//! The host's view of a pool (docs/protocol.md §7.1) on the `testdata/kvp-host` vectors: one
//! record per key, each record read on its own, `<key>|<index>` chunks read as one event.

use std::path::PathBuf;

use wirecheck_oracle::kvp::{self, PoolView};
use wirecheck_oracle::{Finding, Severity};

fn vector(name: &str) -> (Vec<u8>, PoolView) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/kvp-host")
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let view = kvp::decode_pool(&bytes);
    (bytes, view)
}

fn ids(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.id.as_str()).collect()
}

/// The event text every suffix-chunk vector carries (scripts/make-kvp-host-vectors.py).
fn log() -> String {
    format!("dmesg log: {}", "kernel: naïve 日本 € line\n".repeat(100))
}

#[test]
fn azure_init_mains_long_report_reaches_the_host_in_one_chunk_at_most() {
    let (bytes, view) = vector("azure-init-main-split-report.bin");
    assert_eq!(
        ids(&view.findings),
        ["kvp.provisioning-report.split", "kvp.value.split-character"]
    );
    assert_eq!(view.findings[0].severity, Severity::Error);
    assert!(
        view.findings[0]
            .message
            .contains("2 records under one key (records 1 and 2"),
        "{}",
        view.findings[0].message
    );
    assert!(view.findings[1].message.contains("records 1 and 2"));
    // What the agent meant: the chunks joined, whole again.
    let (span, joined) = kvp::provisioning_report_value(&bytes, &view).unwrap();
    assert_eq!(span, [1, 2]);
    assert_eq!(joined.len(), 1423);
    let (_, report) = view.provisioning_report.unwrap();
    assert_eq!(report.get("user").map(|u| u.chars().count()), Some(401));
}

#[test]
fn two_different_reports_under_one_key_are_a_warning() {
    let (_, view) = vector("two-reports-one-key.bin");
    assert_eq!(ids(&view.findings), ["kvp.provisioning-report.multiple"]);
    assert_eq!(view.findings[0].severity, Severity::Warning);
    assert!(
        view.findings[0]
            .message
            .contains("also in record 0, before record 2")
    );
    let (index, report) = view.provisioning_report.unwrap();
    assert_eq!((index, report.get("result")), (2, Some("success")));
}

#[test]
fn an_event_key_written_twice_names_both_records() {
    let (_, view) = vector("duplicate-event-key.bin");
    assert_eq!(ids(&view.findings), ["kvp.key.duplicate"]);
    assert!(view.findings[0].message.contains("is in records 0 and 1"));
    assert_eq!(kvp::duplicate_keys(&view.records)[0].records, [0, 1]);
}

#[test]
fn pr313_suffix_chunks_are_one_event_in_index_order() {
    let (bytes, view) = vector("pr313-suffix-chunks.bin");
    assert!(view.findings.is_empty(), "{:#?}", view.findings);
    assert!(view.all_findings().next().is_none());
    let events = kvp::suffix_chunked_events(&bytes, &view);
    assert_eq!(events.len(), 1);
    let n = view.records.len() - 1;
    assert_eq!(events[0].records, (0..n).rev().collect::<Vec<_>>());
    assert_eq!(events[0].value, log());
    assert!(events[0].key.ends_with("|none||"));
}

#[test]
fn suffix_chunks_cut_inside_a_character_are_a_finding() {
    let (bytes, view) = vector("suffix-chunks-split-character.bin");
    // 1022-byte cuts: the first falls inside a 本, the third inside a 日.
    assert_eq!(
        ids(&view.findings),
        ["kvp.value.split-character", "kvp.value.split-character"]
    );
    assert!(view.findings[0].message.contains("records 0 and 1"));
    assert!(view.findings[0].message.contains("'本'"));
    assert!(view.findings[1].message.contains("records 2 and 3"));
    assert!(view.findings[1].message.contains("'日'"));
    // Joined, the event is whole again; read alone, the host cannot take the records.
    assert_eq!(kvp::suffix_chunked_events(&bytes, &view)[0].value, log());
    assert_eq!(ids(&view.records[0].findings), ["kvp.value.invalid-utf8"]);
}

#[test]
fn a_missing_chunk_index_is_a_gap() {
    let (bytes, view) = vector("suffix-chunks-gap.bin");
    assert_eq!(ids(&view.findings), ["kvp.chunk.gap"]);
    let events = kvp::suffix_chunked_events(&bytes, &view);
    assert_eq!(ids(&events[0].findings), ["kvp.chunk.gap"]);
    assert!(events[0].findings[0].message.contains("[0, 2, 3]"));
}
