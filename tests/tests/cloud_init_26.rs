//! cloud-init 26.2 (Debian unstable's package, unpacked by scripts/install-agents.sh),
//! unmodified, against the fake-wireserver binary through
//! conformance/agents/cloud-init-26-driver.py: its own encoder
//! (`errors.ReportableError.as_encoded_report(vm_id=...)`), its KVP handler and its wireserver
//! client, in a private network namespace with a private /var/log.
//!
//! * Hostile reasons and data go through cloud-init's encoder and come back out of the
//!   oracle's parser unchanged; the health description and the PROVISIONING_REPORT record are
//!   that report cut to 512 and 1023 characters.
//! * The success record carries the VM id the driver's firmware holds, and since 26.1 every
//!   event key carries it too (`CLOUD_INIT|<incarnation>|<type>|<name>|<vm_id>|<uuid>`).
//! * `wirecheck run --agent cloud-init-26.2`: the column of docs/matrix.md, every judged
//!   verdict snapshotted.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use fake_wireserver::{EndpointId, HealthState};
use wirecheck_e2e::{
    AgentRun, Attach, NetnsRun, cloud_init_26_driver, cloud_init_26_pythonpath, require_root,
    workspace_binary,
};
use wirecheck_oracle::encoded::{self, Dialect, Mode};
use wirecheck_oracle::{Severity, kvp};

const HARNESS: &str = env!("CARGO_BIN_EXE_e2e-netns-run");
const VM_ID: &str = "0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a";
/// What the driver's diagnostic event says before the report (DataSourceAzure._report_failure).
const FAILURE_EVENT: &str = "Azure datasource failure occurred: ";

struct Run26 {
    run: AgentRun,
    pool: Vec<u8>,
}

fn cloud_init_26(dir: &Path, action: &[&str]) -> Run26 {
    let pythonpath = format!("PYTHONPATH={}", cloud_init_26_pythonpath().display());
    let driver = cloud_init_26_driver();
    let pool = dir.join("kvp_pool_1");
    let state = dir.join("state");
    let mut agent = vec![
        "/usr/bin/env",
        pythonpath.as_str(),
        "/usr/bin/python3",
        driver.to_str().unwrap(),
        "--endpoint",
        "{wireserver}",
        "--imds-url",
        "{imds}",
        "--kvp-pool",
        pool.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--vm-id",
        VM_ID,
    ];
    agent.extend_from_slice(action);
    let run = NetnsRun::new(HARNESS, dir, Attach::Url)
        .tmpfs("/var/log")
        .run(&agent);
    let pool = std::fs::read(&pool).unwrap_or_default();
    Run26 { run, pool }
}

/// The value of pool record `index` as written on disk (up to the first NUL).
fn on_disk_value(pool: &[u8], index: usize) -> String {
    let value = &pool[index * kvp::RECORD_SIZE + kvp::KEY_SIZE..(index + 1) * kvp::RECORD_SIZE];
    let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
    String::from_utf8(value[..end].to_vec()).expect("UTF-8 value")
}

fn chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

