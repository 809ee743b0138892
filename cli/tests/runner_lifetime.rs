//! Nothing of a run outlives it, however it ends: each test is one way `wirecheck run` used to
//! leave agents running, or their folders behind, named after that finding.

use crate::runner_support;

use std::path::Path;
use std::time::Duration;

use runner_support::{
    STUCK_AGENT, as_ordinary_user, processes_running, repo, script_agent, shared_tempdir, wirecheck,
};
use wirecheck_test_support::procs;

/// `wirecheck run` of agents that never end (each with a child), four at a time, as an
/// ordinary user when `ordinary`; returns once at least two agents and their children run.
fn start_stuck_run(dir: &Path, ordinary: bool) -> std::process::Child {
    start_stuck_run_in(dir, None, ordinary)
}

/// [`start_stuck_run`] with `TMPDIR` set to `tmp` (where its case folders go).
fn start_stuck_run_in(dir: &Path, tmp: Option<&Path>, ordinary: bool) -> std::process::Child {
    let agents = script_agent(dir, "stuck", "url", "\"json\"", STUCK_AGENT);
    let mut cmd = wirecheck(&repo());
    cmd.args(["run", "--quiet", "--agent", "stuck", "--agents-dir"])
        .arg(&agents)
        .arg("--out")
        .arg(dir.join("out"))
        .args(["--jobs", "4", "--cases", "{wire.health.json.*,retry.*}"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if let Some(tmp) = tmp {
        cmd.env("TMPDIR", tmp);
    }
    let mut cmd = if ordinary { as_ordinary_user(cmd) } else { cmd };
    let child = cmd.spawn().unwrap();
    let script = dir.join("stuck.py");
    let t0 = std::time::Instant::now();
    while processes_running(&script).len() < 4 {
        assert!(t0.elapsed() < Duration::from_secs(60), "no agent started");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// SIGKILL (a CI timeout's last word) used to leave every running agent, its children and
/// wirecheck's own forks (the waiters and inits of the agents' PID namespaces) alive.
fn assert_sigkill_leaves_no_process(ordinary: bool) {
    let dir = shared_tempdir();
    let mut run = start_stuck_run(dir.path(), ordinary);
    run.kill().unwrap();
    run.wait().unwrap();
    // Every process of the run names the test's folder: the agents their script, wirecheck's
    // forks the agents folder.
    let left = procs::left_after(dir.path().to_str().unwrap(), Duration::from_secs(10));
    assert!(left.is_empty(), "outlived wirecheck's SIGKILL: {left:#?}");
}

#[test]
fn a_sigkilled_run_leaves_no_agent_process_behind() {
    assert_sigkill_leaves_no_process(false);
}

#[test]
fn a_sigkilled_run_of_an_ordinary_user_leaves_no_agent_process_behind() {
    if let Some(why) = conformance::containment::unavailable() {
        eprintln!("not run: {why}");
        return;
    }
    assert_sigkill_leaves_no_process(true);
}

/// The `run-*` folders in `tmp`'s folder of case folders (the test's own `TMPDIR`).
fn run_folders(tmp: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(tmp.join(conformance::runner::CASES_FOLDER)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(conformance::runner::CASE_ROOT_PREFIX))
        })
        .collect()
}

/// A run of an agent that exits at once, with `TMPDIR` set to `tmp`.
fn quick_run(dir: &Path, tmp: &Path, ordinary: bool) -> std::process::Output {
    let agents = script_agent(dir, "quick", "url", "\"json\"", QUICK_AGENT);
    let mut cmd = wirecheck(&repo());
    cmd.args(["run", "--quiet", "--agent", "quick", "--agents-dir"])
        .arg(&agents)
        .arg("--out")
        .arg(dir.join("quick-out"))
        .args(["--cases", "wire.health.json.ready.*"])
        .env("TMPDIR", tmp);
    let mut cmd = if ordinary { as_ordinary_user(cmd) } else { cmd };
    cmd.output().unwrap()
}

/// Leaves a folder of its own unreadable and unwritable (it runs as the same user as
/// wirecheck), then exits.
const QUICK_AGENT: &str = r#"
import os
os.makedirs("locked/inner")
open("locked/inner/file", "w").write("x")
os.chmod("locked/inner", 0)
os.chmod("locked", 0o500)
"#;

/// A SIGKILLed run used to leave its case folders for ever: the next run removes them (and
/// never a live run's: `runner::case_root`).
#[test]
fn the_next_run_removes_the_case_folders_a_killed_run_left() {
    let dir = shared_tempdir();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    runner_support::open_to_all(&tmp);
    let mut run = start_stuck_run_in(dir.path(), Some(&tmp), false);
    run.kill().unwrap();
    run.wait().unwrap();
    let left = run_folders(&tmp);
    assert_eq!(left.len(), 1, "{left:?}");
    let o = quick_run(dir.path(), &tmp, false);
    assert!(o.status.code().is_some(), "{o:?}");
    assert_eq!(run_folders(&tmp), Vec::<std::path::PathBuf>::new());
}

/// A non-root agent that left a folder of its own unreadable (chmod 000) used to leave its
/// whole run folder behind, silently: it is removed after the run.
#[test]
fn a_non_root_agents_locked_folder_does_not_outlive_the_run() {
    let dir = shared_tempdir();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    runner_support::open_to_all(&tmp);
    let o = quick_run(dir.path(), &tmp, true);
    let stderr = runner_support::stderr(&o);
    assert!(o.status.code().is_some(), "{stderr}");
    assert!(!stderr.contains("cannot remove"), "{stderr}");
    assert_eq!(run_folders(&tmp), Vec::<std::path::PathBuf>::new());
}
