//! `wirecheck report parse`: every report vector decoded (snapshots), JSON
//! form against the vector's fields, findings and exit codes.

use std::path::Path;

use conformance::tools::{EXIT_OK, EXIT_PROBLEMS, report_parse};
use serde_json::Value;

/// `(file stem, name, encoded, dialect, fields)` of every report vector.
fn report_vectors() -> Vec<(String, String, String, String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors/reports");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let list: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        for item in list {
            all.push((
                stem.clone(),
                item["name"].as_str().unwrap().to_string(),
                item["encoded"].as_str().unwrap().to_string(),
                item["dialect"].as_str().unwrap().to_string(),
                item["fields"].clone(),
            ));
        }
    }
    assert_eq!(all.len(), 10, "the vectors README lists 10 reports");
    all
}

#[test]
fn every_report_vector_decodes_human() {
    for (stem, name, encoded, dialect, _) in report_vectors() {
        let out = report_parse(&encoded, false).unwrap();
        assert!(
            out.stdout.starts_with(&format!("dialect    {dialect}\n")),
            "{stem}#{name}:\n{}",
            out.stdout
        );
        assert!(
            out.stdout.contains("strict     parses"),
            "{stem}#{name}:\n{}",
            out.stdout
        );
        insta::assert_snapshot!(format!("report_parse_{stem}_{name}"), out.stdout);
    }
}

#[test]
fn every_report_vector_json_matches_its_fields() {
    for (stem, name, encoded, dialect, fields) in report_vectors() {
        let out = report_parse(&encoded, true).unwrap();
        let json: Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(json["input"], encoded.as_str());
        for mode in ["lenient", "strict"] {
            assert_eq!(json[mode]["ok"], true, "{stem}#{name} {mode}");
            assert_eq!(
                json[mode]["report"]["dialect"],
                dialect.as_str(),
                "{stem}#{name} {mode}"
            );
            assert_eq!(
                json[mode]["report"]["fields"], fields,
                "{stem}#{name} {mode}"
            );
        }
        let errors = json["lenient"]["report"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["severity"] == "error")
            .count();
        assert_eq!(
            out.exit_code,
            if errors == 0 { EXIT_OK } else { EXIT_PROBLEMS }
        );
    }
}

#[test]
fn truncated_report_lenient_parses_strict_rejects() {
    let input = "result=error|reason=x|agent=Cloud-Init/26.2|'exception=it''s cut";
    let out = report_parse(input, false).unwrap();
    assert_eq!(out.exit_code, EXIT_PROBLEMS, "{}", out.stdout);
    assert!(out.stdout.contains("truncated  yes"), "{}", out.stdout);
    assert!(
        out.stdout.contains("strict     rejects: "),
        "{}",
        out.stdout
    );
    let json: Value = serde_json::from_str(&report_parse(input, true).unwrap().stdout).unwrap();
    assert_eq!(json["lenient"]["ok"], true);
    assert_eq!(json["lenient"]["report"]["truncated"], true);
    assert_eq!(json["strict"]["ok"], false);
    assert!(
        json["strict"]["error"]
            .as_str()
            .unwrap()
            .contains("input ends inside")
    );
}

#[test]
fn unparsable_input_says_why() {
    let out = report_parse("", false).unwrap();
    assert_eq!(out.exit_code, EXIT_PROBLEMS);
    assert!(
        out.stdout.contains("lenient    cannot parse: empty input"),
        "{}",
        out.stdout
    );
    let out = report_parse("result=error|'reason=x'y|agent=Cloud-Init/26.2", false).unwrap();
    assert_eq!(out.exit_code, EXIT_PROBLEMS);
    assert!(out.stdout.contains("cannot parse"), "{}", out.stdout);
}

#[test]
fn newlines_in_values_are_shown_escaped() {
    let input = "result=error|'reason=two\nlines'|agent=Cloud-Init/26.2";
    let out = report_parse(input, false).unwrap();
    assert!(
        out.stdout.contains("reason = two\\nlines"),
        "{}",
        out.stdout
    );
}