#[test]
fn hostile_reasons_and_data_round_trip_through_cloud_init_26_and_the_oracle() {
    let dir = tempfile::tempdir().unwrap();
    let reason = "pipe| 'single' \"double\" a=b=c CR\rLF\n tab\t back\\slash naïve café ✓ 日本";
    let long: String = (0..5000)
        .map(|i| ['x', '|', '\'', '"', '=', '\n', '\\', 'é', '€', '\t'][i % 10])
        .collect();
    let data: Vec<(&str, String)> = vec![
        ("pipe", "a|b|c".into()),
        ("quotes", "he said \"hi\" and 'bye'".into()),
        ("equals", "k=v=w".into()),
        ("crlf", "line1\r\nline2".into()),
        ("tab", "a\tb".into()),
        ("backslash", "C:\\path\\'x'".into()),
        ("unicode", "Grüße € 日本 ✓".into()),
        ("long", long.clone()),
    ];
    let pairs: Vec<String> = data
        .iter()
        .map(|(k, v)| format!("--data={k}={v}"))
        .collect();
    let mut action = vec!["failure", "--reason", reason];
    action.extend(pairs.iter().map(String::as_str));
    let Run26 { run, pool } = cloud_init_26(dir.path(), &action);
    run.assert_success();

    // The whole report as cloud-init encoded it: its own diagnostic event, split over KVP
    // records and rebuilt as the host would.
    let view = kvp::decode_pool(&pool);
    let full = kvp::cloud_init_split_events(&view)
        .into_iter()
        .filter_map(|e| e.message)
        .find_map(|m| m.strip_prefix(FAILURE_EVENT).map(str::to_owned))
        .expect("the failure diagnostic event rebuilds from the pool");
    let report = encoded::parse(&full, Mode::Strict)
        .unwrap_or_else(|e| panic!("cloud-init's report does not parse strictly: {e}\n{full}"));
    assert_eq!(report.dialect, Some(Dialect::CloudInit));
    let errors: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.severity != Severity::Info)
        .collect();
    assert!(errors.is_empty(), "{errors:#?}\n{full}");

    let mut expected: Vec<(String, String)> = vec![
        ("result".into(), "error".into()),
        ("reason".into(), reason.into()),
        ("agent".into(), "Cloud-Init/26.2".into()),
    ];
    expected.extend(data.iter().map(|(k, v)| (k.to_string(), v.clone())));
    let keys: Vec<&str> = report.fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys[keys.len() - 3..],
        ["vm_id", "timestamp", "documentation_url"]
    );
    assert_eq!(report.fields[..expected.len()], expected[..]);
    assert_eq!(report.get("vm_id"), Some(VM_ID));
    assert!(report.get("timestamp").unwrap().ends_with("+00:00"));

    // The health description: that report cut to 512 characters before XML escaping. cloud-init
    // escapes only `&`, `<`, `>` (xml.sax.saxutils.escape, sources/helpers/azure.py:658-661), so a
    // CR goes out raw, and XML 1.0 end-of-line handling (any parser's, the platform's too)
    // reads CR LF and a lone CR as LF: the CRs of a reason never reach the platform.
    let health = run.single(EndpointId::WireserverHealthXml);
    let sent = chars(&full, 512);
    assert!(sent.contains('\r'));
    assert!(
        health.body.contains("CR\rLF"),
        "cloud-init sends the CR raw"
    );
    let description = health.report.as_ref().unwrap().description.clone().unwrap();
    assert_eq!(description, sent.replace("\r\n", "\n").replace('\r', "\n"));
    // PROVISIONING_REPORT: cut to 1023 characters, more bytes than the host's 1022.
    let (index, _) = view
        .provisioning_report
        .as_ref()
        .expect("PROVISIONING_REPORT");
    let value = on_disk_value(&pool, *index);
    assert_eq!(value, chars(&full, 1023));
    assert!(value.len() > kvp::HOST_VALUE_MAX, "{} bytes", value.len());
    assert!(
        view.records[*index]
            .findings
            .iter()
            .any(|f| f.id == "kvp.value.over-host-limit"),
        "{:#?}",
        view.records[*index].findings
    );
}

