//! WALinuxAgent 2.16.0.2 (Debian unstable), unmodified, through `wirecheck run` with its two
//! profiles (sandbox attach on the real addresses): `walinuxagent-2.16`, whose daemon reports
//! Ready itself (`Provisioning.Agent=disabled`), and `walinuxagent-2.16-cloud-init`, which sends
//! no health report at all (`Provisioning.Agent=cloud-init`, upstream PR #3484) and whose
//! profile says so (`health_report = "none"`).
//!
//! In a guest (`fake-wireserver sandbox --guest`), `walinuxagent-2.16-waagent` (and 2.12's
//! `walinuxagent-2.12-waagent`) runs its own provisioning (`Provisioning.Agent=waagent`): the
//! user, the host name, and its own failure text when the guest fails it.
//!
//! The silence is judged strictly, with real agents on both sides: WALinuxAgent 2.12 in
//! cloud-init mode (it does report) under a profile declaring silence fails, and 2.16's silence
//! under a profile that expects a report fails.

use std::path::Path;
use std::process::Output;

use fake_wireserver::journal::Entry;
use serde_json::Value;
use wirecheck_e2e::{repo_root, require_root, walinuxagent_root};

pub(crate) fn journal(path: &Path) -> Vec<Entry> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("journal line"))
        .collect()
}

/// `wirecheck run` of `agents` on `cases`, profiles from `agents_dir` (else the checkout's).
pub(crate) fn run(agents: &[&str], cases: &str, agents_dir: Option<&Path>, out: &Path) -> Output {
    let mut args = vec!["--cases", cases];
    for agent in agents {
        args.extend(["--agent", agent]);
    }
    let dir = agents_dir.map(|d| d.display().to_string());
    if let Some(dir) = &dir {
        args.extend(["--agents-dir", dir.as_str()]);
    }
    wirecheck_e2e::wirecheck_run(out, &args)
}

