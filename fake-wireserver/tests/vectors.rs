//! Every request captured from a real agent (testdata/vectors/http) is replayed byte for byte
//! over a raw TCP connection against a fake serving the vectors' fixed values, and must be
//! classified as its `expected` block says. Absolute-form requests go through the proxy
//! listener, origin-form ones to the listener their Host names.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use fake_wireserver::{EndpointId, Fake, FakeConfig, Listener, Scenario, Severity};
use serde_json::Value;

use common::{Outcome, examples_dir, exchange, vectors_dir};

fn request_vectors() -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    let http = vectors_dir().join("http");
    for dir in std::fs::read_dir(&http).expect("vectors/http") {
        let dir = dir.unwrap().path();
        for file in std::fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                if v["kind"] == "request" {
                    out.push((path, v));
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The exact bytes the agent sent.
fn wire_bytes(v: &Value) -> Vec<u8> {
    let mut s = format!(
        "{} {} {}\r\n",
        v["method"].as_str().unwrap(),
        v["target"].as_str().unwrap(),
        v["http_version"].as_str().unwrap()
    );
    for h in v["headers"].as_array().unwrap() {
        s.push_str(&format!(
            "{}: {}\r\n",
            h[0].as_str().unwrap(),
            h[1].as_str().unwrap()
        ));
    }
    s.push_str("\r\n");
    let mut bytes = s.into_bytes();
    match v["body_b64"].as_str() {
        Some(b64) => bytes.extend(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap(),
        ),
        None => bytes.extend_from_slice(v["body"].as_str().unwrap_or("").as_bytes()),
    }
    bytes
}

fn vectors_scenario(fake_responded: Option<u64>, endpoint: &str) -> Scenario {
    let mut text =
        std::fs::read_to_string(examples_dir().join("vectors-fixed-values.toml")).unwrap();
    if let Some(status) = fake_responded {
        // The recording fake answered this one request with an error status on purpose.
        text.push_str(&format!(
            "\n[[endpoint]]\nid = \"{endpoint}\"\n[[endpoint.step]]\nkind = \"respond\"\nstatus = {status}\nbody = '{{\"error\":\"Bad request\"}}'\n"
        ));
    }
    Scenario::from_toml_str(&text, "vectors-fixed-values.toml").unwrap()
}

fn opt_str(v: &Value) -> Option<&str> {
    v.as_str()
}

#[tokio::test]
async fn every_request_vector_is_classified_as_expected() {
    let vectors = request_vectors();
    assert!(
        vectors.len() >= 30,
        "found only {} request vectors",
        vectors.len()
    );
    for (path, v) in &vectors {
        let name = path
            .strip_prefix(vectors_dir())
            .unwrap()
            .display()
            .to_string();
        let expected = &v["expected"];
        let fake_responded = expected["fake_responded"].as_u64();
        let fake = Fake::start(
            FakeConfig::default()
                .with_proxy()
                .hostplugin(Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))))
                .scenario(vectors_scenario(
                    fake_responded,
                    expected["endpoint"].as_str().unwrap(),
                )),
        )
        .await
        .unwrap();

        let target = v["target"].as_str().unwrap();
        let host = v["headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h[0].as_str().unwrap().eq_ignore_ascii_case("host"))
            .map(|h| h[1].as_str().unwrap().to_owned())
            .unwrap();
        let (addr, listener) = if target.starts_with("http://") {
            (fake.proxy_addr().unwrap(), Listener::Proxy)
        } else if host == "169.254.169.254" {
            (fake.imds_addr().unwrap(), Listener::Imds)
        } else if host.ends_with(":32526") {
            (fake.hostplugin_addr().unwrap(), Listener::HostPlugin)
        } else {
            (fake.wireserver_addr().unwrap(), Listener::Wireserver)
        };

        let outcome = exchange(addr, &wire_bytes(v), Duration::from_secs(10)).await;
        let Outcome::Response(response) = outcome else {
            panic!("{name}: no complete response: {outcome:?}");
        };

        let journal = fake.journal();
        assert_eq!(journal.len(), 1, "{name}: one journal entry");
        let e = &journal[0];
        // The vector's id is data: an id the fake does not know fails here, by name.
        let endpoint: EndpointId = expected["endpoint"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(e.endpoint, endpoint, "{name}: endpoint");
        assert_eq!(e.listener, listener, "{name}: listener");
        assert_eq!(e.target, target, "{name}: target kept as received");
        let sent_headers: Vec<(String, String)> = v["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h[0].as_str().unwrap().to_owned(),
                    h[1].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(e.headers, sent_headers, "{name}: headers in order and case");
        assert_eq!(e.body, v["body"].as_str().unwrap_or(""), "{name}: body");

        let want_status = match (fake_responded, endpoint) {
            (Some(s), _) => s as u16,
            (None, EndpointId::WireserverHealthJson) => 201,
            // No Fast Track; no IMDS documents on the wireserver (docs/protocol.md §1.1, §9.1).
            (None, EndpointId::HostpluginVmsettings | EndpointId::WireserverMetadata) => 404,
            _ => 200,
        };
        assert_eq!(response.status, want_status, "{name}: status sent");
        assert_eq!(
            e.answer.status,
            Some(want_status),
            "{name}: status journaled"
        );
        let errors: Vec<_> = e
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .collect();
        assert!(
            errors.is_empty(),
            "{name}: real agent traffic raised errors: {errors:?}"
        );
        // The oracle knows WALA's dialect (Connection: close, its User-Agent, compact XML,
        // `[ClassName] message` descriptions): nothing worse than a note on its requests.
        if name.starts_with("http/walinuxagent") {
            let report_findings = e.report.iter().flat_map(|r| r.findings.iter());
            let worse: Vec<_> = e
                .findings
                .iter()
                .chain(report_findings)
                .filter(|f| f.severity != Severity::Info)
                .collect();
            assert!(worse.is_empty(), "{name}: {worse:?}");
        }

        match endpoint {
            id if id.is_health() => {
                let report = e
                    .report
                    .as_ref()
                    .unwrap_or_else(|| panic!("{name}: no report"));
                assert_eq!(
                    report.state.as_ref().map(|s| s.as_str()),
                    opt_str(&expected["state"]),
                    "{name}: state"
                );
                assert_eq!(
                    report.substatus.as_ref().map(|s| s.as_str()),
                    opt_str(&expected["substatus"]),
                    "{name}: substatus"
                );
                assert_eq!(
                    report.description.as_deref(),
                    opt_str(&expected["description"]),
                    "{name}: description"
                );
                if endpoint == EndpointId::WireserverHealthXml {
                    assert_eq!(
                        report.goal_state_incarnation.as_deref(),
                        opt_str(&expected["goal_state_incarnation"]),
                        "{name}: incarnation"
                    );
                    assert_eq!(
                        report.container_id.as_deref(),
                        opt_str(&expected["container_id"])
                    );
                    assert_eq!(
                        report.instance_id.as_deref(),
                        opt_str(&expected["instance_id"])
                    );
                    // The ids echo what the fake served: no mismatch findings.
                    assert!(
                        !report.findings.iter().any(|f| f.id.contains("mismatch")),
                        "{name}: {:?}",
                        report.findings
                    );
                }
            }
            EndpointId::WireserverConfig => {
                assert_eq!(
                    e.query("type").as_deref(),
                    opt_str(&expected["type"]),
                    "{name}"
                );
                assert!(response.text().contains("<SharedConfig"), "{name}");
                assert!(
                    response.text().contains("<Instance id=\"vector-vm\""),
                    "{name}"
                );
            }
            EndpointId::WireserverGoalstate => {
                let body = response.text();
                assert!(body.contains("<Incarnation>7</Incarnation>"), "{name}");
                // The URL the vectors' recording fake served, built from the Host used.
                assert!(
                    body.contains("http://168.63.129.16:80/machine/c0ffee00-1111-2222-3333-444444444444/vector-vm?comp=config&amp;type=sharedConfig&amp;incarnation=7"),
                    "{name}: {body}"
                );
                assert!(!body.contains("<Certificates>"), "{name}: no certificates");
            }
            EndpointId::WireserverConfigHosting => {
                assert!(
                    response.text().contains("<HostingEnvironmentConfig"),
                    "{name}"
                );
                assert!(
                    response.text().contains("instance=\"vector-vm\""),
                    "{name}: {}",
                    response.text()
                );
            }
            EndpointId::WireserverVersions => {
                assert!(response.text().contains("<Supported>"), "{name}");
            }
            EndpointId::ImdsInstance => {
                assert_eq!(
                    e.path(),
                    expected["imds_path"].as_str().unwrap(),
                    "{name}: path"
                );
                assert_eq!(
                    e.query("api-version").as_deref(),
                    opt_str(&expected["api_version"]),
                    "{name}: api-version"
                );
                let query: Vec<(String, String)> =
                    serde_json::from_value(expected["query"].clone()).unwrap();
                assert_eq!(e.query_pairs(), query, "{name}: query");
                assert_eq!(
                    e.header("metadata"),
                    opt_str(&expected["metadata_header"]),
                    "{name}: Metadata header"
                );
                if fake_responded.is_none() {
                    match e.path() {
                        "/metadata/instance/compute/name" => {
                            assert_eq!(response.text(), "vector-vm")
                        }
                        "/metadata/instance/compute/vmSize" => {
                            assert_eq!(response.text(), "Standard_D2s_v3")
                        }
                        "/metadata/instance/compute" => {
                            let compute: Value = serde_json::from_slice(&response.body).unwrap();
                            assert_eq!(compute["vmId"], "11111111-2222-3333-4444-555555555555");
                        }
                        "/metadata/instance/compute/publicKeys" => {
                            let keys: Value = serde_json::from_slice(&response.body).unwrap();
                            assert!(keys[0]["keyData"].as_str().unwrap().starts_with("ssh-"));
                        }
                        _ => {
                            let doc: Value = serde_json::from_slice(&response.body).unwrap();
                            assert_eq!(
                                doc["compute"]["vmId"],
                                "11111111-2222-3333-4444-555555555555"
                            );
                            assert_eq!(
                                doc["extended"].is_object(),
                                e.query("extended").as_deref() == Some("true"),
                                "{name}: extended only when asked"
                            );
                        }
                    }
                }
            }
            EndpointId::HostpluginVmsettings => {
                // WALA's HostGAPlugin headers (docs/protocol.md §9.1); 404 = no Fast Track.
                assert_eq!(e.header("x-ms-version"), Some("2015-09-01"), "{name}");
                assert_eq!(
                    e.header("x-ms-containerid"),
                    Some("c0ffee00-1111-2222-3333-444444444444"),
                    "{name}"
                );
                assert!(e.findings.is_empty(), "{name}: {:?}", e.findings);
            }
            EndpointId::WireserverMetadata => {
                let ids: Vec<&str> = e.findings.iter().map(|f| f.id.as_str()).collect();
                assert_eq!(ids, ["path.imds-on-wireserver"], "{name}");
            }
            other => panic!("{name}: no assertions for endpoint {other}"),
        }
        fake.shutdown().await.unwrap();
    }
}