#[test]
fn cloud_init_26_writes_its_success_report_to_kvp_before_reporting_ready() {
    let dir = tempfile::tempdir().unwrap();
    let Run26 { run, pool } = cloud_init_26(dir.path(), &["ready"]);
    run.assert_success();
    let endpoints: Vec<EndpointId> = run.journal.iter().map(|e| e.endpoint).collect();
    assert_eq!(
        endpoints,
        [
            EndpointId::ImdsInstance,
            EndpointId::WireserverGoalstate,
            EndpointId::WireserverHealthXml
        ]
    );
    let view = kvp::decode_pool(&pool);
    let (index, report) = view
        .provisioning_report
        .as_ref()
        .expect("PROVISIONING_REPORT");
    let keys: Vec<&str> = report.fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        ["result", "agent", "timestamp", "vm_id"],
        "{report:?}"
    );
    assert_eq!(report.get("result"), Some("success"));
    assert_eq!(report.get("vm_id"), Some(VM_ID));
    assert!(
        report.findings.iter().all(|f| f.severity == Severity::Info),
        "{:#?}",
        report.findings
    );
    // Written before any HTTP: its timestamp is before the fake saw the goal state request
    // (both clocks are this machine's; the fake's journal counts from its own start, so compare
    // with the record's own position: it precedes every send_ready_signal event).
    let ready_event = view
        .records
        .iter()
        .position(|r| r.key.contains("|start|azure-ds/send_ready_signal|"))
        .expect("send_ready_signal start event");
    assert!(
        *index < ready_event,
        "PROVISIONING_REPORT at {index}, ready at {ready_event}"
    );
    // 26.1: the VM id in the event keys once the handler knows it (kvp.get_kvp_handler sets
    // it when PROVISIONING_REPORT is written; before, the zero GUID or the raw system-uuid).
    // The Ready events are all raised after that.
    let ready: Vec<&str> = view
        .records
        .iter()
        .map(|r| r.key.as_str())
        .filter(|k| k.contains("|azure-ds/send_ready_signal|"))
        .collect();
    assert!(!ready.is_empty(), "send_ready_signal events");
    for key in ready {
        let fields: Vec<&str> = key.split('|').collect();
        assert_eq!(fields.len(), 6, "{key}");
        assert_eq!(fields[4], VM_ID, "{key}");
    }
    let health = run.single(EndpointId::WireserverHealthXml);
    assert_eq!(
        health.report.as_ref().unwrap().state,
        Some(HealthState::Ready)
    );
}

#[test]
fn wirecheck_run_judges_cloud_init_26_2() {
    require_root();
    cloud_init_26_pythonpath();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let output = Command::new(workspace_binary("wirecheck"))
        .args(["run", "--agent", "cloud-init-26.2", "--quiet", "--out"])
        .arg(&out)
        .current_dir(wirecheck_e2e::repo_root())
        .env_remove("WIRECHECK_CASES")
        .env_remove("WIRECHECK_EXCLUDE")
        .env_remove("WIRECHECK_PARTITION")
        .env_remove("WIRECHECK_STRICT")
        .output()
        .expect("cannot run wirecheck");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "wirecheck run failed\n{stdout}\n{stderr}"
    );
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let agents = results["agents"].as_array().expect("agents");
    assert_eq!(agents[0]["agent"], "cloud-init-26.2");
    let mut judged: BTreeMap<String, String> = BTreeMap::new();
    let mut reasons: BTreeMap<String, String> = BTreeMap::new();
    for case in agents[0]["cases"].as_array().expect("cases") {
        let id = case["id"].as_str().unwrap().to_owned();
        let verdict = case["verdict"].as_str().unwrap();
        let reason = case["reason"].as_str().unwrap_or_default();
        assert_ne!(verdict, "fail", "{id}: {reason}");
        if verdict == "skipped" && reason.contains("does not claim \"") {
            continue;
        }
        judged.insert(id.clone(), wirecheck_e2e::snapshot_verdict(&id, verdict));
        reasons.insert(id, reason.to_owned());
    }
    // The encoded report and PROVISIONING_REPORT cases of the XML failure scenarios are judged,
    // by the dialect the profile declares.
    for id in [
        "wire.health.xml.failure.report.description",
        "wire.health.xml.failure.kvp.report",
        "wire.health.xml.ready.kvp.report",
        "report.description.special.xml.report.description",
        "report.description.special.xml.kvp.report",
        "report.description.long.xml.report.description",
        "report.description.long.xml.kvp.report",
    ] {
        assert_eq!(judged.get(id).map(String::as_str), Some("pass"), "{id}");
    }
    // cloud-init cuts PROVISIONING_REPORT to 1023 characters; the host sees 1022 bytes.
    assert_eq!(
        judged["report.description.long.xml.kvp.pool"], "non-strict",
        "{}",
        reasons["report.description.long.xml.kvp.pool"]
    );
    assert!(
        reasons["report.description.long.xml.kvp.pool"]
            .contains("the host sees only the first 1022")
    );
    insta::assert_json_snapshot!("cloud_init_26_wirecheck_verdicts", judged);
}
