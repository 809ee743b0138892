//! libazureinit 0.1.1 (crates.io, azure-init's library), unmodified, through
//! `libazureinit-adapter`, against the fake-wireserver binary.
//!
//! The library's URLs are fixed to 168.63.129.16 and 169.254.169.254 (docs/protocol.md §9), so:
//! * proxy: `unshare --net` with `HTTP_PROXY` pointing at the fake's proxy listener (reqwest 0.11
//!   honours it); the addresses exist nowhere in the namespace, so only the proxy can answer;
//! * `fake-wireserver sandbox`: the fake on the real addresses, port 80, in its own namespaces;
//! * `wirecheck run --agent libazureinit-0.1.1`: the runner starts proxy agents in its own
//!   namespace, so the adapter moves itself into a new one and relays to the proxy.
//!
//! What azure-init of that era sends (docs/protocol.md §1.2, §2, §3.1, §4.1): IMDS
//! `api-version=2021-02-01` without `extended`, `GET /machine/?comp=goalstate`,
//! `POST /machine/?comp=health` with Ready only, `x-ms-agent-name: azure-init`,
//! `x-ms-version: 2012-11-30`, `Content-Type: text/xml;charset=utf-8`, no `User-Agent`, the
//! Health document one element per line without indentation.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use conformance::snapshot::raw as normalize;
use fake_wireserver::journal::Entry;
use fake_wireserver::{EndpointId, HealthState, Listener};
use serde_json::Value;
use wirecheck_e2e::{AgentRun, Attach, NetnsRun, require_root, run_sandbox, workspace_binary};

const HARNESS: &str = env!("CARGO_BIN_EXE_e2e-netns-run");

fn adapter() -> String {
    workspace_binary("libazureinit-adapter")
        .to_str()
        .expect("UTF-8 path")
        .to_owned()
}

fn header_names(entry: &Entry) -> Vec<&str> {
    entry.headers.iter().map(|(n, _)| n.as_str()).collect()
}

/// The IMDS query of 0.1.1: api-version 2021-02-01, no `extended`, `Metadata: true`.
fn assert_imds_query(run: &AgentRun) {
    let imds = run.single(EndpointId::ImdsInstance);
    assert_eq!(imds.method, "GET");
    assert_eq!(imds.path(), "/metadata/instance");
    assert_eq!(
        imds.query_pairs(),
        [("api-version".to_owned(), "2021-02-01".to_owned())],
        "0.1.1 asks for 2021-02-01 without extended=true"
    );
    assert_eq!(imds.header("Metadata"), Some("true"));
    assert_eq!(imds.answer.status, Some(200));
    assert!(imds.findings.is_empty(), "{:#?}", imds.findings);
}

/// The goal state GET and the Ready POST as azure-init ≤ Aug 2025 sends them.
fn assert_xml_flow(run: &AgentRun) {
    let goal_state = run.single(EndpointId::WireserverGoalstate);
    assert_eq!(goal_state.path(), "/machine/");
    assert_eq!(goal_state.header("x-ms-agent-name"), Some("azure-init"));
    assert_eq!(goal_state.header("x-ms-version"), Some("2012-11-30"));
    assert_eq!(goal_state.answer.status, Some(200));

    let health = run.single(EndpointId::WireserverHealthXml);
    assert_eq!(health.method, "POST");
    assert_eq!(
        health.path(),
        "/machine/",
        "the slash spelling (docs/protocol.md §1.1)"
    );
    assert_eq!(health.query("comp").as_deref(), Some("health"));
    assert_eq!(health.header("x-ms-agent-name"), Some("azure-init"));
    assert_eq!(health.header("x-ms-version"), Some("2012-11-30"));
    assert_eq!(
        health.header("Content-Type"),
        Some("text/xml;charset=utf-8")
    );
    assert_eq!(
        health.header("User-Agent"),
        None,
        "0.1.1 sends no User-Agent"
    );
    assert_eq!(health.answer.status, Some(200));

    let report = health.report.as_ref().expect("parsed health report");
    assert_eq!(report.state, Some(HealthState::Ready));
    assert_eq!(report.substatus, None);
    assert_eq!(report.description, None);
    // The ids echoed back are exactly the served ones (a mismatch would be a finding).
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert_eq!(report.goal_state_incarnation.as_deref(), Some("1"));
    assert_eq!(
        report.container_id.as_deref(),
        Some("c6d5526c-5ac2-4200-b6e2-56f2b70c5ab2")
    );
    assert_eq!(
        report.instance_id.as_deref(),
        Some("b61f93d0-e1ed-40b2-b067-22c243233448.MachineRole_IN_0")
    );
    // docs/protocol.md §4.1: one element per line, no indentation.
    assert!(
        health.body.lines().count() > 10
            && health.body.lines().all(|l| !l.starts_with([' ', '\t'])),
        "{}",
        health.body
    );
}

