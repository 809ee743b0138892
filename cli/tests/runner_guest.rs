//! Guest scenarios (`guest.*`, issue 26) through the binary: planted agents provision the
//! sandbox's guest and choose their own report. One that reports Ready although `useradd`
//! failed, and one whose failure report says nothing about the user, fail; an honest one
//! passes, and the stand-in recorded what it asked for. Needs root (the sandbox).

use std::path::Path;

use crate::runner_support::{self, repo, results, wirecheck, write_files};

/// A planted agent: reports progress, runs `useradd`, then reports through the bundled
/// reporter. `PLANT` decides what it says when `useradd` fails: `honest` names the user,
/// `vague` says nothing about it, `ready-anyway` reports Ready; `lazy` never runs `useradd`
/// and reports Ready; `progress-only` never sends more than its in-progress report.
const PLANTED: &str = r#"#!/bin/sh
bin=$1 ws=$2 imds=$3 pool=$4 plant=$5
set -- --wireserver="$ws" --imds="$imds" --protocol=json --kvp-pool="$pool" \
    --timeout=3 --imds-timeout=3 --retry-interval=0.2 --request-timeout=1
"$bin/provision-report" in-progress --description="creating the admin user" "$@" || exit 1
if [ "$plant" = lazy ]; then exec "$bin/provision-report" ready "$@"; fi
if [ "$plant" = progress-only ]; then exit 0; fi
err=$(useradd -m -s /bin/bash azureuser 2>&1)
rc=$?
if [ "$rc" -eq 0 ] || [ "$plant" = ready-anyway ]; then
    exec "$bin/provision-report" ready "$@"
fi
case "$plant" in
    honest) reason="useradd failed for user azureuser (exit $rc): $err" ;;
    *) reason="provisioning failed" ;;
esac
exec "$bin/provision-report" failure --reason="$reason" "$@"
"#;

fn planted(dir: &Path, plant: &str) -> std::path::PathBuf {
    let name = format!("planted-{plant}");
    let script = dir.join("planted.sh");
    let command = format!(
        r#"["sh", "{}", "{{bin_dir}}", "{{wireserver_url}}", "{{imds_url}}", "{{kvp_pool}}", "{plant}"]"#,
        script.display()
    );
    let profile = format!(
        r#"name = "{name}"
description = "a planted guest agent: {plant}"
attach = "sandbox"
capabilities = ["json", "in-progress", "guest", "kvp"]
in_progress_continues_to_ready = true

[guest]
only = true

[guest.reasons]
"guest.useradd.fails" = "user azureuser"

[commands]
ready = {command}
in-progress = {command}

[exit]
reported = [0]
"#
    );
    write_files(
        dir,
        &[
            ("planted.sh", PLANTED),
            (&format!("agents/{name}.toml"), &profile),
        ],
    );
    dir.join("agents")
}

/// Runs the planted agent on the guest scenarios' JSON instances; (case, verdict, reason).
fn run(plant: &str) -> (tempfile::TempDir, Vec<(String, String, String)>) {
    let (dir, v, _) = run_cases(plant, "{guest.useradd.fails,guest.provisions}.json.*");
    (dir, v)
}

/// The planted agent on the cases `cases` selects: its folder, its cases, its output.
fn run_cases(
    plant: &str,
    cases: &str,
) -> (
    tempfile::TempDir,
    Vec<(String, String, String)>,
    std::process::Output,
) {
    // Below the target folder: a case folder the agent (nobody on the host) can reach.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let agents = planted(dir.path(), plant);
    let out = dir.path().join("out");
    let o = wirecheck(&repo())
        .args(["run", "--quiet", "--agent", &format!("planted-{plant}")])
        .arg("--agents-dir")
        .arg(&agents)
        .arg("--out")
        .arg(&out)
        .args(["--cases", cases])
        .output()
        .unwrap();
    let v = runner_support::cases(&results(&out));
    assert!(
        !v.is_empty(),
        "{}\n{}",
        runner_support::stdout(&o),
        runner_support::stderr(&o)
    );
    (dir, v, o)
}

