//! The default documents satisfy every client's requirements listed in docs/protocol.md §3.1, §3.2
//! and §1.2, checked by parsing what the fake serves the way each client reads it.

use crate::common;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use fake_wireserver::{Fake, FakeConfig, ImdsRateLimit, Scenario};
use serde::Deserialize;
use serde_json::Value;

use common::{exchange, get, response};

const T: Duration = Duration::from_secs(10);

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GoalState {
    version: Option<String>,
    incarnation: Option<String>,
    container: Container,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Container {
    container_id: Option<String>,
    role_instance_list: RoleInstanceList,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RoleInstanceList {
    #[serde(default)]
    role_instance: Vec<RoleInstance>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RoleInstance {
    instance_id: Option<String>,
    configuration: Option<Configuration>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Configuration {
    config_name: Option<String>,
    shared_config: Option<String>,
    certificates: Option<String>,
    hosting_environment_config: Option<String>,
    extensions_config: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Versions {
    preferred: VersionList,
    supported: VersionList,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct VersionList {
    #[serde(default)]
    version: Vec<String>,
}

// afterburn's view of the shared config.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SharedConfig {
    incarnation: SharedIncarnation,
    instances: Instances,
}
#[derive(Debug, Deserialize)]
struct SharedIncarnation {
    #[serde(rename = "@instance")]
    instance: String,
}
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Instances {
    instance: Vec<Instance>,
}
#[derive(Debug, Deserialize)]
struct Instance {
    #[serde(rename = "@id")]
    id: String,
    #[serde(rename = "@address")]
    address: String,
    #[serde(rename = "InputEndpoints")]
    input_endpoints: InputEndpoints,
}
#[derive(Debug, Deserialize)]
struct InputEndpoints {
    #[serde(rename = "Endpoint", default)]
    endpoint: Vec<Endpoint>,
}
#[derive(Debug, Deserialize)]
struct Endpoint {
    #[serde(rename = "@loadBalancedPublicAddress")]
    load_balanced_public_address: String,
}

async fn fetch(
    addr: SocketAddr,
    target: &str,
    host: &str,
    headers: &[(&str, &str)],
) -> common::Response {
    response(exchange(addr, &get(target, host, headers), T).await)
}

const WS_HEADERS: &[(&str, &str)] = &[
    ("x-ms-agent-name", "WALinuxAgent"),
    ("x-ms-version", "2012-11-30"),
];

#[tokio::test]
async fn goal_state_satisfies_every_client() {
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let ws = fake.wireserver_addr().unwrap();

    // linuxkit asks without the slash and needs exactly 200; the others with it.
    for target in ["/machine/?comp=goalstate", "/machine?comp=goalstate"] {
        let r = fetch(ws, target, "168.63.129.16", WS_HEADERS).await;
        assert_eq!(r.status, 200, "{target}");
        assert_eq!(r.header("content-type"), Some("text/xml; charset=utf-8"));
    }
    let r = fetch(ws, "/machine/?comp=goalstate", "168.63.129.16", WS_HEADERS).await;
    let xml = r.text();

    // cloud-init: non-namespaced paths, so no default xmlns on <GoalState>.
    let root = &xml[xml.find("<GoalState").unwrap()..];
    let root_tag = &root[..root.find('>').unwrap()];
    assert!(
        !root_tag.contains("xmlns=\""),
        "default namespace on GoalState: {root_tag}"
    );

    let gs: GoalState = quick_xml::de::from_str(&xml).unwrap();
    // cloud-init, afterburn, WALA, azure-init: Incarnation; azure-init <= Aug 2025: Version.
    assert_eq!(gs.incarnation.as_deref(), Some("1"));
    assert!(gs.version.as_ref().is_some_and(|v| !v.is_empty()));
    // Everyone: ContainerId and a RoleInstance with InstanceId.
    assert!(
        gs.container
            .container_id
            .as_ref()
            .is_some_and(|c| !c.is_empty())
    );
    let first = gs
        .container
        .role_instance_list
        .role_instance
        .first()
        .expect("a RoleInstance");
    let instance_id = first.instance_id.clone().expect("InstanceId");
    assert_eq!(instance_id, fake.served_ids().instance_id);
    // afterburn: a <Configuration> element; WALA: Configuration/ConfigName.
    let config = first.configuration.as_ref().expect("Configuration");
    assert!(config.config_name.as_ref().is_some_and(|n| !n.is_empty()));
    // Ids free of characters afterburn would paste unescaped into its health XML.
    for id in [
        gs.incarnation.as_deref().unwrap_or_default(),
        instance_id.as_str(),
    ] {
        assert!(!id.contains(['&', '<', '>']), "{id}");
    }

    // WALA fetches every URL listed: each must be served (on the Host the agent used).
    let mut urls = vec![config.shared_config.clone().expect("SharedConfig")];
    urls.extend(config.certificates.clone());
    urls.extend(config.hosting_environment_config.clone());
    urls.extend(config.extensions_config.clone());
    for url in &urls {
        let rest = url
            .strip_prefix("http://168.63.129.16:80")
            .unwrap_or_else(|| panic!("URL not on the agent's host: {url}"));
        let r = fetch(ws, rest, "168.63.129.16", WS_HEADERS).await;
        assert_eq!(r.status, 200, "{url}");
    }

    // afterburn --attributes: the shared config names this instance, with parsable addresses.
    let shared = fetch(
        ws,
        config
            .shared_config
            .as_ref()
            .unwrap()
            .strip_prefix("http://168.63.129.16:80")
            .unwrap(),
        "168.63.129.16",
        WS_HEADERS,
    )
    .await;
    let shared: SharedConfig = quick_xml::de::from_str(&shared.text()).unwrap();
    let me = shared
        .instances
        .instance
        .iter()
        .find(|i| i.id == shared.incarnation.instance)
        .expect("an Instance whose id is Incarnation@instance");
    me.address.parse::<IpAddr>().unwrap();
    assert!(
        me.input_endpoints
            .endpoint
            .iter()
            .any(|e| e.load_balanced_public_address.parse::<SocketAddr>().is_ok())
    );

    // A loopback agent gets URLs on the loopback address it used.
    let host = ws.to_string();
    let r = fetch(ws, "/machine/?comp=goalstate", &host, WS_HEADERS).await;
    assert!(
        r.text()
            .contains(&format!("<SharedConfig>http://{host}/machine/")),
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn versions_list_2012_11_30_as_preferred_and_supported() {
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    // WALA sends no x-ms headers on this call.
    let r = fetch(
        fake.wireserver_addr().unwrap(),
        "/?comp=versions",
        "168.63.129.16",
        &[],
    )
    .await;
    assert_eq!(r.status, 200);
    let v: Versions = quick_xml::de::from_str(&r.text()).unwrap();
    assert!(
        v.preferred.version.iter().any(|x| x == "2012-11-30"),
        "WALA"
    );
    assert!(
        v.supported.version.iter().any(|x| x == "2012-11-30"),
        "afterburn"
    );
    assert!(
        fake.journal()[0]
            .findings
            .iter()
            .all(|f| f.id != "header.missing.x-ms-version")
    );
}

const MD: &[(&str, &str)] = &[("Metadata", "true")];

/// A fake that answers every IMDS request: these tests ask for many documents at once, which
/// IMDS's per-VM limit (5 a second, `imds_rate_limit.rs`) would refuse.
async fn unlimited_imds() -> Fake {
    let scenario = Scenario::new().imds_rate_limit(ImdsRateLimit::Off);
    Fake::start(FakeConfig::default().scenario(scenario))
        .await
        .unwrap()
}

#[tokio::test]
async fn imds_document_satisfies_every_client() {
    let fake = unlimited_imds().await;
    let imds = fake.imds_addr().unwrap();
    let host = "169.254.169.254";

    // azure-init main / cloud-init: the whole document, extended.
    for target in [
        "/metadata/instance?api-version=2023-11-15&extended=true",
        "/metadata/instance?api-version=2021-08-01&extended=true",
    ] {
        let r = fetch(imds, target, host, MD).await;
        assert_eq!(r.status, 200, "{target}");
        assert!(
            r.header("content-type")
                .unwrap()
                .starts_with("application/json")
        );
        let doc: Value = serde_json::from_slice(&r.body).unwrap();
        let os = &doc["compute"]["osProfile"];
        assert!(os["adminUsername"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(os["computerName"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(matches!(
            os["disablePasswordAuthentication"].as_str(),
            Some("true" | "false")
        ));
        let keys = doc["compute"]["publicKeys"].as_array().unwrap();
        for k in keys {
            // afterburn: empty keyData is an error.
            assert!(k["keyData"].as_str().is_some_and(|s| s.starts_with("ssh-")));
            assert!(k["path"].is_string());
        }
        assert_eq!(doc["extended"]["compute"]["hasCustomData"], false);
        assert_eq!(doc["extended"]["compute"]["ppsType"], "None");
    }
    // cloud-init's fallback and crates.io azure-init: no `extended`.
    let r = fetch(imds, "/metadata/instance?api-version=2019-06-01", host, MD).await;
    let doc: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(doc.get("extended").is_none());

    // WALA.
    for target in [
        "/metadata/instance/compute?api-version=2018-02-01",
        "/metadata/instance/?api-version=2018-02-01",
    ] {
        let r = fetch(imds, target, host, &[("Metadata", "True")]).await;
        assert_eq!(r.status, 200, "{target}");
        serde_json::from_slice::<Value>(&r.body).unwrap();
    }

    // afterburn and linuxkit leaves, as text.
    for (target, want) in [
        (
            "/metadata/instance/compute/name?api-version=2017-08-01&format=text",
            "fake-vm",
        ),
        (
            "/metadata/instance/compute/vmSize?api-version=2017-08-01&format=text",
            "Standard_D2s_v3",
        ),
        (
            "/metadata/instance/compute/osProfile/adminUsername?api-version=2021-02-01&format=text",
            "azureuser",
        ),
        (
            "/metadata/instance/compute/vmId?api-version=2021-01-01&format=text",
            "b61f93d0-e1ed-40b2-b067-22c243233448",
        ),
        (
            "/metadata/instance/compute/userData?api-version=2021-01-01&format=text",
            "",
        ),
    ] {
        let r = fetch(imds, target, host, MD).await;
        assert_eq!((r.status, r.text().as_str()), (200, want), "{target}");
        assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    }
    let r = fetch(
        imds,
        "/metadata/instance/compute/publicKeys/0/keyData?api-version=2021-01-01&format=text",
        host,
        MD,
    )
    .await;
    assert!(r.text().starts_with("ssh-ed25519 "));
    let r = fetch(
        imds,
        "/metadata/instance/compute/publicKeys?api-version=2021-02-01",
        host,
        MD,
    )
    .await;
    assert!(serde_json::from_slice::<Value>(&r.body).unwrap().is_array());

    let r = fetch(imds, "/metadata/versions", host, MD).await;
    assert_eq!(r.status, 200);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(
        v["apiVersions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x == "2021-08-01")
    );
}

/// Target, headers, expected status, expected finding id (or "").
type RefusalCase<'a> = (&'a str, &'a [(&'a str, &'a str)], u16, &'a str);

#[tokio::test]
async fn imds_refuses_like_the_platform() {
    let fake = unlimited_imds().await;
    let imds = fake.imds_addr().unwrap();
    let host = "169.254.169.254";
    let cases: &[RefusalCase] = &[
        (
            "/metadata/instance?api-version=2021-02-01",
            &[],
            400,
            "header.missing.metadata",
        ),
        (
            "/metadata/instance?api-version=2021-02-01",
            &[("Metadata", "false")],
            400,
            "header.unusual.metadata",
        ),
        ("/metadata/instance", MD, 400, "query.missing.api-version"),
        (
            "/metadata/instance?api-version=1999-01-01",
            MD,
            400,
            "query.unsupported.api-version",
        ),
        (
            "/metadata/instance?api-version=2021-02-01&api-version=2021-02-01",
            MD,
            400,
            "query.duplicate",
        ),
        (
            "/metadata/instance?api-version=2021-02-01",
            &[("Metadata", "true"), ("X-Forwarded-For", "10.0.0.9")],
            400,
            "header.forbidden.x-forwarded-for",
        ),
        (
            "/metadata/instance/compute/name?api-version=2021-02-01",
            MD,
            400,
            "",
        ),
        (
            "/metadata/instance/compute/nothing?api-version=2021-02-01&format=text",
            MD,
            404,
            "",
        ),
        (
            "/metadata/identity/oauth2/token?api-version=2018-02-01",
            MD,
            404,
            "path.unknown",
        ),
        (
            "/metadata/reprovisiondata?api-version=2019-06-01",
            MD,
            404,
            "",
        ),
    ];
    for (target, headers, status, finding) in cases {
        let r = fetch(imds, target, host, headers).await;
        assert_eq!(r.status, *status, "{target} {headers:?}");
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert!(body["error"].is_string(), "{target}: {body}");
        if !finding.is_empty() {
            let e = fake.journal().into_iter().last().unwrap();
            assert!(
                e.findings.iter().any(|f| f.id == *finding),
                "{target}: {:?}",
                e.findings
            );
        }
    }
    let r = fetch(imds, "/metadata/instance", host, MD).await;
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("api-version was not specified")
    );
    assert!(
        body["newest-versions"]
            .as_array()
            .is_some_and(|v| !v.is_empty())
    );
}