#[test]
fn libazureinit_reports_ready_through_the_proxy_in_a_netns() {
    let dir = tempfile::tempdir().unwrap();
    let run = NetnsRun::new(HARNESS, dir.path(), Attach::Proxy).run(&[&adapter(), "ready"]);
    run.assert_success();

    // Absolute-form targets: every request came through the proxy, in the library's order.
    assert_eq!(
        normalize::exchange(&run.journal),
        [
            "GET http://169.254.169.254/metadata/instance?api-version=2021-02-01 [imds.instance via proxy] -> 200",
            "GET http://168.63.129.16/machine/?comp=goalstate [wireserver.goalstate via proxy] -> 200",
            "POST http://168.63.129.16/machine/?comp=health [wireserver.health.xml via proxy] -> 200",
        ]
    );
    assert_imds_query(&run);
    assert_xml_flow(&run);
    let health = run.single(EndpointId::WireserverHealthXml);
    assert_eq!(health.header("host"), Some("168.63.129.16"));
    assert_eq!(
        header_names(health),
        [
            "x-ms-agent-name",
            "x-ms-version",
            "content-type",
            "accept",
            "host",
            "content-length"
        ]
    );
    // The netns has nothing but lo: the adapter called the library in place.
    assert!(
        !run.stderr.contains("not isolated"),
        "the adapter re-isolated itself inside a private netns:\n{}",
        run.stderr
    );
    insta::assert_json_snapshot!("libazureinit_ready_proxy_health", normalize::entry(health));
}

#[test]
fn libazureinit_reports_ready_inside_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = run_sandbox(dir.path(), &["--timeout", "60"], &[&adapter(), "ready"]);
    sandbox.run.assert_success();
    assert_eq!(sandbox.summary["exit_status"], 0);

    // Origin-form targets on the two listeners: the library talked to the real addresses.
    assert_eq!(
        normalize::exchange(&sandbox.run.journal),
        [
            "GET /metadata/instance?api-version=2021-02-01 [imds.instance via imds] -> 200",
            "GET /machine/?comp=goalstate [wireserver.goalstate via wireserver] -> 200",
            "POST /machine/?comp=health [wireserver.health.xml via wireserver] -> 200",
        ]
    );
    assert_imds_query(&sandbox.run);
    assert_xml_flow(&sandbox.run);
    let health = sandbox.run.single(EndpointId::WireserverHealthXml);
    assert_eq!(health.header("host"), Some("168.63.129.16"));
    assert_eq!(
        sandbox.run.single(EndpointId::ImdsInstance).header("host"),
        Some("169.254.169.254")
    );
    // The sandbox makes the five empty pools a VM has; libazureinit 0.1.1 writes none of them.
    assert!(
        sandbox.pools.iter().all(|(_, bytes)| bytes.is_empty()),
        "libazureinit 0.1.1 writes no KVP"
    );
    insta::assert_json_snapshot!(
        "libazureinit_ready_sandbox_health",
        normalize::entry(health)
    );
}

#[test]
fn libazureinit_stops_unreported_when_the_goal_state_is_refused_once() {
    // 0.1.1 sends each request once: one 503 on the goal state ends the run (docs/protocol.md §8
    // says azure-init retries 503; that loop arrived after 0.1.1).
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("goalstate-503.toml");
    std::fs::write(
        &scenario,
        "[[endpoint]]\nid = \"wireserver.goalstate\"\n\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"unavailable\"\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let sandbox = run_sandbox(
        &out,
        &["--timeout", "60", "--scenario", scenario.to_str().unwrap()],
        &[&adapter(), "ready"],
    );
    assert_eq!(sandbox.run.status, Some(1), "{}", sandbox.run.stderr);
    assert_eq!(
        normalize::exchange(&sandbox.run.journal),
        [
            "GET /metadata/instance?api-version=2021-02-01 [imds.instance via imds] -> 200",
            "GET /machine/?comp=goalstate [wireserver.goalstate via wireserver] -> 503",
        ]
    );
    assert!(
        sandbox
            .run
            .stderr
            .contains("goalstate::get_goalstate failed"),
        "{}",
        sandbox.run.stderr
    );
}

#[test]
fn libazureinit_failure_is_not_in_0_1_1_and_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let run = NetnsRun::new(HARNESS, dir.path(), Attach::Proxy).run(&[
        &adapter(),
        "failure",
        "--reason",
        "failed to provision user",
    ]);
    assert_eq!(run.status, Some(3), "{}", run.stderr);
    assert!(run.journal.is_empty(), "{:#?}", run.journal);
    assert!(
        run.stderr
            .contains("libazureinit 0.1.1 has no failure report"),
        "{}",
        run.stderr
    );
}

