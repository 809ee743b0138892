//! The committed regression snapshots (`snapshots/agents/<agent>/<scenario id>.snap`) of the
//! bundled reporter and every real agent of the matrix: what each emits still matches what was
//! accepted. After an intended change, `wirecheck run --agent A --snapshots snapshots/agents`
//! writes `.snap.new` files; `wirecheck snapshots review snapshots/agents` accepts them.

use std::path::Path;
use std::process::{Command, Output};

use wirecheck_e2e::{repo_root, require_root, workspace_binary};

/// (agent, cases): every bundled profile's `[snapshot] cases` (the reporter on the whole suite,
/// the real agents on the health reports), read from the profiles: the registry of real agents.
fn snapshotted() -> Vec<(String, String)> {
    let dir = repo_root().join("conformance/agents");
    conformance::agent::list_profiles(&dir)
        .unwrap()
        .into_iter()
        .map(|name| {
            let profile = conformance::agent::find_profile(&dir, &name).unwrap();
            let cases = profile.snapshot.cases.unwrap_or_else(|| {
                panic!("{name}: no [snapshot] cases: every bundled profile is pinned")
            });
            (name, cases)
        })
        .collect()
}

fn run(agent: &str, cases: &str, snaps: &Path, agents_dir: Option<&Path>, out: &Path) -> Output {
    let mut cmd = Command::new(workspace_binary("wirecheck"));
    cmd.args(["run", "--quiet", "--agent", agent, "--cases", cases])
        .arg("--snapshots")
        .arg(snaps)
        .args(["--snapshots-strict", "--unreferenced", "reject"])
        .arg("--out")
        .arg(out)
        .current_dir(repo_root())
        .env_remove("WIRECHECK_EXCLUDE")
        .env_remove("WIRECHECK_PARTITION");
    if let Some(dir) = agents_dir {
        cmd.arg("--agents-dir").arg(dir);
    }
    cmd.output().expect("cannot run wirecheck")
}

/// The verdicts of the snapshot cases, and the other failures.
fn snapshot_verdicts(out: &Path) -> (Vec<(String, String)>, Vec<String>) {
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let mut snapshots = Vec::new();
    let mut other_failures = Vec::new();
    for case in results["agents"][0]["cases"].as_array().unwrap() {
        let id = case["id"].as_str().unwrap().to_owned();
        let verdict = case["verdict"].as_str().unwrap().to_owned();
        if id.ends_with(".snapshot.transcript") {
            // A pair that is not run (a scenario the agent does not claim, or one its profile
            // declares unimplemented): its snapshot case has the pair's fate (skipped, or the
            // declaration), nothing was compared.
            if verdict == "skipped" || verdict == "unimplemented" {
                continue;
            }
            // A pass; or, where time decides (a scenario whose answers move with the clock, the
            // agent's resends and exit) on a machine that stalled: the documented informational.
            let stalled = verdict == "informational"
                && case["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("where time decides"));
            snapshots.push((id, if stalled { "pass".into() } else { verdict }));
        } else if verdict == "fail" {
            other_failures.push(id);
        }
    }
    (snapshots, other_failures)
}

/// A copy of the committed snapshots, so a mismatch writes its `.snap.new` there, not in the
/// checkout.
fn committed_snapshots(into: &Path) -> std::path::PathBuf {
    let copy = into.join("snapshots");
    let status = Command::new("cp")
        .arg("-r")
        .arg(repo_root().join("snapshots/agents"))
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    copy
}

#[test]
fn every_snapshotted_agent_still_emits_what_was_accepted() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let snaps = committed_snapshots(dir.path());
    let mut mismatches = Vec::new();
    let agents = snapshotted();
    assert!(agents.len() >= 10, "{agents:?}");
    for (agent, cases) in &agents {
        let agent = agent.as_str();
        let out = dir.path().join(agent);
        let o = run(agent, cases, &snaps, None, &out);
        let (snapshots, _) = snapshot_verdicts(&out);
        assert!(
            !snapshots.is_empty(),
            "{agent}: no snapshot case ran\n{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let bad: Vec<_> = snapshots.iter().filter(|(_, v)| v != "pass").collect();
        if !bad.is_empty() {
            mismatches.push(format!(
                "{agent}: {bad:?}\n{}",
                String::from_utf8_lossy(&o.stdout)
            ));
        }
        // Every committed snapshot of the agent belongs to a scenario (--unreferenced reject).
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("no longer exists"),
            "{agent}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n\n"));
}

/// The reporter run differently (it skips IMDS: `--no-imds`, the VM id given): every check
/// stays green, its snapshots do not.
#[test]
fn a_change_to_what_the_reporter_sends_that_every_check_accepts_fails_its_snapshots() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let snaps = committed_snapshots(dir.path());
    let agents = dir.path().join("agents");
    std::fs::create_dir(&agents).unwrap();
    let profile =
        std::fs::read_to_string(repo_root().join("conformance/agents/provision-report.toml"))
            .unwrap()
            .replace("\"--imds={imds_url}\", ", "\"--no-imds\", ");
    assert!(profile.contains("--no-imds"));
    std::fs::write(agents.join("provision-report.toml"), profile).unwrap();
    let out = dir.path().join("out");
    let o = run(
        "provision-report",
        "wire.health.*",
        &snaps,
        Some(&agents),
        &out,
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let (snapshots, other_failures) = snapshot_verdicts(&out);
    assert!(other_failures.is_empty(), "{other_failures:?}");
    assert_eq!(snapshots.len(), 7, "{snapshots:?}");
    assert!(snapshots.iter().all(|(_, v)| v == "fail"), "{snapshots:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("-  - GET imds.instance"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}
