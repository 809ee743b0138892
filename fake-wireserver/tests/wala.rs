//! What WALinuxAgent needs beyond the other agents (docs/protocol.md §1.1, §3.1, §9.1): the goal
//! state's HostingEnvironmentConfig / SharedConfig / ExtensionsConfig documents (each one can be
//! left out or broken by a scenario), the HostGAPlugin on its own listener and through the
//! proxy, and the wireserver paths only WALA uses, each journaled under its own endpoint id.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use fake_wireserver::{AnswerKind, EndpointId, Fake, FakeConfig, Listener, Scenario};

use common::{exchange, get, post, response};

const T: Duration = Duration::from_secs(10);
const WS: &str = "168.63.129.16";
const WS_HEADERS: &[(&str, &str)] = &[
    ("x-ms-agent-name", "WALinuxAgent"),
    ("x-ms-version", "2012-11-30"),
];

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

async fn fake_with(scenario: &str) -> Fake {
    let scenario = Scenario::from_toml_str(scenario, "wala.toml").unwrap();
    Fake::start(
        FakeConfig::default()
            .hostplugin(Some(loopback()))
            .scenario(scenario),
    )
    .await
    .unwrap()
}

/// The URL named by `<element>` in the served goal state, as a path on the wireserver.
async fn listed(fake: &Fake, element: &str) -> Option<String> {
    let ws = fake.wireserver_addr().unwrap();
    let gs = response(exchange(ws, &get("/machine/?comp=goalstate", WS, WS_HEADERS), T).await);
    let xml = gs.text();
    let open = format!("<{element}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find('<')?;
    let url = xml[start..end].replace("&amp;", "&");
    Some(
        url.strip_prefix("http://168.63.129.16:80")
            .expect("URL on the agent's host")
            .to_owned(),
    )
}

#[tokio::test]
async fn goal_state_names_a_hosting_environment_config_wala_can_read() {
    let fake = fake_with("").await;
    let ws = fake.wireserver_addr().unwrap();
    let url = listed(&fake, "HostingEnvironmentConfig")
        .await
        .expect("WALA refuses a goal state without HostingEnvironmentConfig");
    assert!(url.contains("type=hostingEnvironmentConfig"), "{url}");
    let r = response(exchange(ws, &get(&url, WS, WS_HEADERS), T).await);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/xml; charset=utf-8"));
    // What WALA's HostingEnv reads (goal_state.py: Incarnation@instance, Role@name,
    // Deployment@name), parsed as XML.
    let doc = r.text();
    let parsed: quick_xml::events::Event = {
        let mut reader = quick_xml::Reader::from_str(&doc);
        let mut names = Vec::new();
        loop {
            match reader.read_event().expect("well-formed XML") {
                quick_xml::events::Event::Eof => break,
                quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e) => {
                    names.push(String::from_utf8_lossy(e.name().as_ref()).into_owned())
                }
                _ => {}
            }
        }
        assert!(
            names.starts_with(&["HostingEnvironmentConfig".to_owned()]),
            "{names:?}"
        );
        for n in ["Deployment", "Incarnation", "Role"] {
            assert!(names.iter().any(|x| x == n), "{n} missing: {names:?}");
        }
        quick_xml::events::Event::Eof
    };
    assert_eq!(parsed, quick_xml::events::Event::Eof);
    assert!(doc.contains(r#"<Incarnation number="1" instance="MachineRole_IN_0""#));
    assert!(doc.contains(r#"name="MachineRole" hostingEnvironmentVersion"#));
    let journal = fake.journal();
    assert_eq!(
        journal.last().unwrap().endpoint,
        EndpointId::WireserverConfigHosting
    );
    assert!(
        journal.last().unwrap().findings.is_empty(),
        "{:?}",
        journal.last()
    );
    // ExtensionsConfig is optional and off by default.
    assert_eq!(listed(&fake, "ExtensionsConfig").await, None);
}

#[tokio::test]
async fn a_scenario_leaves_out_or_adds_each_config_document() {
    let fake = fake_with(
        "[goalstate]\nhosting_environment_config = false\nshared_config = false\nextensions_config = true\ncertificates = false\n",
    )
    .await;
    assert_eq!(listed(&fake, "HostingEnvironmentConfig").await, None);
    assert_eq!(listed(&fake, "SharedConfig").await, None);
    assert_eq!(listed(&fake, "Certificates").await, None);
    let url = listed(&fake, "ExtensionsConfig").await.expect("listed");
    let ws = fake.wireserver_addr().unwrap();
    let r = response(exchange(ws, &get(&url, WS, WS_HEADERS), T).await);
    assert_eq!(r.status, 200);
    assert!(
        r.text()
            .contains("<Extensions version=\"1.0.0.0\" goalStateIncarnation=\"1\">")
    );
    assert_eq!(
        fake.journal().last().unwrap().endpoint,
        EndpointId::WireserverConfigExtensions
    );
    // What is not listed is not served.
    let hosting = url.replace("extensionsConfig", "hostingEnvironmentConfig");
    let r = response(exchange(ws, &get(&hosting, WS, WS_HEADERS), T).await);
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn scenario_steps_break_the_hosting_and_shared_config_separately() {
    let fake = fake_with(
        r#"
[[endpoint]]
id = "wireserver.config.hosting"
[[endpoint.step]]
kind = "respond"
status = 410

[[endpoint]]
id = "wireserver.config"
[[endpoint.step]]
kind = "respond"
status = 200
body = "<SharedConfig"
"#,
    )
    .await;
    let ws = fake.wireserver_addr().unwrap();
    let hosting = listed(&fake, "HostingEnvironmentConfig").await.unwrap();
    let shared = listed(&fake, "SharedConfig").await.unwrap();
    let r = response(exchange(ws, &get(&hosting, WS, WS_HEADERS), T).await);
    assert_eq!(r.status, 410);
    let r = response(exchange(ws, &get(&shared, WS, WS_HEADERS), T).await);
    assert_eq!((r.status, r.text().as_str()), (200, "<SharedConfig"));
    // Each plan had one step: the second requests get the defaults.
    let r = response(exchange(ws, &get(&hosting, WS, WS_HEADERS), T).await);
    assert_eq!(r.status, 200);
    let ids: Vec<_> = fake
        .journal()
        .iter()
        .map(|e| (e.endpoint, e.answer.kind))
        .collect();
    assert!(
        ids.contains(&(EndpointId::WireserverConfigHosting, AnswerKind::Respond)),
        "{ids:?}"
    );
    assert!(
        ids.contains(&(EndpointId::WireserverConfig, AnswerKind::Respond)),
        "{ids:?}"
    );
}

#[tokio::test]
async fn hostplugin_listener_answers_like_a_platform_without_fast_track() {
    let fake = fake_with("").await;
    let hp = fake.hostplugin_addr().expect("hostplugin listener");
    let h = [("x-ms-version", "2015-09-01")];
    let host = format!("{WS}:32526");
    let r = response(exchange(hp, &get("/vmSettings", &host, &h), T).await);
    assert_eq!(r.status, 404, "vmSettings not supported by default");
    let r = response(exchange(hp, &get("/versions", &host, &h), T).await);
    assert_eq!(r.status, 200);
    let versions: Vec<String> = serde_json::from_str(&r.text()).unwrap();
    assert!(versions.iter().any(|v| v == "2015-09-01"), "{versions:?}");
    let r = response(exchange(hp, &get("/health", &host, &h), T).await);
    assert_eq!(r.status, 200);
    let put = String::from_utf8(post("/status", &host, &h, "{}"))
        .unwrap()
        .replacen("POST", "PUT", 1);
    let r = response(exchange(hp, put.as_bytes(), T).await);
    assert_eq!(r.status, 200);
    // Wrong method and unknown path: answered and journaled with a finding.
    let r = response(exchange(hp, &post("/vmSettings", &host, &h, ""), T).await);
    assert_eq!(r.status, 405);
    let r = response(exchange(hp, &get("/extensionArtifact", &host, &h), T).await);
    assert_eq!(r.status, 404);

    let journal = fake.journal();
    let ids: Vec<EndpointId> = journal.iter().map(|e| e.endpoint).collect();
    assert_eq!(
        ids,
        [
            EndpointId::HostpluginVmsettings,
            EndpointId::HostpluginVersions,
            EndpointId::HostpluginHealth,
            EndpointId::HostpluginStatus,
            EndpointId::HostpluginVmsettings,
            EndpointId::HostpluginUnknown,
        ]
    );
    assert!(journal.iter().all(|e| e.listener == Listener::HostPlugin));
    assert!(
        journal[..4].iter().all(|e| e.findings.is_empty()),
        "{journal:?}"
    );
    assert!(
        journal[4]
            .findings
            .iter()
            .any(|f| f.id == "method.unexpected")
    );
    assert!(journal[5].findings.iter().any(|f| f.id == "path.unknown"));
}

#[tokio::test]
async fn hostplugin_endpoints_are_scriptable() {
    let fake = fake_with(
        r#"
[[endpoint]]
id = "hostplugin.vmsettings"
[[endpoint.step]]
kind = "respond"
status = 200
headers = [["ETag", "1234"]]
body = "{}"
"#,
    )
    .await;
    let hp = fake.hostplugin_addr().unwrap();
    let r = response(exchange(hp, &get("/vmSettings", WS, &[]), T).await);
    assert_eq!((r.status, r.header("etag")), (200, Some("1234")));
    let r = response(exchange(hp, &get("/vmSettings", WS, &[]), T).await);
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn the_proxy_routes_port_32526_of_the_wireserver_to_the_hostplugin() {
    let fake = Fake::start(FakeConfig::default().with_proxy())
        .await
        .unwrap();
    let proxy = fake.proxy_addr().unwrap();
    let r = response(
        exchange(
            proxy,
            &get(
                "http://168.63.129.16:32526/vmSettings",
                "168.63.129.16:32526",
                &[],
            ),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 404);
    let r = response(
        exchange(
            proxy,
            &get("http://168.63.129.16/?comp=versions", "168.63.129.16", &[]),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 200);
    let ids: Vec<EndpointId> = fake.journal().iter().map(|e| e.endpoint).collect();
    assert_eq!(
        ids,
        [
            EndpointId::HostpluginVmsettings,
            EndpointId::WireserverVersions
        ]
    );
}

#[tokio::test]
async fn wala_only_wireserver_paths_are_classified_and_answered() {
    let fake = fake_with("").await;
    let ws = fake.wireserver_addr().unwrap();
    let xml = [
        ("x-ms-agent-name", "WALinuxAgent"),
        ("x-ms-version", "2012-11-30"),
        ("Content-Type", "text/xml;charset=utf-8"),
    ];
    // roleProperties needs exactly 202 (docs/protocol.md §1.1).
    let r = response(
        exchange(
            ws,
            &post(
                "/machine?comp=roleProperties",
                WS,
                &xml,
                "<RoleProperties/>",
            ),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 202);
    let r = response(
        exchange(
            ws,
            &post(
                "/machine?comp=telemetrydata",
                WS,
                &xml,
                "<?xml version=\"1.0\"?><TelemetryData version=\"1.0\"><Provider id=\"x\"></Provider></TelemetryData>",
            ),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 200);
    let r = response(
        exchange(
            ws,
            &post(
                "/HealthService",
                WS,
                &[("Content-Type", "application/json")],
                "{}",
            ),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 200);
    // WALA's IMDS fallback: the wireserver serves no IMDS documents.
    let r = response(
        exchange(
            ws,
            &get(
                "/metadata/instance/compute?api-version=2018-02-01",
                WS,
                &[("Metadata", "True")],
            ),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 404);

    let journal = fake.journal();
    let ids: Vec<EndpointId> = journal.iter().map(|e| e.endpoint).collect();
    assert_eq!(
        ids,
        [
            EndpointId::WireserverRoleProperties,
            EndpointId::WireserverTelemetry,
            EndpointId::WireserverHealthService,
            EndpointId::WireserverMetadata,
        ]
    );
    assert!(
        journal[..3].iter().all(|e| e.findings.is_empty()),
        "{journal:?}"
    );
    let f: Vec<&str> = journal[3].findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(f, ["path.imds-on-wireserver"]);
    assert!(journal[3].findings[0].severity == fake_wireserver::oracle::Severity::Info);
}
