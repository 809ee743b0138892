//! junit.xml: structure (suite per agent, case per case, verdict mapping),
//! hostile strings survive as data, and a snapshot of the whole document.

use crate::results_support;

use quick_junit::{NonSuccessKind, Report, TestCaseStatus};
use results_support::{HOSTILE, fixture};
use wirecheck_results::junit;

fn parsed() -> (String, Report) {
    let xml = junit::render(&fixture()).unwrap();
    let report = Report::deserialize_from_str(&xml).expect("junit.xml parses back");
    (xml, report)
}

#[test]
fn one_suite_per_agent_one_testcase_per_case() {
    let (_, report) = parsed();
    let results = fixture();
    assert_eq!(report.test_suites.len(), results.agents.len());
    for (suite, agent) in report.test_suites.iter().zip(&results.agents) {
        assert_eq!(suite.name.as_str(), agent.agent);
        let names: Vec<&str> = suite.test_cases.iter().map(|c| c.name.as_str()).collect();
        let ids: Vec<&str> = agent.cases.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(names, ids);
    }
    assert_eq!(report.tests, 7);
    assert_eq!(report.failures, 1);
    assert_eq!(report.errors, 0);
}

#[test]
fn verdicts_map_to_failure_skipped_or_passed_with_a_note() {
    let (_, report) = parsed();
    let suite = &report.test_suites[0];
    let by_name = |name: &str| {
        suite
            .test_cases
            .iter()
            .find(|c| c.name.as_str() == name)
            .unwrap()
    };

    assert!(matches!(
        by_name("retry.health.503-burst").status,
        TestCaseStatus::Success { .. }
    ));

    match &by_name("retry.health.interval").status {
        TestCaseStatus::NonSuccess {
            kind,
            message,
            description,
            ..
        } => {
            assert_eq!(*kind, NonSuccessKind::Failure);
            assert_eq!(
                message.as_deref(),
                Some("attempts 3 and 4 were 12 ms apart (expected >= 500 ms)")
            );
            let description = description.as_deref().unwrap();
            assert!(
                description.contains("request head of attempt 4 (journal #3, #4)"),
                "{description}"
            );
            assert!(
                description.contains("    content-type: application/json"),
                "{description}"
            );
        }
        other => panic!("fail must be a failure, got {other:?}"),
    }
    for (name, reason) in [
        ("kvp.report.written", "the profile says: no KVP support"),
        (
            "sandbox.netns.ready",
            "needs root for the network namespace",
        ),
    ] {
        match &by_name(name).status {
            TestCaseStatus::Skipped { message, .. } => assert_eq!(message.as_deref(), Some(reason)),
            other => panic!("{name} must be skipped, got {other:?}"),
        }
    }
    let informational = by_name("wire.headers.agent-name");
    assert!(matches!(
        informational.status,
        TestCaseStatus::Success { .. }
    ));
    assert_eq!(
        informational.system_out.as_deref().unwrap().lines().next(),
        Some("informational: x-ms-agent-name: WALinuxAgent (claims to be WALA)")
    );
}

#[test]
fn hostile_strings_are_escaped_and_survive_as_text() {
    let (xml, report) = parsed();
    assert!(
        !xml.contains("<script>"),
        "raw markup leaked into junit.xml"
    );
    let suite = &report.test_suites[1];
    assert_eq!(suite.name.as_str(), format!("hostile {HOSTILE}"));
    let case = &suite.test_cases[0];
    let out = case.system_out.as_deref().unwrap();
    assert!(out.starts_with(&format!("non-strict: {HOSTILE}")), "{out}");
    // NUL is not representable in XML: shown escaped, the rest kept.
    assert!(out.contains("\\u0000\"}\\u{0}"), "{out}");
    assert!(!out.contains('\0'));
}

#[test]
fn written_to_the_out_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = junit::write(dir.path(), &fixture()).unwrap();
    assert_eq!(path, dir.path().join("junit.xml"));
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        junit::render(&fixture()).unwrap()
    );
}

#[test]
fn snapshot() {
    let (xml, _) = parsed();
    insta::assert_snapshot!("junit_xml", xml);
}

/// Every character XML 1.0 cannot carry, where an agent's text can put it.
const NOT_XML: &str = "end\u{FFFF} \u{FFFE} \u{1}\u{8}\u{B}\u{C}\u{1F} \u{0}";

/// Parses `xml` with a strict XML 1.0 parser (xml-rs: characters outside the `Char`
/// production are errors) and returns the text and attribute values it holds.
fn strict_parse(xml: &str) -> Result<String, String> {
    let mut seen = String::new();
    for event in xml::reader::EventReader::new(xml.as_bytes()) {
        match event.map_err(|e| e.to_string())? {
            xml::reader::XmlEvent::StartElement { attributes, .. } => {
                for a in attributes {
                    seen.push_str(&a.value);
                    seen.push('\n');
                }
            }
            xml::reader::XmlEvent::Characters(text) | xml::reader::XmlEvent::CData(text) => {
                seen.push_str(&text);
                seen.push('\n');
            }
            _ => {}
        }
    }
    Ok(seen)
}

/// The finding: junit.xml was invalid XML when agent text held U+FFFF (CI report viewers
/// reject the whole file, hiding every verdict).
#[test]
fn junit_stays_valid_xml_when_agent_text_holds_characters_xml_cannot_carry() {
    let mut results = fixture();
    results.agents[0].agent = format!("agent{NOT_XML}");
    for case in &mut results.agents[0].cases {
        case.title = format!("title {NOT_XML}");
        case.reason = Some(format!("reason {NOT_XML}"));
        case.artifacts = Some(format!("artifacts/{NOT_XML}"));
        case.evidence.push(wirecheck_results::Evidence {
            note: format!("note {NOT_XML}"),
            journal_seq: vec![1],
            excerpt: Some(format!("excerpt {NOT_XML}")),
        });
    }
    let xml = junit::render(&results).unwrap();
    let text = strict_parse(&xml).unwrap_or_else(|e| panic!("not XML 1.0: {e}"));
    // The characters are shown escaped, where a reader can see what the agent sent.
    let shown = "reason end\\u{ffff} \\u{fffe} \\u{1}\\u{8}\\u{b}\\u{c}\\u{1f} \\u{0}";
    assert!(text.contains(shown), "{shown} not in {text}");
    assert!(text.contains("agentend\\u{ffff}"), "{text}");
    // The rest of the document is what it was.
    let report = Report::deserialize_from_str(&xml).expect("junit.xml parses back");
    assert_eq!(report.tests, 7);
    assert_eq!(report.failures, 1);
}

#[test]
fn the_fixture_is_strict_xml() {
    let (xml, _) = parsed();
    strict_parse(&xml).unwrap();
}
