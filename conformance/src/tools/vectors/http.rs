//! `http/<agent>/*.json`: request vectors replayed byte for byte to an
//! in-process fake (journal classification vs `expected`), and response
//! vectors compared to the fake's own canned answer.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fake_wireserver::journal::Entry;
use fake_wireserver::{EndpointId, Fake, FakeConfig, Scenario};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::fixed::FIXED;
use super::raw::{RawResponse, exchange};
use super::{VectorOutcome, differs, read_json, relative};
use crate::tools::ToolError;

const WIRESERVER_HOST: &str = "168.63.129.16";
const IMDS_HOST: &str = "169.254.169.254";
/// How long to wait for the fake to finish journaling an answered request.
const JOURNAL_WAIT: Duration = Duration::from_secs(5);

#[derive(Deserialize)]
struct RequestVector {
    method: String,
    target: String,
    http_version: String,
    headers: Vec<(String, String)>,
    #[serde(default)]
    body: String,
    #[serde(default)]
    body_b64: Option<String>,
    expected: Map<String, Value>,
}

#[derive(Deserialize)]
struct ResponseVector {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
    #[serde(default)]
    expected: Map<String, Value>,
}

/// Where the fake listens.
struct Addresses {
    wireserver: SocketAddr,
    imds: SocketAddr,
    hostplugin: SocketAddr,
    proxy: Option<SocketAddr>,
}

pub(super) async fn check_all(
    dir: &Path,
    files: &[PathBuf],
) -> Result<Vec<VectorOutcome>, ToolError> {
    let base = scenario(&FIXED.scenario_toml())?;
    let fake = Fake::start(
        FakeConfig::default()
            .scenario(base.clone())
            .with_proxy()
            .hostplugin(Some(SocketAddr::from(([127, 0, 0, 1], 0)))),
    )
    .await
    .map_err(|e| ToolError::Fake(e.to_string()))?;
    let listening = |addr: Option<SocketAddr>, what: &str| {
        addr.ok_or_else(|| ToolError::Fake(format!("the fake has no {what} listener")))
    };
    let addresses = Addresses {
        wireserver: listening(fake.wireserver_addr(), "wireserver")?,
        imds: listening(fake.imds_addr(), "IMDS")?,
        hostplugin: listening(fake.hostplugin_addr(), "HostGAPlugin")?,
        proxy: fake.proxy_addr(),
    };
    let mut outcomes = Vec::with_capacity(files.len());
    for file in files {
        let name = relative(dir, file);
        let mismatches = match read_json(file) {
            Err(e) => vec![e],
            Ok(vector) => match vector["kind"].as_str() {
                Some("request") => replay(&fake, &addresses, &base, vector).await,
                Some("response") => response(&fake, &addresses, vector).await,
                other => vec![format!(
                    "kind {}: expected \"request\" or \"response\"",
                    other.map_or("missing".to_string(), |k| format!("{k:?}"))
                )],
            },
        };
        outcomes.push(VectorOutcome::new(name, mismatches));
    }
    fake.shutdown()
        .await
        .map_err(|e| ToolError::Fake(e.to_string()))?;
    Ok(outcomes)
}

fn scenario(toml: &str) -> Result<Scenario, ToolError> {
    Scenario::from_toml_str(toml, "<vectors check>").map_err(|e| ToolError::Fake(e.to_string()))
}

/// Parses `toml` and makes it the fake's scenario.
fn load(fake: &Fake, toml: &str) -> Result<(), ToolError> {
    fake.load_scenario(scenario(toml)?)
        .map_err(|e| ToolError::Fake(e.to_string()))
}

