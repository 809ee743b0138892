//! cloud-init 22.4.2, unmodified, against the fake-wireserver binary: its own
//! `get_metadata_from_fabric` / `report_failure_to_fabric` (through
//! conformance/agents/cloud-init-driver.py) with its Hyper-V KVP handler registered as
//! `telemetry`. Attached by URL (`127.0.0.1:PORT` endpoint) and through the fake's HTTP proxy
//! (`http_proxy`, endpoint `168.63.129.16`), always in a private network namespace with a
//! private /var/log (so cloud-init's log dump into KVP does not depend on the host).

use std::path::Path;

use conformance::snapshot::raw as normalize;
use fake_wireserver::{EndpointId, HealthState, Listener, SubStatus};
use wirecheck_e2e::{
    AgentRun, Attach, NetnsRun, cloud_init_driver, cloud_init_python, header_names, vector,
    vector_header_names,
};
use wirecheck_oracle::{Severity, kvp};

const HARNESS: &str = env!("CARGO_BIN_EXE_e2e-netns-run");

/// cloud-init's default failure description (22.4.2; docs/protocol.md §4.2).
const DEFAULT_DESCRIPTION: &str = "The VM encountered an error during deployment. Please visit \
     https://aka.ms/linuxprovisioningerror for more information on remediation.";

struct CloudInitRun {
    run: AgentRun,
    pool: Vec<u8>,
}

fn cloud_init(dir: &Path, attach: Attach, action: &[&str], scenario: Option<&str>) -> CloudInitRun {
    let python = cloud_init_python();
    let driver = cloud_init_driver();
    let pool = dir.join("kvp_pool_1");
    let state = dir.join("state");
    let endpoint = match attach {
        Attach::Url => "{wireserver}",
        Attach::Proxy => "168.63.129.16",
    };
    let mut netns = NetnsRun::new(HARNESS, dir, attach).tmpfs("/var/log");
    if let Some(text) = scenario {
        let file = dir.join("scenario.toml");
        std::fs::write(&file, text).unwrap();
        netns = netns
            .fake_arg("--scenario")
            .fake_arg(file.to_str().unwrap());
    }
    let mut agent = vec![
        python.to_str().unwrap(),
        driver.to_str().unwrap(),
        "--endpoint",
        endpoint,
        "--kvp-pool",
        pool.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ];
    agent.extend_from_slice(action);
    let run = netns.run(&agent);
    let pool = std::fs::read(&pool).unwrap_or_default();
    CloudInitRun { run, pool }
}

/// The pool as the host would see it: whole records, no error findings, the named telemetry
/// events present with the expected result.
fn judge_pool(pool: &[u8], finished: &[(&str, &str)]) {
    let view = kvp::decode_pool(pool);
    assert!(!view.records.is_empty(), "cloud-init wrote no KVP records");
    assert_eq!(view.size % kvp::RECORD_SIZE, 0);
    let errors: Vec<_> = view
        .all_findings()
        .filter(|f| f.severity == Severity::Error)
        .collect();
    assert!(errors.is_empty(), "KVP errors: {errors:#?}");
    for split in kvp::cloud_init_split_events(&view) {
        assert!(
            split.message.is_some(),
            "split event does not rebuild: {split:#?}"
        );
    }
    let events = normalize::cloud_init_events(pool);
    for (name, result) in finished {
        assert!(
            events.iter().any(|e| e["event"]["name"] == *name
                && e["event"]["type"] == "finish"
                && e["event"]["result"] == *result),
            "no finish event {name} {result} in {events:#?}"
        );
    }
}

fn assert_health_headers_match_vector(run: &AgentRun, vector_path: &str) {
    let health = run.single(EndpointId::WireserverHealthXml);
    assert_eq!(
        header_names(health),
        vector_header_names(&vector(vector_path)),
        "cloud-init's header names/order differ from the captured vector"
    );
}

#[test]
fn cloud_init_reports_ready_by_url() {
    let dir = tempfile::tempdir().unwrap();
    let CloudInitRun { run, pool } = cloud_init(dir.path(), Attach::Url, &["ready"], None);
    run.assert_success();

    assert_eq!(
        normalize::exchange(&run.journal),
        [
            "GET /machine/?comp=goalstate [wireserver.goalstate via wireserver] -> 200",
            "POST /machine?comp=health [wireserver.health.xml via wireserver] -> 200",
        ]
    );
    let health = run.single(EndpointId::WireserverHealthXml);
    let report = health.report.as_ref().expect("parsed health report");
    assert_eq!(report.state, Some(HealthState::Ready));
    assert_eq!(report.substatus, None);
    assert_eq!(report.description, None);
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert_health_headers_match_vector(&run, "cloud-init-22.4.2/02-ready-health.json");

    judge_pool(
        &pool,
        &[
            ("azure-ds/get_metadata_from_fabric", "SUCCESS"),
            ("azure-ds/send_ready_signal", "SUCCESS"),
        ],
    );
    insta::assert_json_snapshot!("cloud_init_ready_url_health", normalize::entry(health));
    insta::assert_json_snapshot!(
        "cloud_init_ready_url_kvp",
        normalize::cloud_init_events(&pool)
    );
}

