//! Against the shared vectors (captured from real agents, `../testdata/vectors`): the
//! reporter's output has the same structure as the real agents' output.

use crate::support;

use chrono::{DateTime, Utc};
use reporter::format::HealthState;
use reporter::format::xml::{GoalState, health_document, is_throttling_body};
use reporter::{AGENT, Failure, Identity, ProvisioningError, Report, VmIdSource, prepare};
use serde::Deserialize;

use support::{parse_encoded, vectors_dir, xml_texts};

#[derive(Deserialize)]
struct ReportVector {
    name: String,
    dialect: String,
    encoded: String,
    fields: Vec<(String, String)>,
}

fn cloud_init_reports() -> Vec<ReportVector> {
    let path = vectors_dir().join("reports/cloud-init-26.2-basic.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn field<'a>(fields: &'a [(String, String)], key: &str) -> &'a str {
    &fields.iter().find(|(k, _)| k == key).unwrap().1
}

#[test]
fn the_test_parser_reads_cloud_init_strings_as_cloud_init_means_them() {
    for vector in cloud_init_reports() {
        assert_eq!(vector.dialect, "cloud-init");
        assert_eq!(
            parse_encoded(&vector.encoded),
            vector.fields,
            "{}",
            vector.name
        );
    }
}

/// The same report made by the reporter, with cloud-init's inputs (vm id, timestamp, reason,
/// supporting data): byte-identical except for the `agent=` value.
#[test]
fn reports_match_cloud_init_26_2_byte_for_byte_apart_from_the_agent() {
    let vectors = cloud_init_reports();
    assert_eq!(vectors.len(), 3);
    for vector in vectors {
        let timestamp: DateTime<Utc> =
            DateTime::parse_from_rfc3339(field(&vector.fields, "timestamp"))
                .unwrap()
                .with_timezone(&Utc);
        let identity = Identity {
            vm_id: field(&vector.fields, "vm_id").to_owned(),
            source: VmIdSource::Given,
            pps_type: None,
        };
        let report = match vector.name.as_str() {
            "success" => Report::Ready,
            "error-basic" => Report::Failure(
                Failure::custom("foo bar", [("foo", "bar"), ("count", "4")]).unwrap(),
            ),
            "imds-http-404" => Report::Failure(Failure::from(ProvisioningError::ImdsHttpError {
                http_code: 404,
                duration: 12.5,
                exception: field(&vector.fields, "exception").to_owned(),
                url: field(&vector.fields, "url").to_owned(),
            })),
            other => panic!("unknown vector {other}"),
        };
        let ours = prepare(&report, &identity, timestamp).encoded.unwrap();
        let theirs_with_our_agent = vector
            .encoded
            .replace("agent=Cloud-Init/26.2", &format!("agent={AGENT}"));
        assert_eq!(ours, theirs_with_our_agent, "{}", vector.name);
        let ours_fields = parse_encoded(&ours);
        let keys = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&ours_fields), keys(&vector.fields), "{}", vector.name);
    }
}

#[derive(Deserialize)]
struct RequestVector {
    body: String,
    expected: serde_json::Value,
}

fn request_vector(name: &str) -> RequestVector {
    let path = vectors_dir().join("http/cloud-init-22.4.2").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn vector_goal_state(expected: &serde_json::Value) -> GoalState {
    GoalState {
        incarnation: expected["goal_state_incarnation"].as_str().unwrap().into(),
        container_id: expected["container_id"].as_str().unwrap().into(),
        instance_id: expected["instance_id"].as_str().unwrap().into(),
    }
}

/// cloud-init's Health documents and ours carry the same elements with the same text.
#[test]
fn health_documents_have_cloud_init_22_4_2_structure() {
    let ready = request_vector("02-ready-health.json");
    let ours = health_document(&vector_goal_state(&ready.expected), &HealthState::Ready);
    assert_eq!(xml_texts(&ours), xml_texts(&ready.body));

    for name in [
        "04-failure-tricky-health.json",
        "08-failure-default-health.json",
    ] {
        let failure = request_vector(name);
        let description = failure.expected["description_input"].as_str().unwrap();
        let ours = health_document(
            &vector_goal_state(&failure.expected),
            &HealthState::failed(description),
        );
        let (ours, theirs) = (xml_texts(&ours), xml_texts(&failure.body));
        assert_eq!(ours, theirs, "{name}");
        assert_eq!(
            ours["Health/Container/RoleInstanceList/Role/Health/Details/Description"],
            failure.expected["description"].as_str().unwrap(),
            "{name}"
        );
    }
}

#[test]
fn the_platform_throttling_reply_is_recognised() {
    assert!(is_throttling_body(support::throttled_body().as_bytes()));
}

#[test]
fn in_progress_text_matches_azure_init() {
    let identity = Identity {
        vm_id: "11111111-2222-3333-4444-555555555555".into(),
        source: VmIdSource::Imds,
        pps_type: None,
    };
    let prepared = prepare(
        &Report::InProgress { description: None },
        &identity,
        Utc::now(),
    );
    assert_eq!(
        prepared.health,
        HealthState::in_progress(
            "Provisioning is still in progress for vm_id=11111111-2222-3333-4444-555555555555."
        )
    );
}