/// Replays one request vector and compares the journal entry with `expected`.
async fn replay(fake: &Fake, addresses: &Addresses, base: &Scenario, vector: Value) -> Vec<String> {
    let vector: RequestVector = match serde_json::from_value(vector) {
        Ok(v) => v,
        Err(e) => return vec![format!("not a request vector: {e}")],
    };
    let body = match &vector.body_b64 {
        Some(b64) => {
            use base64::Engine as _;
            match base64::engine::general_purpose::STANDARD.decode(b64) {
                Ok(bytes) => bytes,
                Err(e) => return vec![format!("body_b64: {e}")],
            }
        }
        None => vector.body.clone().into_bytes(),
    };
    let Some(addr) = route(addresses, &vector) else {
        return vec![format!(
            "absolute-form target {} needs the fake's proxy listener, which is not running",
            vector.target
        )];
    };

    // A vector recorded against a deliberate error status gets that status once.
    let forced = vector
        .expected
        .get("fake_responded")
        .and_then(Value::as_u64);
    if let Some(status) = forced {
        let endpoint = vector
            .expected
            .get("endpoint")
            .and_then(Value::as_str)
            .unwrap_or("*");
        let toml = format!(
            "{}\n[[endpoint]]\nid = \"{endpoint}\"\nend = \"default\"\n[[endpoint.step]]\nkind = \"respond\"\nstatus = {status}\n",
            FIXED.scenario_toml()
        );
        if let Err(e) = load(fake, &toml) {
            return vec![format!("fake_responded {status}: {e}")];
        }
    }

    let before = fake.journal().last().map_or(0, |e| e.seq);
    let mut request = format!(
        "{} {} {}\r\n",
        vector.method, vector.target, vector.http_version
    )
    .into_bytes();
    for (name, value) in &vector.headers {
        request.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(&body);
    let answered = exchange(addr, &request).await;
    let entry = journaled(fake, before, &vector.target).await;
    if forced.is_some() {
        // `base` was loaded once already: it cannot be refused now.
        let _ = fake.load_scenario(base.clone());
    }

    let mut mismatches = Vec::new();
    if let Err(e) = &answered {
        mismatches.push(e.clone());
    }
    match entry {
        Some(entry) => mismatches.extend(compare(&vector.expected, &entry, answered.ok().as_ref())),
        None => mismatches.push("the fake journaled no entry for this request".into()),
    }
    mismatches
}

/// The listener an agent's request would have reached: proxy for absolute-form
/// targets, else by the Host header (the vectors carry the real addresses).
fn route(addresses: &Addresses, vector: &RequestVector) -> Option<SocketAddr> {
    if vector.target.starts_with("http://") || vector.target.starts_with("https://") {
        return addresses.proxy;
    }
    let host_header = vector
        .headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.trim());
    if host_header.and_then(fake_wireserver::endpoint::port_of)
        == Some(fake_wireserver::endpoint::HOSTPLUGIN_PORT)
    {
        return Some(addresses.hostplugin);
    }
    let host = host_header.map(fake_wireserver::endpoint::host_of);
    // The vector's expected id, when it names one (data: an unknown id is compared later).
    let endpoint = vector
        .expected
        .get("endpoint")
        .and_then(Value::as_str)
        .and_then(|id| id.parse::<EndpointId>().ok());
    Some(match host {
        Some(IMDS_HOST) => addresses.imds,
        Some(WIRESERVER_HOST) => addresses.wireserver,
        _ if endpoint.is_some_and(EndpointId::is_imds) => addresses.imds,
        _ => addresses.wireserver,
    })
}