/// Runs the adapter in a fresh netns that has a second interface (a tap device, down, with
/// no route anywhere), so even a broken refusal could not send anything off the machine.
fn adapter_beside_another_interface(http_proxy: Option<&str>) -> (Option<i32>, String) {
    require_root();
    let script = "ip link set lo up && ip tuntap add dev wc-tap0 mode tap && exec \"$@\"";
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "--", "sh", "-c", script, "sh", &adapter(), "ready"]);
    for name in fake_wireserver::proxy::CLIENT_VARIABLES {
        cmd.env_remove(name);
    }
    if let Some(proxy) = http_proxy {
        cmd.env("HTTP_PROXY", proxy);
    }
    let output = cmd.output().expect("cannot run unshare (util-linux)");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn libazureinit_adapter_refuses_a_namespace_with_other_interfaces() {
    let (status, stderr) = adapter_beside_another_interface(None);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains("refusing to run") && stderr.contains("wc-tap0"),
        "{stderr}"
    );

    // A proxy that is not on loopback would carry the requests off the machine.
    let (status, stderr) = adapter_beside_another_interface(Some("http://192.0.2.1:3128"));
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains("HTTP_PROXY=\"http://192.0.2.1:3128\"")
            && stderr.contains("expected a loopback proxy"),
        "{stderr}"
    );
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn wirecheck_run_judges_libazureinit_0_1_1() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let output = Command::new(workspace_binary("wirecheck"))
        .args(["run", "--agent", "libazureinit-0.1.1", "--quiet", "--out"])
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

    let results = read_json(&out.join("results.json"));
    let agents = results["agents"].as_array().expect("agents");
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0]["agent"], "libazureinit-0.1.1");
    let cases = agents[0]["cases"].as_array().expect("cases");

    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut judged: BTreeMap<String, String> = BTreeMap::new();
    for case in cases {
        let id = case["id"].as_str().expect("case id");
        let verdict = case["verdict"].as_str().expect("verdict");
        *counts.entry(verdict).or_default() += 1;
        if verdict != "pass" {
            assert!(
                case["reason"].as_str().is_some_and(|r| !r.is_empty()),
                "{id}: {verdict} without a reason"
            );
        }
        match verdict {
            // Scenarios for the JSON endpoint, failure and in-progress reports, which 0.1.1 does
            // not have (the reason says so); the rest of the skipped cases are snapshotted.
            "skipped"
                if case["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("does not claim \"")) => {}
            "unimplemented" => {
                let reason = case["reason"].as_str().unwrap();
                assert!(reason.starts_with("known deviation"), "{id}: {reason}");
                judged.insert(id.to_owned(), verdict.to_owned());
            }
            _ => {
                judged.insert(id.to_owned(), verdict.to_owned());
            }
        }
    }
    assert_eq!(counts.get("fail"), None, "no case fails: {counts:?}");
    assert!(counts.get("pass").is_some_and(|&n| n >= 50), "{counts:?}");
    // Every XML Ready scenario ran, each judged on the protocol, its report and its behaviour.
    insta::assert_json_snapshot!("libazureinit_wirecheck_verdicts", judged);

    // The runner's proxy attach reached the fake: the Ready report of the plain scenario,
    // absolute-form targets, azure-init's headers; the runner isolated it (a private network
    // namespace with only lo), so the adapter had no reason to move itself.
    let artifacts = out.join("artifacts/libazureinit-0.1.1/wire.health.xml.ready");
    let journal: Vec<Entry> = std::fs::read_to_string(artifacts.join("journal.jsonl"))
        .expect("journal.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("journal line"))
        .collect();
    let run = AgentRun {
        status: Some(0),
        stdout: String::new(),
        stderr: std::fs::read_to_string(artifacts.join("run-1.stderr")).expect("run-1.stderr"),
        journal,
        dir: artifacts.clone(),
    };
    let health = run.single(EndpointId::WireserverHealthXml);
    assert_eq!(health.listener, Listener::Proxy);
    assert_eq!(health.target, "http://168.63.129.16/machine/?comp=health");
    assert_eq!(health.header("x-ms-agent-name"), Some("azure-init"));
    let report = health.report.as_ref().expect("parsed health report");
    assert_eq!(report.state, Some(HealthState::Ready));
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert!(
        !run.stderr.contains("not isolated"),
        "the runner should have isolated the adapter: {}",
        run.stderr
    );
}