#[test]
fn cloud_init_reports_failure_by_url_with_its_description_as_sent() {
    let dir = tempfile::tempdir().unwrap();
    // ASCII only: 22.4.2 sends the body Latin-1 encoded (vectors/README.md).
    let description =
        "disk setup failed: pipe| apos' quote\" amp& lt< gt> back\\slash\ttab\nnewline";
    let CloudInitRun { run, pool } = cloud_init(
        dir.path(),
        Attach::Url,
        &["failure", "--description", description],
        None,
    );
    run.assert_success();

    let health = run.single(EndpointId::WireserverHealthXml);
    let report = health.report.as_ref().expect("parsed health report");
    assert_eq!(report.state, Some(HealthState::NotReady));
    assert_eq!(report.substatus, Some(SubStatus::ProvisioningFailed));
    assert_eq!(report.description.as_deref(), Some(description));
    assert_eq!(report.encoded, None, "22.4.2 sends no encoded report");
    assert_health_headers_match_vector(&run, "cloud-init-22.4.2/04-failure-tricky-health.json");

    judge_pool(&pool, &[("azure-ds/report_failure_to_fabric", "SUCCESS")]);
    insta::assert_json_snapshot!("cloud_init_failure_url_health", normalize::entry(health));
}

#[test]
fn cloud_init_trims_a_long_failure_description_to_512_characters() {
    let dir = tempfile::tempdir().unwrap();
    let description: String = (0..60).map(|i| format!("step {i:03} failed; ")).collect();
    assert!(description.len() > 512);
    let CloudInitRun { run, .. } = cloud_init(
        dir.path(),
        Attach::Url,
        &["failure", "--description", &description],
        None,
    );
    run.assert_success();
    let report = run
        .single(EndpointId::WireserverHealthXml)
        .report
        .clone()
        .unwrap();
    assert_eq!(report.description.as_deref(), Some(&description[..512]));
}

#[test]
fn cloud_init_reports_ready_through_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let CloudInitRun { run, pool } = cloud_init(dir.path(), Attach::Proxy, &["ready"], None);
    run.assert_success();

    // Absolute-form targets naming the real address: cloud-init went through the proxy.
    assert_eq!(
        normalize::exchange(&run.journal),
        [
            "GET http://168.63.129.16/machine/?comp=goalstate [wireserver.goalstate via proxy] -> 200",
            "POST http://168.63.129.16/machine?comp=health [wireserver.health.xml via proxy] -> 200",
        ]
    );
    let health = run.single(EndpointId::WireserverHealthXml);
    assert_eq!(health.header("Host"), Some("168.63.129.16"));
    let report = health.report.as_ref().unwrap();
    assert_eq!(report.state, Some(HealthState::Ready));
    assert!(report.findings.is_empty(), "{:#?}", report.findings);

    judge_pool(&pool, &[("azure-ds/get_metadata_from_fabric", "SUCCESS")]);
    insta::assert_json_snapshot!("cloud_init_ready_proxy_health", normalize::entry(health));
    insta::assert_json_snapshot!(
        "cloud_init_ready_proxy_kvp",
        normalize::cloud_init_events(&pool)
    );
}

#[test]
fn cloud_init_reports_its_default_failure_through_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let CloudInitRun { run, pool } = cloud_init(dir.path(), Attach::Proxy, &["failure"], None);
    run.assert_success();

    let health = run.single(EndpointId::WireserverHealthXml);
    assert_eq!(health.listener, Listener::Proxy);
    assert_eq!(health.target, "http://168.63.129.16/machine?comp=health");
    let report = health.report.as_ref().unwrap();
    assert_eq!(report.state, Some(HealthState::NotReady));
    assert_eq!(report.substatus, Some(SubStatus::ProvisioningFailed));
    assert_eq!(report.description.as_deref(), Some(DEFAULT_DESCRIPTION));

    judge_pool(&pool, &[("azure-ds/report_failure_to_fabric", "SUCCESS")]);
    insta::assert_json_snapshot!("cloud_init_failure_proxy_health", normalize::entry(health));
}

#[test]
fn cloud_init_retries_a_goal_state_the_fake_refused_once() {
    let dir = tempfile::tempdir().unwrap();
    // One 503, then the default answer: cloud-init 22.4.2 sleeps its fixed 5 s and retries
    // (docs/protocol.md §8); a single retry keeps the test short.
    let scenario = r#"
name = "goal state unavailable once"

[[endpoint]]
id = "wireserver.goalstate"

[[endpoint.step]]
kind = "respond"
status = 503
"#;
    let CloudInitRun { run, pool } =
        cloud_init(dir.path(), Attach::Url, &["ready"], Some(scenario));
    run.assert_success();

    let goal_states = run.entries(EndpointId::WireserverGoalstate);
    let statuses: Vec<_> = goal_states.iter().map(|e| e.answer.status).collect();
    assert_eq!(statuses, [Some(503), Some(200)]);
    let gap_ms = goal_states[1].at_ms - goal_states[0].at_ms;
    assert!(
        (4_000..30_000).contains(&gap_ms),
        "retry after {gap_ms} ms; cloud-init 22.4.2 sleeps 5 s between attempts"
    );
    let report = run
        .single(EndpointId::WireserverHealthXml)
        .report
        .clone()
        .unwrap();
    assert_eq!(report.state, Some(HealthState::Ready));
    // The failed attempt is visible to the host as a diagnostic event.
    let events = normalize::cloud_init_events(&pool);
    assert!(
        events.iter().any(|e| e["event"]["type"] == "diagnostic"
            && e["event"]["msg"]
                .as_str()
                .is_some_and(|m| m.contains("Failed HTTP request") && m.contains("503"))),
        "{events:#?}"
    );
}