/// An agent that runs only in a guest is not offered a scenario without one: neither run nor
/// skipped (no rows), named once in the summary and results.json.
#[test]
fn a_scenario_without_a_guest_is_not_offered_to_a_guest_only_agent() {
    let (dir, v, o) = run_cases(
        "honest",
        "{guest.provisions.json.*,imds.unreachable.behaviour.exit}",
    );
    assert!(
        v.iter()
            .all(|(id, ..)| id.starts_with("guest.provisions.json.")),
        "{v:?}"
    );
    let r = results(&dir.path().join("out"));
    let unclaimed = &r["unclaimed_flows"];
    assert_eq!(unclaimed.as_array().map(Vec::len), Some(1), "{unclaimed}");
    assert_eq!(unclaimed[0]["flow"], "without-guest", "{unclaimed}");
    assert_eq!(unclaimed[0]["scenarios"], 1, "{unclaimed}");
    let out = runner_support::stdout(&o);
    assert!(
        out.contains("planted-honest: it runs only in a guest: 1 scenario without one ("),
        "{out}"
    );
}

fn verdict<'a>(v: &'a [(String, String, String)], id: &str) -> (&'a str, &'a str) {
    let (_, verdict, reason) = v
        .iter()
        .find(|(case, ..)| case == id)
        .unwrap_or_else(|| panic!("{id} not in {v:?}"));
    (verdict, reason)
}

#[test]
fn an_honest_guest_agent_passes_and_the_stand_in_recorded_its_useradd() {
    let (dir, v) = run("honest");
    for (id, verdict, reason) in &v {
        assert_eq!(verdict, "pass", "{id}: {reason}\n{v:?}");
    }
    assert_eq!(v.len(), 19, "{v:?}");
    // What the agent asked of useradd, as the guest's stand-in recorded it.
    let calls = dir
        .path()
        .join("out/artifacts/planted-honest/guest.useradd.fails.json/guest-calls.jsonl");
    let calls = std::fs::read_to_string(&calls).unwrap_or_else(|e| panic!("{calls:?}: {e}"));
    let calls: Vec<fake_wireserver::guest::ToolCall> = calls
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].tool, fake_wireserver::guest::Tool::Useradd);
    assert_eq!(calls[0].args, ["-m", "-s", "/bin/bash", "azureuser"]);
    assert_eq!(calls[0].failed_with, Some(9));
}

#[test]
fn a_guest_agent_reporting_ready_although_useradd_failed_fails() {
    let (_dir, v) = run("ready-anyway");
    let (state, reason) = verdict(&v, "guest.useradd.fails.json.report.state");
    assert_eq!(state, "fail", "{v:?}");
    assert!(
        reason.contains("expected NotReady/ProvisioningFailed; got Ready"),
        "{reason}"
    );
    // The host's own record (KVP) says success too: as wrong as the report.
    let (kvp, why) = verdict(&v, "guest.useradd.fails.json.kvp.report");
    assert_eq!(kvp, "fail", "{why}\n{v:?}");
    // Where useradd works, Ready is right.
    assert_eq!(
        verdict(&v, "guest.provisions.json.report.state").0,
        "pass",
        "{v:?}"
    );
}

#[test]
fn a_guest_agent_whose_failure_says_nothing_about_the_user_fails() {
    let (_dir, v) = run("vague");
    let (description, reason) = verdict(&v, "guest.useradd.fails.json.report.description");
    assert_eq!(description, "fail", "{v:?}");
    assert!(
        reason.contains(r#""provisioning failed" does not mention "azureuser""#),
        "{reason}"
    );
    assert_eq!(
        verdict(&v, "guest.useradd.fails.json.report.state").0,
        "pass",
        "{v:?}"
    );
}

#[test]
fn a_guest_agent_reporting_ready_without_creating_the_user_fails() {
    let (_dir, v) = run("lazy");
    let (users, reason) = verdict(&v, "guest.provisions.json.guest.users");
    assert_eq!(users, "fail", "{v:?}");
    assert!(
        reason.contains(r#"user "azureuser" is not in the guest's /etc/passwd"#),
        "{reason}"
    );
    // Its report alone looks right.
    assert_eq!(
        verdict(&v, "guest.provisions.json.report.state").0,
        "pass",
        "{v:?}"
    );
}

/// The expected state is the terminal report's: an agent that reports only its progress has not
/// reported at all.
#[test]
fn a_guest_agent_that_only_reports_progress_fails() {
    let (_dir, v) = run("progress-only");
    let (terminal, reason) = verdict(&v, "guest.useradd.fails.json.behaviour.terminal");
    assert_eq!(terminal, "fail", "{reason}\n{v:?}");
    assert_eq!(
        verdict(&v, "guest.provisions.json.behaviour.terminal").0,
        "fail",
        "{v:?}"
    );
}
