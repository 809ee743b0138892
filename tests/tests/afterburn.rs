//! afterburn 5.11.0, unmodified, against the fake-wireserver binary.
//!
//! afterburn has no endpoint override (docs/protocol.md §9). Two attachments:
//! * proxy: in a private network + mount namespace with `HTTP_PROXY` pointing to the fake's
//!   proxy listener, and a private /run holding a networkd lease for `lo` with
//!   `OPTION_245=A83F8110` (168.63.129.16), so afterburn finds the wireserver address at once
//!   instead of probing DHCP for ~29 s; the address exists nowhere in the namespace, so only
//!   the proxy can answer;
//! * `fake-wireserver sandbox`: the fake on the real addresses, port 80, in the sandbox's own
//!   namespaces (its lease file does the same job).

use std::path::Path;

use conformance::snapshot::raw as normalize;
use fake_wireserver::{EndpointId, HealthState, Listener};
use wirecheck_e2e::{
    AgentRun, Attach, NetnsRun, afterburn_binary, header_names, run_sandbox, vector,
    vector_header_names,
};

const HARNESS: &str = env!("CARGO_BIN_EXE_e2e-netns-run");

fn assert_ready(run: &AgentRun) {
    let health = run.single(EndpointId::WireserverHealthXml);
    let report = health.report.as_ref().expect("parsed health report");
    assert_eq!(report.state, Some(HealthState::Ready));
    assert_eq!(report.substatus, None);
    assert_eq!(report.description, None);
    // The ids echoed back are the ones the fake served (mismatches would be findings).
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert_eq!(health.answer.status, Some(200));
}

/// The host's /run, which the proxy run replaces privately (lease file, mount bookkeeping).
fn host_run_listing() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/run")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn afterburn_checks_in_through_the_proxy() {
    let afterburn = afterburn_binary();
    let dir = tempfile::tempdir().unwrap();
    let host_run = host_run_listing();
    let run = NetnsRun::new(HARNESS, dir.path(), Attach::Proxy)
        .lease("A83F8110")
        .run(&[
            afterburn.to_str().unwrap(),
            "multi",
            "--provider",
            "azure",
            "--check-in",
        ]);
    run.assert_success();

    assert_eq!(
        normalize::exchange(&run.journal),
        [
            "GET http://168.63.129.16/?comp=versions [wireserver.versions via proxy] -> 200",
            "GET http://168.63.129.16/machine/?comp=goalstate [wireserver.goalstate via proxy] -> 200",
            "POST http://168.63.129.16/machine/?comp=health [wireserver.health.xml via proxy] -> 200",
        ]
    );
    assert_ready(&run);
    let health = run.single(EndpointId::WireserverHealthXml);
    assert_eq!(
        header_names(health),
        vector_header_names(&vector("afterburn-5.11.0/14-checkin-health-proxy.json")),
        "afterburn's header names/order differ from the captured vector"
    );
    insta::assert_json_snapshot!("afterburn_checkin_proxy_health", normalize::entry(health));
    assert_eq!(host_run, host_run_listing(), "the host's /run changed");
}

fn afterburn_in_sandbox(out: &Path, args: &[&str]) -> wirecheck_e2e::SandboxRun {
    let afterburn = afterburn_binary();
    let mut command = vec![afterburn.to_str().unwrap(), "multi", "--provider", "azure"];
    command.extend_from_slice(args);
    run_sandbox(out, &[], &command)
}

#[test]
fn afterburn_checks_in_inside_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = afterburn_in_sandbox(dir.path(), &["--check-in"]);
    sandbox.run.assert_success();
    assert_eq!(sandbox.summary["exit_status"], 0);

    // Origin-form targets on the wireserver listener: afterburn talked to 168.63.129.16:80.
    assert_eq!(
        normalize::exchange(&sandbox.run.journal),
        [
            "GET /?comp=versions [wireserver.versions via wireserver] -> 200",
            "GET /machine/?comp=goalstate [wireserver.goalstate via wireserver] -> 200",
            "POST /machine/?comp=health [wireserver.health.xml via wireserver] -> 200",
        ]
    );
    assert_ready(&sandbox.run);
    let health = sandbox.run.single(EndpointId::WireserverHealthXml);
    assert_eq!(health.header("host"), Some("168.63.129.16"));
    assert_eq!(
        header_names(health),
        vector_header_names(&vector("afterburn-5.11.0/03-checkin-health-direct.json"))
    );
    // The sandbox makes the five empty pools a VM has; afterburn writes none of them.
    assert!(
        sandbox.pools.iter().all(|(_, bytes)| bytes.is_empty()),
        "afterburn writes no KVP"
    );
    insta::assert_json_snapshot!("afterburn_checkin_sandbox_health", normalize::entry(health));
}

#[test]
fn afterburn_reads_attributes_from_imds_inside_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let attributes = dir.path().join("attributes.env");
    let sandbox = afterburn_in_sandbox(&out, &["--attributes", attributes.to_str().unwrap()]);
    sandbox.run.assert_success();

    let imds = sandbox.run.single(EndpointId::ImdsInstance);
    assert_eq!(imds.listener, Listener::Imds);
    assert_eq!(
        imds.target,
        "/metadata/instance/compute/vmSize?api-version=2017-08-01&format=text"
    );
    assert_eq!(imds.header("Metadata"), Some("true"));
    assert_eq!(imds.answer.status, Some(200));
    assert!(
        sandbox.run.entries(EndpointId::WireserverConfig).len() == 1,
        "SharedConfig fetched once"
    );
    assert!(
        sandbox
            .run
            .entries(EndpointId::WireserverHealthXml)
            .is_empty(),
        "no check-in asked"
    );

    let written = std::fs::read_to_string(&attributes).expect("afterburn wrote the attributes");
    let mut lines: Vec<&str> = written.lines().collect();
    lines.sort();
    insta::assert_json_snapshot!(
        "afterburn_attributes_sandbox",
        serde_json::json!({
            "exchange": normalize::exchange(&sandbox.run.journal),
            "attributes": lines,
        })
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("AFTERBURN_AZURE_VMSIZE=")),
        "{written}"
    );
}