/// The first entry after `before` for `target`, once the fake has finished it.
async fn journaled(fake: &Fake, before: u64, target: &str) -> Option<Entry> {
    let deadline = tokio::time::Instant::now() + JOURNAL_WAIT;
    loop {
        let entry = fake
            .journal()
            .into_iter()
            .find(|e| e.seq > before && e.target == target);
        match entry {
            Some(entry) if entry.done_ms.is_some() => return Some(entry),
            other if tokio::time::Instant::now() >= deadline => return other,
            _ => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// Compares each `expected` key with what the fake concluded.
fn compare(
    expected: &Map<String, Value>,
    entry: &Entry,
    answer: Option<&RawResponse>,
) -> Vec<String> {
    let mut mismatches = Vec::new();
    let mut check = |key: &str, actual: Value| {
        if let Some(want) = expected.get(key)
            && *want != actual
        {
            mismatches.push(differs(key, want, &actual));
        }
    };
    let report = entry.report.as_ref();
    check("endpoint", json!(entry.endpoint));
    check("type", json!(entry.query("type")));
    check(
        "goal_state_incarnation",
        json!(report.and_then(|r| r.goal_state_incarnation.clone())),
    );
    check(
        "container_id",
        json!(report.and_then(|r| r.container_id.clone())),
    );
    check(
        "instance_id",
        json!(report.and_then(|r| r.instance_id.clone())),
    );
    check("state", json!(report.and_then(|r| r.state.clone())));
    check("substatus", json!(report.and_then(|r| r.substatus.clone())));
    check(
        "description",
        json!(report.and_then(|r| r.description.clone())),
    );
    check(
        "report",
        json!(
            report
                .and_then(|r| r.encoded.as_ref())
                .map(|e| json!({"dialect": e.dialect, "fields": e.fields}))
        ),
    );
    check("imds_path", json!(entry.path()));
    check("api_version", json!(entry.query("api-version")));
    check("query", json!(entry.query_pairs()));
    check("metadata_header", json!(entry.header("Metadata")));
    check("fake_responded", json!(entry.answer.status));
    mismatches.extend(description_input(expected, entry));
    mismatches.extend(unknown_keys(expected));
    mismatches.extend(abnormal_answer(expected, entry, answer));
    mismatches
}

/// The vector's `description_input`: what the agent was asked to report, against the parsed
/// description.
fn description_input(expected: &Map<String, Value>, entry: &Entry) -> Option<String> {
    let report = entry.report.as_ref();
    // cloud-init cuts descriptions to 512 characters: the parsed description
    // must be the input, cut when the vector says so.
    let input = expected.get("description_input").and_then(Value::as_str)?;
    let trimmed = expected
        .get("description_trimmed_to_512")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let sent: String = if trimmed {
        input.chars().take(512).collect()
    } else {
        input.to_string()
    };
    let parsed = report.and_then(|r| r.description.clone());
    (parsed.as_deref() != Some(sent.as_str())).then(|| {
        differs(
            if trimmed {
                "description_input (first 512 characters)"
            } else {
                "description_input"
            },
            &json!(sent),
            &json!(parsed),
        )
    })
}

/// Keys of `expected` this comparison does not know: said, never ignored.
fn unknown_keys(expected: &Map<String, Value>) -> Vec<String> {
    const KNOWN: [&str; 16] = [
        "endpoint",
        "type",
        "goal_state_incarnation",
        "container_id",
        "instance_id",
        "state",
        "substatus",
        "description",
        "report",
        "imds_path",
        "api_version",
        "query",
        "metadata_header",
        "fake_responded",
        "description_input",
        "description_trimmed_to_512",
    ];
    expected
        .keys()
        .filter(|k| !KNOWN.contains(&k.as_str()))
        .map(|key| format!("expected.{key}: unknown key, cannot check it"))
        .collect()
}

/// Without `fake_responded` in the vector, an answer other than the normal one.
fn abnormal_answer(
    expected: &Map<String, Value>,
    entry: &Entry,
    answer: Option<&RawResponse>,
) -> Option<String> {
    if expected.contains_key("fake_responded") {
        return None;
    }
    // The fake answers normally: XML health 200, JSON health 201, the rest 2xx.
    let normal = match entry.endpoint {
        EndpointId::WireserverHealthJson => Some(201),
        EndpointId::WireserverHealthXml => Some(200),
        EndpointId::WireserverRoleProperties => Some(202),
        // No Fast Track; no IMDS documents on the wireserver (docs/protocol.md §1.1, §9.1).
        EndpointId::HostpluginVmsettings | EndpointId::WireserverMetadata => Some(404),
        _ => None,
    };
    let status = answer.map(|a| a.status);
    let fine = match (normal, status) {
        (Some(want), Some(got)) => want == got,
        (None, Some(got)) => (200..300).contains(&got),
        (_, None) => true, // the exchange error is already reported
    };
    (!fine).then(|| {
        format!(
            "the fake answered {} ({}); a normal answer was expected",
            status.map_or("nothing".into(), |s| s.to_string()),
            entry.answer.kind
        )
    })
}

/// The platform's throttling reply vs the fake's `throttled` preset.
async fn response(fake: &Fake, addresses: &Addresses, vector: Value) -> Vec<String> {
    let vector: ResponseVector = match serde_json::from_value(vector) {
        Ok(v) => v,
        Err(e) => return vec![format!("not a response vector: {e}")],
    };
    let mut mismatches = Vec::new();
    let throttled = vector.expected.get("throttled").and_then(Value::as_bool) == Some(true);
    if !throttled {
        return vec![
            "only throttling replies (expected.throttled = true) can be compared with the fake"
                .into(),
        ];
    }
    let toml = format!(
        "{}\n[[endpoint]]\nid = \"wireserver.goalstate\"\nend = \"default\"\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"throttled\"\n",
        FIXED.scenario_toml()
    );
    if let Err(e) = load(fake, &toml) {
        return vec![format!("throttled preset: {e}")];
    }
    let request = format!(
        "GET /machine/?comp=goalstate HTTP/1.1\r\nHost: {WIRESERVER_HOST}\r\nx-ms-version: 2012-11-30\r\nx-ms-agent-name: wirecheck\r\n\r\n"
    );
    let answered = exchange(addresses.wireserver, request.as_bytes()).await;
    let _ = load(fake, &FIXED.scenario_toml());
    let answer = match answered {
        Ok(answer) => answer,
        Err(e) => return vec![e],
    };
    if answer.status != vector.status {
        mismatches.push(differs(
            "status",
            &json!(vector.status),
            &json!(answer.status),
        ));
    }
    for (name, value) in &vector.headers {
        let got = answer.header(name);
        if got != Some(value.as_str()) {
            mismatches.push(differs(
                &format!("header {name}"),
                &json!(value),
                &json!(got),
            ));
        }
    }
    if !vector
        .headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("retry-after"))
        && let Some(value) = answer.header("retry-after")
    {
        mismatches.push(format!(
            "header Retry-After: the platform sends none, the fake sends {value:?}"
        ));
    }
    // Match on Code, never on whitespace or length (docs/protocol.md §8.1).
    let body = String::from_utf8_lossy(&answer.body);
    let theirs = xml_code(&vector.body);
    if let Some(code) = vector.expected.get("code")
        && json!(theirs) != *code
    {
        mismatches.push(differs(
            "vector body <Code> vs expected.code",
            code,
            &json!(theirs),
        ));
    }
    let ours = xml_code(&body);
    if ours != theirs {
        mismatches.push(differs("body <Code>", &json!(theirs), &json!(ours)));
    }
    mismatches
}

fn xml_code(body: &str) -> Option<String> {
    let start = body.find("<Code>")? + "<Code>".len();
    let end = start + body[start..].find("</Code>")?;
    Some(body[start..end].trim().to_string())
}