/// Every case of one agent in a results folder: id → (verdict, reason).
pub(crate) fn cases(out: &Path, agent: &str) -> Vec<(String, String, String)> {
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let agent = results["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == agent)
        .unwrap_or_else(|| panic!("{agent} missing from results.json"));
    agent["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["verdict"].as_str().unwrap().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

pub(crate) fn verdict<'a>(cases: &'a [(String, String, String)], id: &str) -> (&'a str, &'a str) {
    cases
        .iter()
        .find(|c| c.0 == id)
        .map(|c| (c.1.as_str(), c.2.as_str()))
        .unwrap_or_else(|| panic!("no case {id}"))
}

fn endpoints(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match &e.report {
            Some(r) => format!(
                "{} {}",
                e.endpoint,
                r.state.as_ref().map_or("?", |s| s.as_str())
            ),
            None => e.endpoint.to_string(),
        })
        .collect()
}

#[test]
fn walinuxagent_2_16_reports_ready_itself_and_nothing_in_cloud_init_mode() {
    require_root();
    walinuxagent_root("2.16", "2.16.0.2");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = run(
        &["walinuxagent-2.16", "walinuxagent-2.16-cloud-init"],
        "wire.health.xml.{ready,failure}.*",
        None,
        &out,
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Its own mode: Ready, judged like 2.12's.
    let own = cases(&out, "walinuxagent-2.16");
    for check in [
        "protocol.request",
        "protocol.headers",
        "report.shape",
        "report.state",
        "behaviour.terminal",
        "behaviour.exit",
        "behaviour.budget",
    ] {
        let id = format!("wire.health.xml.ready.{check}");
        assert_eq!(
            verdict(&own, &id).0,
            "pass",
            "{id}: {:?}",
            verdict(&own, &id)
        );
    }
    // 2.16's flow: versions only for protocol detection, a goal state with
    // HostingEnvironmentConfig for telemetry, then the report's own RoleConfig-only goal state;
    // no SharedConfig, no certificates (so no x-ms-cipher-name), no HostGAPlugin.
    let artifacts = out.join("artifacts");
    let ready = journal(&artifacts.join("walinuxagent-2.16/wire.health.xml.ready/journal.jsonl"));
    assert_eq!(
        endpoints(&ready),
        [
            "wireserver.versions",
            "wireserver.goalstate",
            "wireserver.config.hosting",
            "imds.instance",
            "wireserver.goalstate",
            "wireserver.health.xml Ready",
        ],
        "{ready:#?}"
    );
    for e in &ready {
        assert_eq!(
            e.header("user-agent"),
            Some("WALinuxAgent/2.16.0.2"),
            "#{}",
            e.seq
        );
        assert!(e.findings.is_empty(), "#{}: {:?}", e.seq, e.findings);
    }

    // Cloud-init mode: no report from either the successful or the failed provisioning, and
    // that is what the checks call right.
    let quiet = cases(&out, "walinuxagent-2.16-cloud-init");
    for scenario in ["wire.health.xml.ready", "wire.health.xml.failure"] {
        for check in [
            "protocol.request",
            "behaviour.terminal",
            "behaviour.exit",
            "behaviour.budget",
        ] {
            let id = format!("{scenario}.{check}");
            assert_eq!(
                verdict(&quiet, &id).0,
                "pass",
                "{id}: {:?}",
                verdict(&quiet, &id)
            );
        }
        let (v, why) = verdict(&quiet, &format!("{scenario}.report.shape"));
        assert_eq!(v, "skipped", "{why}");
        assert!(why.contains("no health report reached the fake"), "{why}");
        let flow = journal(
            &artifacts
                .join("walinuxagent-2.16-cloud-init")
                .join(scenario)
                .join("journal.jsonl"),
        );
        assert_eq!(
            endpoints(&flow),
            [
                "wireserver.versions",
                "wireserver.goalstate",
                "wireserver.config.hosting",
                "imds.instance",
            ],
            "{scenario}"
        );
    }
    for (id, verdict, reason) in quiet.iter().chain(&own) {
        assert_ne!(verdict, "fail", "{id}: {reason}");
        assert!(!reason.starts_with("harness error"), "{id}: {reason}");
    }
}

/// A copy of `from`'s profile in `dir` as `name`, edited by `edit`.
fn profile_copy(dir: &Path, from: &str, name: &str, edit: impl Fn(String) -> String) {
    let text = std::fs::read_to_string(repo_root().join(format!("conformance/agents/{from}.toml")))
        .unwrap()
        .replace(&format!("name = \"{from}\""), &format!("name = \"{name}\""));
    let edited = edit(text.clone());
    assert_ne!(edited, text, "the edit changed nothing");
    std::fs::write(dir.join(format!("{name}.toml")), edited).unwrap();
}

#[test]
fn a_declared_silence_and_a_missing_report_both_fail_with_the_real_agents() {
    require_root();
    walinuxagent_root("2.12", "2.12.0.2");
    walinuxagent_root("2.16", "2.16.0.2");
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir(&agents).unwrap();
    // 2.12 in cloud-init mode reports NotReady/Provisioning, then Ready: declared silent, that
    // is a failure.
    profile_copy(
        &agents,
        "walinuxagent-2.16-cloud-init",
        "wala-2.12-declared-silent",
        |t| t.replace("agents/walinuxagent-2.16\"", "agents/walinuxagent-2.12\""),
    );
    // 2.16 in cloud-init mode, under a profile that expects its report.
    profile_copy(
        &agents,
        "walinuxagent-2.16-cloud-init",
        "wala-2.16-expected-to-report",
        |t| t.replace("health_report = \"none\"\n", ""),
    );
    let out = dir.path().join("out");
    let o = run(
        &["wala-2.12-declared-silent", "wala-2.16-expected-to-report"],
        "wire.health.xml.ready.*",
        Some(&agents),
        &out,
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );

    let loud = cases(&out, "wala-2.12-declared-silent");
    let (v, why) = verdict(&loud, "wire.health.xml.ready.behaviour.terminal");
    assert_eq!(v, "fail", "{why}");
    assert!(
        why.contains("sent a health report") && why.contains("health_report = \"none\""),
        "{why}"
    );
    let (v, why) = verdict(&loud, "wire.health.xml.ready.report.shape");
    assert_eq!(v, "fail", "{why}");
    assert!(why.contains("sends none in this mode"), "{why}");

    let mute = cases(&out, "wala-2.16-expected-to-report");
    let (v, why) = verdict(&mute, "wire.health.xml.ready.behaviour.terminal");
    assert_eq!(v, "fail", "{why}");
    assert!(why.contains("never sent its health report"), "{why}");
    for (id, _, reason) in loud.iter().chain(&mute) {
        assert!(!reason.starts_with("harness error"), "{id}: {reason}");
    }
}

/// A case's guest calls (`guest-calls.jsonl` in its artifacts folder `case`).
pub(crate) fn guest_calls(case: &Path) -> Vec<fake_wireserver::guest::ToolCall> {
    std::fs::read_to_string(case.join("guest-calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The `useradd` calls among `calls`: (arguments, the exit status it was made to fail with).
pub(crate) fn useradds(
    calls: &[fake_wireserver::guest::ToolCall],
) -> Vec<(Vec<String>, Option<u8>)> {
    calls
        .iter()
        .filter(|c| c.tool == fake_wireserver::guest::Tool::Useradd)
        .map(|c| (c.args.clone(), c.failed_with))
        .collect()
}

/// The descriptions of the health reports in a journal, as the platform got them.
pub(crate) fn descriptions(journal_path: &Path) -> Vec<String> {
    journal(journal_path)
        .iter()
        .filter_map(|e| e.report.as_ref()?.description.clone())
        .collect()
}

/// What a guest must leave as it was on the host.
pub(crate) fn host_files() -> (Vec<u8>, Vec<u8>, String, Vec<String>) {
    let hostname = std::process::Command::new("hostname").output().unwrap();
    let mut home: Vec<String> = std::fs::read_dir("/home")
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    home.sort();
    (
        std::fs::read("/etc/passwd").unwrap(),
        std::fs::read("/etc/group").unwrap(),
        String::from_utf8_lossy(&hostname.stdout).into_owned(),
        home,
    )
}

/// WALinuxAgent in its own provisioning mode (`walinuxagent-2.16-waagent`, and 2.12 from Debian
/// 13 beside it) provisions the guest of each `guest.*` scenario, unmodified: it creates the
/// user the media's ovf-env.xml names (the stand-in recorded `useradd ... azureuser`), reports
/// Ready, or ProvisioningFailed in its own words when useradd fails or the ovf-env.xml lacks
/// HostName; an ovf-env.xml that is not XML it never reports (declared); the host's users,
/// groups, homes and host name stay as they were.
#[test]
fn walinuxagent_2_16_provisions_the_guest_itself_and_reports_its_own_failures() {
    require_root();
    walinuxagent_root("2.16", "2.16.0.2");
    provisions_the_guest("walinuxagent-2.16-waagent");
}

#[test]
fn walinuxagent_2_12_provisions_the_guest_itself_and_reports_its_own_failures() {
    require_root();
    walinuxagent_root("2.12", "2.12.0.2");
    provisions_the_guest("walinuxagent-2.12-waagent");
}

fn provisions_the_guest(agent: &str) {
    let before = host_files();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results");
    let o = run(&[agent], "guest.*", None, &out);
    let all = cases(&out, agent);
    for (id, verdict, reason) in &all {
        // It writes no KVP (its profile claims none): nothing to judge there.
        if id.contains(".kvp.") {
            assert_eq!(verdict, "skipped", "{id}: {reason}");
            continue;
        }
        // A malformed ovf-env.xml is never reported (the declared deviation): its daemon
        // restarts, and the report checks have nothing to judge.
        if id.starts_with("guest.ovf.malformed.") {
            let want: &[&str] = if id.ends_with(".behaviour.terminal") {
                &["non-strict"]
            } else {
                &["pass", "skipped"]
            };
            assert!(want.contains(&verdict.as_str()), "{id}: {verdict} {reason}");
            continue;
        }
        assert_eq!(verdict, "pass", "{id}: {reason}\n{all:?}\n{o:?}");
    }
    assert_eq!(all.len(), 37, "{all:?}");
    let (_, why) = verdict(&all, "guest.ovf.malformed.behaviour.terminal");
    assert!(
        why.contains("never reports a malformed ovf-env.xml"),
        "{why}"
    );
    assert!(
        journal(
            &out.join("artifacts")
                .join(agent)
                .join("guest.ovf.malformed/journal.jsonl")
        )
        .iter()
        .all(|e| e.report.is_none()),
        "a report of the malformed media"
    );
    let artifacts = out.join("artifacts").join(agent);
    for (scenario, useradd) in [
        ("guest.provisions", Some(None)),
        ("guest.useradd.fails", Some(Some(9))),
        // No HostName: it stops before it creates anyone.
        ("guest.ovf.no-hostname", None),
    ] {
        let calls = guest_calls(&artifacts.join(scenario));
        let asked = useradds(&calls);
        let want: Vec<(Vec<String>, Option<u8>)> = useradd
            .map(|failed| {
                let args = ["-m", "azureuser", "-s", "/bin/bash"]
                    .map(String::from)
                    .to_vec();
                (args, failed)
            })
            .into_iter()
            .collect();
        assert_eq!(asked, want, "{scenario}: {calls:?}");
    }
    // Its own words, as the platform got them.
    let said = descriptions(&artifacts.join("guest.useradd.fails/journal.jsonl"));
    assert!(
        said.iter().any(|d| d.starts_with(
            "[ProvisionError] Failed to provision: [OSUtilError] Failed to create user account:azureuser, Retcode: 9"
        )),
        "{said:?}"
    );
    assert_eq!(before, host_files(), "the guest changed the host");
}
