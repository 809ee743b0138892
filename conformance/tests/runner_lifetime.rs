//! Nothing of a run outlives it, however it ends: each test is one way `wirecheck run` used to
//! leave agents running, or their folders behind, named after that finding.

mod runner_support;

use std::path::Path;
use std::time::Duration;

use runner_support::{
    STUCK_AGENT, as_ordinary_user, processes_running, repo, script_agent, shared_tempdir,
    wirecheck,
};
use wirecheck_test_support::procs;

/// `wirecheck run` of agents that never end (each with a child), four at a time, as an
/// ordinary user when `ordinary`; returns once at least two agents and their children run.
fn start_stuck_run(dir: &Path, ordinary: bool) -> std::process::Child {
    let agents = script_agent(dir, "stuck", "url", "\"json\"", STUCK_AGENT);
    let mut cmd = wirecheck(&repo());
    cmd.args(["run", "--quiet", "--agent", "stuck", "--agents-dir"])
        .arg(&agents)
        .arg("--out")
        .arg(dir.join("out"))
        .args(["--jobs", "4", "--cases", "{wire.health.json.*,retry.*}"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
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
    if let Some(why) = conformance::netns::unavailable() {
        eprintln!("not run: {why}");
        return;
    }
    assert_sigkill_leaves_no_process(true);
}
