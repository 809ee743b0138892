//! WALinuxAgent 2.7.3 (Debian 12) and 2.12 (Debian 13), unmodified, through `wirecheck run`
//! with their profiles (sandbox attach on the real addresses, docs/protocol.md §9.1): Ready with
//! `Provisioning.Agent=disabled`, NotReady/Provisioning then Ready with
//! `Provisioning.Agent=cloud-init`, and NotReady/ProvisioningFailed for an ovf-env.xml without
//! HostName. Asserts what a user of `wirecheck run` sees: the verdicts, why, and the journal.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use fake_wireserver::journal::Entry;
use serde_json::Value;
use wirecheck_e2e::{repo_root, require_root, walinuxagent_root, workspace_binary};

const AGENTS: [(&str, &str); 2] = [("2.7.3", "2.7.3.0"), ("2.12", "2.12.0.2")];

fn journal(path: &Path) -> Vec<Entry> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("journal line"))
        .collect()
}

fn verdict<'a>(cases: &'a [Value], id: &str) -> (&'a str, &'a str) {
    let case = cases
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no case {id}"));
    (
        case["verdict"].as_str().unwrap_or_default(),
        case["reason"].as_str().unwrap_or_default(),
    )
}

/// The request flow of one case, as endpoint ids (states for health posts).
fn flow(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match &e.report {
            Some(r) => format!(
                "{} {}{}",
                e.endpoint,
                r.state.as_ref().map_or("?", |s| s.as_str()),
                r.substatus
                    .as_ref()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default()
            ),
            None => e.endpoint.to_string(),
        })
        .collect()
}

fn expected_flow(reports: &[&str]) -> Vec<String> {
    let mut flow: Vec<String> = [
        "wireserver.versions",
        "wireserver.goalstate",
        "wireserver.goalstate",
        "hostplugin.vmsettings",
        "wireserver.config.hosting",
        "wireserver.config",
        "wireserver.certificates",
    ]
    .map(String::from)
    .to_vec();
    flow.extend(reports.iter().map(|r| format!("wireserver.health.xml {r}")));
    flow.push("imds.instance".into());
    flow
}

#[test]
fn walinuxagent_2_7_3_and_2_12_get_real_verdicts_for_ready_in_progress_and_failure() {
    require_root();
    for (dir, version) in AGENTS {
        walinuxagent_root(dir, version);
    }
    let out = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let output = Command::new(workspace_binary("wirecheck"))
        .current_dir(repo_root())
        .args([
            "run",
            "--quiet",
            "--agent",
            "walinuxagent-2.7.3",
            "--agent",
            "walinuxagent-2.12",
        ])
        .args([
            "--cases",
            "wire.health.xml.{ready,failure,in-progress-then-ready}.*",
        ])
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("run wirecheck");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    // Each daemon is ended about a second after its report, not at a deadline.
    assert!(took < Duration::from_secs(120), "took {took:?}");

    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("results.json")).unwrap())
            .unwrap();
    for (dir, version) in AGENTS {
        let name = format!("walinuxagent-{dir}");
        let agent = results["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["agent"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} missing from results.json"));
        let cases = agent["cases"].as_array().unwrap();
        for c in cases {
            let v = c["verdict"].as_str().unwrap();
            // It writes no KVP: the pool the sandbox made stays empty, so kvp.pool has nothing
            // to judge (kvp.report fails, declared unimplemented).
            let empty_pool = c["id"].as_str().unwrap().ends_with(".kvp.pool")
                && c["reason"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("the pool file is empty");
            assert!(
                matches!(v, "pass" | "informational" | "unimplemented")
                    || (v == "skipped" && empty_pool),
                "{name} {}: {v}: {}",
                c["id"],
                c["reason"]
            );
        }
        for scenario in [
            "wire.health.xml.ready",
            "wire.health.xml.failure",
            "wire.health.xml.in-progress-then-ready",
        ] {
            for check in [
                "protocol.request",
                "protocol.headers",
                "report.shape",
                "report.state",
                "behaviour.terminal",
                "behaviour.exit",
            ] {
                let id = format!("{scenario}.{check}");
                assert_eq!(
                    verdict(cases, &id).0,
                    "pass",
                    "{name} {id}: {:?}",
                    verdict(cases, &id)
                );
            }
        }
        // The daemon never exits: the harness ended it after the report, and said so.
        let exit = cases
            .iter()
            .find(|c| c["id"] == "wire.health.xml.ready.behaviour.exit")
            .unwrap();
        assert!(
            exit["evidence"]
                .to_string()
                .contains("stopped by the harness after its terminal report"),
            "{name}: {}",
            exit["evidence"]
        );
        // WALA's own dialects, declared in the profile.
        let (v, why) = verdict(cases, "wire.health.xml.failure.report.description");
        assert_eq!(v, "informational", "{name}: {why}");
        assert!(why.contains("[ProvisionError]"), "{name}: {why}");
        let (v, why) = verdict(
            cases,
            "wire.health.xml.in-progress-then-ready.report.description",
        );
        assert_eq!(v, "unimplemented", "{name}: {why}");
        assert!(why.contains("Starting"), "{name}: {why}");

        // The journal: the flow docs/protocol.md §9.1 describes, with WALA's headers.
        let artifacts = out.path().join("artifacts").join(&name);
        let ready = journal(&artifacts.join("wire.health.xml.ready/journal.jsonl"));
        assert_eq!(flow(&ready), expected_flow(&["Ready"]), "{name}");
        let ua = format!("WALinuxAgent/{version}");
        for e in &ready {
            assert_eq!(
                e.header("user-agent"),
                Some(ua.as_str()),
                "{name} #{}",
                e.seq
            );
            assert_eq!(e.header("connection"), Some("close"), "{name} #{}", e.seq);
            assert!(e.findings.is_empty(), "{name} #{}: {:?}", e.seq, e.findings);
        }
        assert_eq!(
            ready[0].header("x-ms-version"),
            None,
            "versions GET: no x-ms headers"
        );
        let health = &ready[7];
        assert_eq!(
            health.header("content-type"),
            Some("text/xml;charset=utf-8")
        );
        assert!(
            health
                .body
                .starts_with("<?xml version=\"1.0\" encoding=\"utf-8\"?><Health")
        );
        assert!(!health.body.contains('\n'), "compact XML");
        assert_eq!(ready[8].header("metadata"), Some("True"));

        let both = journal(&artifacts.join("wire.health.xml.in-progress-then-ready/journal.jsonl"));
        assert_eq!(
            flow(&both),
            expected_flow(&["NotReady/Provisioning", "Ready"]),
            "{name}"
        );
        let failure = journal(&artifacts.join("wire.health.xml.failure/journal.jsonl"));
        assert_eq!(
            flow(&failure),
            expected_flow(&["NotReady/ProvisioningFailed"]),
            "{name}"
        );
        let report = failure[7].report.as_ref().unwrap();
        assert_eq!(report.exception_class.as_deref(), Some("ProvisionError"));
        assert!(
            report
                .description
                .as_deref()
                .unwrap()
                .starts_with("[ProvisionError] OVF xml could not be parsed"),
            "{report:?}"
        );
        assert!(
            report
                .findings
                .iter()
                .all(|f| f.id == "health.description.exception")
        );
    }
}
