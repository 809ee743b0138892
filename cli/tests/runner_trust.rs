//! Verdicts a user can trust: each test is one way an agent (or a loaded machine) used to get
//! a wrong verdict out of `wirecheck run`, named after that finding.

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod runner_support;

use std::path::Path;
use std::process::Output;

use runner_support::{
    Load, SLOW_STARTER, STUCK_AGENT, as_ordinary_user, case, open_to_all, processes_running, repo,
    results, script_agent, shared_tempdir, stderr, stdout, wirecheck,
};

/// The load test keeps every core busy; the other tests here have deadlines of their own, so
/// they do not run while it does (it takes the lock for writing, they for reading).
static LOAD: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn quiet_machine() -> std::sync::RwLockReadGuard<'static, ()> {
    LOAD.read().unwrap_or_else(|e| e.into_inner())
}

/// `wirecheck run --agent NAME --agents-dir AGENTS --out DIR/out ARGS...`.
fn run(dir: &Path, name: &str, agents: &Path, args: &[&str]) -> Output {
    wirecheck(&repo())
        .args(["run", "--quiet", "--agent", name, "--agents-dir"])
        .arg(agents)
        .arg("--out")
        .arg(dir.join("out"))
        .args(args)
        .output()
        .unwrap()
}

fn show(o: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", stdout(o), stderr(o))
}

/// Reports Ready on the JSON endpoint whatever it is asked: right for JSON scenarios, the
/// wrong flow for XML ones.
const JSON_ONLY_AGENT: &str = r#"
import os, urllib.request
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=5).read()
"#;

#[test]
fn an_agent_claiming_xml_that_posts_json_fails_the_xml_scenarios() {
    let _machine = quiet_machine();
    let dir = tempfile::tempdir().unwrap();
    let agents = script_agent(dir.path(), "jsononly", "url", "\"xml\"", JSON_ONLY_AGENT);
    let o = run(
        dir.path(),
        "jsononly",
        &agents,
        &["--cases", "wire.health.xml.ready.*"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = results(&dir.path().join("out"));
    let shape = case(&r, "jsononly", "wire.health.xml.ready.report.shape");
    assert_eq!(shape["verdict"], "fail", "{shape}");
    let reason = shape["reason"].as_str().unwrap();
    assert!(
        reason.contains("wireserver.health.json") && reason.contains("xml flow"),
        "{reason}"
    );
    for check in ["behaviour.terminal", "behaviour.exit"] {
        let c = case(&r, "jsononly", &format!("wire.health.xml.ready.{check}"));
        assert_eq!(c["verdict"], "fail", "{c}");
    }
    // Nothing of the XML flow passed on the strength of a JSON report.
    assert_eq!(
        case(&r, "jsononly", "wire.health.xml.ready.report.state")["verdict"],
        "skipped"
    );
}

/// The finding of issue 24: 84 % of the real agents' skipped cases said "does not claim json",
/// hundreds of rows that hid how little was judged. A flow the agent does not claim is now not
/// offered: no case of it at all, and one line per agent and flow in the summary, results.json
/// and the matrix.
#[test]
fn a_flow_the_agent_does_not_claim_is_named_once_not_skipped_case_by_case() {
    let _machine = quiet_machine();
    let dir = tempfile::tempdir().unwrap();
    let agents = script_agent(dir.path(), "jsononly", "url", "\"json\"", JSON_ONLY_AGENT);
    let o = run(
        dir.path(),
        "jsononly",
        &agents,
        &["--cases", "wire.health.*.ready.*"],
    );
    let r = results(&dir.path().join("out"));
    let all = runner_support::cases(&r);
    assert!(!all.is_empty(), "{}", show(&o));
    for (id, _, reason) in &all {
        assert!(id.starts_with("wire.health.json.ready."), "{id}");
        assert!(!reason.contains("does not claim \"xml\""), "{id}: {reason}");
    }
    let unclaimed = &r["unclaimed_flows"];
    assert_eq!(unclaimed.as_array().map(Vec::len), Some(1), "{unclaimed}");
    assert_eq!(unclaimed[0]["agent"], "jsononly");
    assert_eq!(unclaimed[0]["flow"], "xml");
    assert_eq!(unclaimed[0]["scenarios"], 1);
    assert_eq!(unclaimed[0]["cases"], all.len());
    assert!(
        stdout(&o).contains(&format!(
            "jsononly: the xml flow is not claimed: 1 scenario ({} cases) not offered",
            all.len()
        )),
        "{}",
        show(&o)
    );
    let matrix = wirecheck(&repo())
        .arg("matrix")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert!(
        stdout(&matrix).contains(&format!(
            "| *not offered* | xml (1 scenario, {} cases) |",
            all.len()
        )),
        "{}",
        stdout(&matrix)
    );
}

/// Whether agents can be contained here; says why not (the run itself refuses then: see
/// `a_machine_that_refuses_part_of_the_containment_refuses_the_run_unless_uncontained`).
fn containment_available() -> bool {
    match conformance::containment::unavailable() {
        None => true,
        Some(why) => {
            eprintln!("not run: {why}");
            false
        }
    }
}

#[test]
fn a_run_in_which_every_case_was_skipped_exits_non_zero_saying_why() {
    let _machine = quiet_machine();
    // A sandbox profile run without root: every case is skipped (the sandbox needs root).
    let dir = shared_tempdir();
    let agents = script_agent(dir.path(), "sandboxed", "sandbox", "\"json\"", "");
    let mut cmd = wirecheck(&repo());
    cmd.args(["run", "--quiet", "--agent", "sandboxed", "--agents-dir"])
        .arg(&agents)
        .arg("--out")
        .arg(dir.path().join("out"))
        .args(["--cases", "wire.health.json.ready.*"]);
    let o = as_ordinary_user(cmd).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("nothing about it was judged"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("agent sandboxed") && lines[0].contains("root"),
        "{}",
        lines[0]
    );
    // The results are still written, every case skipped.
    let r = results(&dir.path().join("out"));
    let counts = runner_support::counts(&r, "sandboxed");
    assert_eq!(counts.keys().collect::<Vec<_>>(), ["skipped"], "{counts:?}");
}

/// A JSON agent whose profile declares every case unimplemented: the JSON cases run (and are
/// graded `unimplemented` whatever the agent did), the XML ones never run (`unimplemented`, the
/// agent does not claim xml), the KVP checks are skipped. Nothing about it is judged.
fn declared_unimplemented_agent(dir: &Path) -> std::path::PathBuf {
    let agents = script_agent(dir, "declared", "url", "\"json\"", JSON_ONLY_AGENT);
    let profile = agents.join("declared.toml");
    let mut text = std::fs::read_to_string(&profile).unwrap();
    text.push_str(
        "\n[[deviation]]\ncases = \"*\"\nverdict = \"unimplemented\"\nreason = \"says it does nothing\"\n",
    );
    std::fs::write(&profile, text).unwrap();
    agents
}

/// The finding: `wirecheck run --agent afterburn` as an ordinary user skipped 431 cases
/// ("sandbox attach needs root"), graded 91 `unimplemented` from the profile's declarations,
/// and exited 0 in 0.0 s: declared deviations on cases that never ran counted as judged.
/// Here the same shape without needing root or not: declarations and skips only.
#[test]
fn false_green_nothing_judged_exits_2() {
    let _machine = quiet_machine();
    let dir = tempfile::tempdir().unwrap();
    let agents = declared_unimplemented_agent(dir.path());
    let o = run(
        dir.path(),
        "declared",
        &agents,
        &["--cases", "wire.health.{json,xml}.ready.*"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let r = results(&dir.path().join("out"));
    let counts = runner_support::counts(&r, "declared");
    assert!(
        counts
            .keys()
            .all(|v| v == "skipped" || v == "unimplemented")
            && counts.len() == 2,
        "{counts:?}"
    );
    // One line, naming the agent and both kinds of cases that are not judged.
    let err = stderr(&o);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("nothing about it was judged"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("wirecheck: error: agent declared:")
            && lines[0].contains(&format!("{} skipped", counts["skipped"]))
            && lines[0].contains(&format!(
                "{} declared unimplemented",
                counts["unimplemented"]
            )),
        "{}",
        lines[0]
    );
}

/// The review's finding on the flows: an agent offered no case at all (every selected scenario
/// on a flow it does not claim) vanished from the results, and a run beside a judged agent
/// ended green. It is now shown, and the run is not judged (exit 2).
#[test]
fn false_green_an_agent_offered_no_case_beside_a_judged_one_exits_2() {
    let _machine = quiet_machine();
    let dir = tempfile::tempdir().unwrap();
    let agents = script_agent(dir.path(), "xmlonly", "url", "\"xml\"", JSON_ONLY_AGENT);
    std::fs::copy(
        repo().join("conformance/agents/provision-report.toml"),
        agents.join("provision-report.toml"),
    )
    .unwrap();
    let o = wirecheck(&repo())
        .args([
            "run",
            "--quiet",
            "--agent",
            "provision-report",
            "--agent",
            "xmlonly",
        ])
        .arg("--agents-dir")
        .arg(&agents)
        .arg("--out")
        .arg(dir.path().join("out"))
        .args(["--cases", "wire.health.json.ready.*"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        stderr(&o).contains(
            "agent xmlonly: nothing about it was judged (no case of it ran): the json flow is not claimed: 1 scenario"
        ),
        "{}",
        show(&o)
    );
    let r = results(&dir.path().join("out"));
    let names: Vec<&str> = r["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["agent"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["provision-report", "xmlonly"]);
}

/// One agent judged, another not: the run is not green on the strength of the first.
#[test]
fn false_green_one_agent_judged_and_one_not_exits_2() {
    let _machine = quiet_machine();
    let dir = tempfile::tempdir().unwrap();
    let agents = declared_unimplemented_agent(dir.path());
    std::fs::copy(
        repo().join("conformance/agents/provision-report.toml"),
        agents.join("provision-report.toml"),
    )
    .unwrap();
    let o = run(
        dir.path(),
        "declared",
        &agents,
        &[
            "--agent",
            "provision-report",
            "--cases",
            "wire.health.json.ready.*",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let r = results(&dir.path().join("out"));
    assert!(runner_support::counts(&r, "provision-report")["pass"] > 0);
    let err = stderr(&o);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("nothing about it was judged"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("agent declared:"), "{}", lines[0]);
}

/// Names, on stderr, the variables it got of those a caller might have set (with their
/// values), then reports Ready on the JSON flow.
const ENVIRONMENT_READER: &str = r#"
import json, os, sys, urllib.request
watched = {"RUST_BACKTRACE", "RUST_LOG", "PYTHONWARNINGS", "PYTHONPATH", "PYTHONDEVMODE",
           "LD_AUDIT", "LD_DEBUG_OUTPUT", "MALLOC_PERTURB_", "SSH_AUTH_SOCK",
           "WIRECHECK_TEST_UNRELATED"}
got = {k: v for k, v in os.environ.items() if k in watched or k.startswith("FAKETIME")
       or k == "DONT_FAKE_MONOTONIC"}
sys.stderr.write("inherited: " + json.dumps(got, sort_keys=True) + "\n")
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=5).read()
"#;

#[test]
fn the_callers_runtime_settings_do_not_reach_the_agent() {
    // A developer's RUST_BACKTRACE=1 made afterburn resolve a backtrace as it exited, slowly
    // enough at agent time to fail behaviour.budget: a verdict that depended on the shell.
    let _machine = quiet_machine();
    let dir = tempfile::tempdir().unwrap();
    let agents = script_agent(
        dir.path(),
        "envreader",
        "url",
        "\"json\"",
        ENVIRONMENT_READER,
    );
    // What a profile's [env] gives still arrives.
    let profile = agents.join("envreader.toml");
    let text = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(
        &profile,
        format!("{text}\n[env]\nRUST_LOG = \"from-the-profile\"\n"),
    )
    .unwrap();
    let o = wirecheck(&repo())
        .args(["run", "--quiet", "--agent", "envreader", "--agents-dir"])
        .arg(&agents)
        .arg("--out")
        .arg(dir.path().join("out"))
        .args(["--cases", "wire.health.json.ready.*"])
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LOG", "trace")
        .env("PYTHONWARNINGS", "error")
        .env("PYTHONDEVMODE", "1")
        .env("PYTHONPATH", "/where/the/agent/is")
        .env("LD_AUDIT", "")
        .env("LD_DEBUG_OUTPUT", "/nonexistent/ld")
        .env("MALLOC_PERTURB_", "165")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .env("FAKETIME", "+0 x2")
        .env("DONT_FAKE_MONOTONIC", "1")
        .env("SSH_AUTH_SOCK", "/nonexistent/agent.sock")
        .env("WIRECHECK_TEST_UNRELATED", "kept")
        .output()
        .unwrap();
    let r = results(&dir.path().join("out"));
    assert_eq!(
        case(&r, "envreader", "wire.health.json.ready.report.state")["verdict"],
        "pass",
        "{}",
        show(&o)
    );
    let stderr = std::fs::read_to_string(
        dir.path()
            .join("out/artifacts/envreader/wire.health.json.ready/run-1.stderr"),
    )
    .unwrap();
    // Where the agent is found and what changes no runtime are the caller's; the profile's
    // setting is the profile's.
    assert!(
        stderr.contains(
            r#"inherited: {"PYTHONPATH": "/where/the/agent/is", "RUST_LOG": "from-the-profile", "WIRECHECK_TEST_UNRELATED": "kept"}"#
        ),
        "{stderr}"
    );
}

/// Verdicts by case id.
fn verdicts(r: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    runner_support::cases(r)
        .into_iter()
        .map(|(id, verdict, _)| (id, verdict))
        .collect()
}

#[test]
fn a_slow_starting_agent_gets_the_same_verdicts_ten_times_under_load() {
    let _machine = LOAD.write().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let agents = script_agent(dir.path(), "slowstart", "url", "\"json\"", SLOW_STARTER);
    let cases = "{wire.health.json.ready,retry.status.500,retry.status.429,transport.reset}.*";
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let _load = Load::start(cores * 2);
    // Ten runs, two at a time, each with more scenarios in flight than cores.
    let mut all = Vec::new();
    for pair in 0..5 {
        let runs: Vec<_> = (0..2)
            .map(|k| {
                let out = dir.path().join(format!("out-{pair}-{k}"));
                let child = wirecheck(&repo())
                    .args(["run", "--quiet", "--agent", "slowstart", "--agents-dir"])
                    .arg(&agents)
                    .arg("--out")
                    .arg(&out)
                    .args(["--cases", cases])
                    // Longer than any scenario's deadline here (7 s): counted from spawn, every
                    // case would be killed before its first request.
                    .env("SLOW_START", "7.5")
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                (out, child)
            })
            .collect();
        for (out, child) in runs {
            let o = child.wait_with_output().unwrap();
            assert_eq!(o.status.code(), Some(0), "{}", show(&o));
            all.push(verdicts(&results(&out)));
        }
    }
    let first = &all[0];
    assert!(first.len() >= 20, "{first:?}");
    assert!(
        first.values().all(|v| v == "pass" || v == "skipped"),
        "{first:?}"
    );
    for (i, other) in all.iter().enumerate() {
        assert_eq!(other, first, "run {} differs from run 1", i + 1);
    }
}

/// Sends a wrong report (NotReady for a Ready case), then 10,000 cheap IMDS GETs on one
/// connection, then the right report: the wrong one is what the checks must see.
const PADDING_AGENT: &str = r#"
import http.client, os, urllib.parse
def post(body):
    url = urllib.parse.urlparse(os.environ["WIRECHECK_CASE_WIRESERVER_URL"])
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    c.request("POST", "/provisioning/health", body=body,
              headers={"Content-Type": "application/json"})
    c.getresponse().read()
    c.close()
post(b'{"details":{"description":"x","subStatus":"ProvisioningFailed"},"state":"NotReady"}')
imds = urllib.parse.urlparse(os.environ["WIRECHECK_CASE_IMDS_URL"])
c = http.client.HTTPConnection(imds.hostname, imds.port, timeout=5)
for _ in range(10000):
    c.request("GET", "/metadata/versions", headers={"Metadata": "true"})
    c.getresponse().read()
c.close()
post(b'{"state":"Ready"}')
"#;

/// `wire.health.json.ready` with a deadline long enough for 10,000 padding requests from
/// Python on a loaded machine: killed before it had padded, the agent would be judged on a
/// journal within its bound (its wrong report failing as usual), which is not what this tests.
const PADDING_SCENARIO: &str = r#"
id = "wire.health.json.ready"
title = "Ready over json, time to pad"
checks = ["report.state", "behaviour.terminal", "behaviour.exit"]

[agent]
action = "ready"
protocol = "json"
deadline = 60.0

[expect]
outcome = "reported"
"#;

#[test]
fn an_agent_that_pads_the_journal_past_its_bound_is_not_judged_as_a_pass() {
    let _machine = quiet_machine();
    let dir = tempfile::tempdir().unwrap();
    let agents = script_agent(dir.path(), "padder", "url", "\"json\"", PADDING_AGENT);
    let scenarios = dir.path().join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    std::fs::write(scenarios.join("padding.toml"), PADDING_SCENARIO).unwrap();
    let o = run(
        dir.path(),
        "padder",
        &agents,
        &["--scenarios", scenarios.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = results(&dir.path().join("out"));
    for check in ["report.state", "behaviour.terminal", "behaviour.exit"] {
        let c = case(&r, "padder", &format!("wire.health.json.ready.{check}"));
        assert_eq!(c["verdict"], "fail", "{c}");
        let reason = c["reason"].as_str().unwrap();
        assert!(
            reason.contains("10002 requests") && reason.contains("not judged"),
            "{reason}"
        );
    }
}

/// Reports Ready, then leaves in place of its pool file what POOL_TRAP says: a FIFO (a read
/// would block for ever) or a link to /dev/zero (a read would never end).
const POOL_TRAP_AGENT: &str = r#"
import os, urllib.request
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=5).read()
pool = os.environ["WIRECHECK_CASE_KVP_POOL"]
os.remove(pool)
if os.environ["POOL_TRAP"] == "fifo":
    os.mkfifo(pool)
else:
    os.symlink("/dev/zero", pool)
"#;

#[test]
fn an_agent_that_leaves_a_fifo_or_a_device_for_its_pool_is_not_judged_and_does_not_hang_the_run() {
    let _machine = quiet_machine();
    for (trap, what) in [("fifo", "not a regular file"), ("zero", "symbolic link")] {
        let dir = tempfile::tempdir().unwrap();
        let agents = script_agent(dir.path(), "trap", "url", "\"json\"", POOL_TRAP_AGENT);
        let started = std::time::Instant::now();
        let o = wirecheck(&repo())
            .args(["run", "--quiet", "--agent", "trap", "--agents-dir"])
            .arg(&agents)
            .arg("--out")
            .arg(dir.path().join("out"))
            .args(["--cases", "wire.health.json.ready.*"])
            .env("POOL_TRAP", trap)
            .output()
            .unwrap();
        assert!(
            started.elapsed().as_secs() < 60,
            "{trap}: took {:?}",
            started.elapsed()
        );
        assert_eq!(o.status.code(), Some(1), "{trap}: {}", show(&o));
        let r = results(&dir.path().join("out"));
        let c = case(&r, "trap", "wire.health.json.ready.report.state");
        assert_eq!(c["verdict"], "fail", "{c}");
        let reason = c["reason"].as_str().unwrap();
        assert!(
            reason.contains(what) && reason.contains("not judged"),
            "{reason}"
        );
    }
}

/// Reports Ready, but first leaves a `setsid()` daemon behind that keeps a heartbeat file
/// fresh (in its case folder, the one place it can write) and tries to rewrite the results
/// after wirecheck is done.
const DAEMON_AGENT: &str = r#"
import os, time, urllib.request
watch = os.getcwd()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for i in range(600):
            with open(os.path.join(watch, "heartbeat"), "w") as f:
                f.write(str(i))
            if i > 20:
                try:
                    with open(os.environ["DAEMON_RESULTS"], "w") as f:
                        f.write('{"forged": true}')
                except OSError:
                    pass
            time.sleep(0.1)
    os._exit(0)
# The daemon is going before the agent reports (its end would end the daemon too early).
for _ in range(100):
    if os.path.exists(os.path.join(watch, "heartbeat")):
        print("the daemon is running", flush=True)
        break
    time.sleep(0.05)
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=5).read()
"#;

/// Runs the daemon agent (as an ordinary user when `ordinary`) and checks that nothing of it
/// is left once wirecheck has exited.
fn assert_no_daemon_survives(ordinary: bool) {
    let dir = shared_tempdir();
    let agents = script_agent(dir.path(), "daemon", "url", "\"json\"", DAEMON_AGENT);
    let script = dir.path().join("daemon.py");
    let out = dir.path().join("out");
    let mut cmd = wirecheck(&repo());
    cmd.args(["run", "--quiet", "--agent", "daemon", "--agents-dir"])
        .arg(&agents)
        .arg("--out")
        .arg(&out)
        .args(["--cases", "wire.health.json.ready.*"])
        .env("DAEMON_RESULTS", out.join("results.json"));
    let mut cmd = if ordinary { as_ordinary_user(cmd) } else { cmd };
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let said = walk(&out.join("artifacts/daemon"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "stdout"))
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("the daemon is running")))
        .count();
    assert!(said > 0, "the daemon never ran");
    let results_before = std::fs::read_to_string(out.join("results.json")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3000));
    let left = processes_running(&script);
    assert!(
        left.is_empty(),
        "a setsid() daemon of the agent outlived its case and wirecheck: {left:?}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("results.json")).unwrap(),
        results_before
    );
}

#[test]
fn a_setsid_daemon_of_the_agent_does_not_outlive_its_case() {
    let _machine = quiet_machine();
    if !containment_available() {
        return;
    }
    assert_no_daemon_survives(false);
}

#[test]
fn a_setsid_daemon_does_not_outlive_its_case_without_root_either() {
    let _machine = quiet_machine();
    if !containment_available() {
        return;
    }
    assert_no_daemon_survives(true);
}

/// Interrupts a run of stuck agents with `signal` once they are all going, and checks what a
/// user gets: the shell's status for the signal, partial results marked as interrupted, and no
/// agent process left.
fn assert_interrupted_cleanly(signal: rustix::process::Signal, status: i32, name: &str) {
    let dir = shared_tempdir();
    let agents = script_agent(dir.path(), "stuck", "url", "\"json\"", STUCK_AGENT);
    let script = dir.path().join("stuck.py");
    let out = dir.path().join("out");
    let child = wirecheck(&repo())
        .args(["run", "--quiet", "--agent", "stuck", "--agents-dir"])
        .arg(&agents)
        .arg("--out")
        .arg(&out)
        .args(["--jobs", "4", "--cases", "{wire.health.json.*,retry.*}"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while processes_running(&script).len() < 2 {
        assert!(t0.elapsed().as_secs() < 30, "no agent started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, signal).unwrap();
    let sent = std::time::Instant::now();
    let o = child.wait_with_output().unwrap();
    assert!(
        sent.elapsed().as_secs() < 15,
        "took {:?} to stop",
        sent.elapsed()
    );
    assert_eq!(o.status.code(), Some(status), "{}", show(&o));
    assert!(
        stderr(&o).contains(&format!("interrupted ({name})")),
        "{}",
        show(&o)
    );
    let r = results(&out);
    assert_eq!(r["interrupted"], name);
    let counts = runner_support::counts(&r, "stuck");
    assert_eq!(counts.keys().collect::<Vec<_>>(), ["skipped"], "{counts:?}");
    let reasons: Vec<&str> = r["agents"][0]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["reason"].as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("interrupted") && r.contains("while the case ran")),
        "{reasons:?}"
    );
    let left = processes_running(&script);
    assert!(
        left.is_empty(),
        "agent processes outlived the interrupted run: {left:?}"
    );
}

#[test]
fn sigint_mid_run_stops_every_agent_and_writes_partial_results() {
    let _machine = quiet_machine();
    assert_interrupted_cleanly(rustix::process::Signal::INT, 130, "SIGINT");
}

#[test]
fn sigterm_mid_run_stops_every_agent_and_writes_partial_results() {
    let _machine = quiet_machine();
    assert_interrupted_cleanly(rustix::process::Signal::TERM, 143, "SIGTERM");
}

/// A closed terminal (or a CI's cancel) sends SIGHUP: it used to end wirecheck at once, with
/// no results and every agent left running.
#[test]
fn sighup_mid_run_stops_every_agent_and_writes_partial_results() {
    let _machine = quiet_machine();
    assert_interrupted_cleanly(rustix::process::Signal::HUP, 129, "SIGHUP");
}

/// Reports Ready whatever it is asked (wrong for its in-progress run), and in its in-progress
/// run breaks its case folder's `tmp/` (BREAK: replaces it with a file, with a dangling link,
/// or makes it mode 000).
const TMP_BREAKER_AGENT: &str = r#"
import os, shutil, sys, urllib.request
if sys.argv[1] == "in-progress":
    tmp = os.environ["TMPDIR"]
    mode = os.environ["BREAK"]
    if mode == "chmod":
        os.chmod(tmp, 0)
    else:
        shutil.rmtree(tmp)
        if mode == "file":
            open(tmp, "w").close()
        else:
            os.symlink("/nonexistent", tmp)
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=5).read()
"#;

/// An agent used to turn its own failure (Ready when asked for in-progress) into harness-error
/// skips by breaking its case folder's `tmp/`, which the harness made again for its next run:
/// it is judged, whatever it did to the folder, as root and as an ordinary user.
#[test]
fn an_agent_that_breaks_its_tmp_folder_is_judged_not_skipped() {
    let _machine = quiet_machine();
    if !containment_available() {
        return;
    }
    for ordinary in [false, true] {
        for mode in ["file", "link", "chmod"] {
            let dir = shared_tempdir();
            let agents = script_agent(
                dir.path(),
                "breaker",
                "url",
                "\"json\", \"in-progress\"",
                TMP_BREAKER_AGENT,
            );
            let mut cmd = wirecheck(&repo());
            cmd.args(["run", "--quiet", "--agent", "breaker", "--agents-dir"])
                .arg(&agents)
                .arg("--out")
                .arg(dir.path().join("out"))
                .args(["--cases", "wire.health.json.in-progress-then-ready.*"])
                .env("BREAK", mode);
            let mut cmd = if ordinary { as_ordinary_user(cmd) } else { cmd };
            let o = cmd.output().unwrap();
            let what = format!("{mode}, ordinary user: {ordinary}\n{}", show(&o));
            assert_eq!(o.status.code(), Some(1), "{what}");
            let r = results(&dir.path().join("out"));
            let cases = r["agents"][0]["cases"].as_array().unwrap();
            assert!(
                cases
                    .iter()
                    .all(|c| !c["reason"].as_str().unwrap_or("").contains("harness error")),
                "{what}"
            );
            let state = case(
                &r,
                "breaker",
                "wire.health.json.in-progress-then-ready.report.state",
            );
            assert_eq!(state["verdict"], "fail", "{what}\n{state}");
        }
    }
}

/// Tries to unmount what hides its neighbours (and the host's `/proc`), then for three
/// seconds attacks every neighbour it can find: posts forged failure reports to
/// every port listening on 127.0.0.1 but its own fake's, appends to every other case's pool
/// file, kills every `provision-report`, and rewrites (or plants files in) the run's results
/// folder ATTACK_OUT, plants files outside its case folder: in ATTACK_PLANT (a folder
/// anyone may write to, as a neighbour's program folder could be) and in `/tmp`, and opens the
/// machine's disks for writing. Counts what worked on its stdout.
const FORGER: &str = r#"
import glob, json, os, signal, socket, subprocess, time, urllib.parse
done = {"posts": 0, "pools": 0, "kills": 0, "results": 0, "umounts": 0, "writes": 0, "disks": 0,
        "sysctls": 0, "sockets": 0, "tty": 0, "fds": 0}
# What wirecheck's caller left open (the test gives it descriptor 10, a folder outside).
try:
    os.fstat(10)
    done["fds"] += 1
except OSError:
    pass
# Its terminal, if it still had one.
try:
    os.close(os.open("/dev/tty", os.O_RDWR))
    done["tty"] += 1
except OSError:
    pass
# Undo the containment first: unmount what hides the neighbours and the host's /proc.
for hidden in (os.environ["ATTACK_OUT"], "/tmp/wirecheck-cases", "/proc"):
    if subprocess.run(["umount", "-l", hidden], capture_output=True).returncode == 0:
        done["umounts"] += 1
own = {urllib.parse.urlparse(os.environ["WIRECHECK_CASE_" + k]).port
       for k in ("WIRESERVER_URL", "IMDS_URL")}
forged = b'{"details":{"description":"result=error|reason=forged","subStatus":"ProvisioningFailed"},"state":"NotReady"}'
end = time.monotonic() + 3
while time.monotonic() < end:
    ports = set()
    try:
        for line in open("/proc/net/tcp").readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            ip, port = local.split(":")
            if state == "0A" and ip == "0100007F" and int(port, 16) not in own:
                ports.add(int(port, 16))
    except OSError:
        pass
    for port in ports:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=0.5)
            s.sendall(b"POST /provisioning/health HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(forged) + forged)
            if s.recv(12).startswith(b"HTTP/1.1 2"):
                done["posts"] += 1
            s.close()
        except OSError:
            pass
    pools = glob.glob("/tmp/wirecheck-cases*/**/kvp_pool_1", recursive=True)
    pools += glob.glob(os.path.dirname(os.getcwd()) + "/*/kvp_pool_1")
    for pool in pools:
        if os.path.dirname(pool) == os.getcwd():
            continue
        try:
            with open(pool, "ab") as f:
                f.write(b"FORGED" + b"\0" * 2554)
            done["pools"] += 1
        except OSError:
            pass
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            # PID 1 is its own namespace's init (a copy of wirecheck, whose command line names
            # provision-report): not a neighbour, and immune to it anyway.
            if cmdline == "/proc/1/cmdline":
                continue
            if b"provision-report" in open(cmdline, "rb").read():
                os.kill(int(cmdline.split("/")[2]), signal.SIGKILL)
                done["kills"] += 1
        except (OSError, ValueError):
            pass
    for results in glob.glob(os.environ["ATTACK_OUT"] + "/**", recursive=True):
        try:
            if os.path.isfile(results):
                with open(results, "w") as f:
                    f.write("{}")
                done["results"] += 1
            elif os.path.isdir(results):
                open(os.path.join(results, "planted"), "w").close()
                done["results"] += 1
        except OSError:
            pass
    # The machine's disks, opened for writing (never written): as root, a read-only mount
    # would not stop raw writes through one.
    for disk in os.listdir("/sys/block"):
        try:
            os.close(os.open("/dev/" + disk, os.O_WRONLY))
            done["disks"] += 1
        except OSError:
            pass
    # The host's kernel settings, written back unchanged (as root without capabilities, only
    # the uid is checked).
    for setting in ("/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern"):
        try:
            value = open(setting).read()
            with open(setting, "w") as f:
                f.write(value)
            done["sysctls"] += 1
        except OSError:
            pass
    # A named socket of the machine's (the test's listener stands for Docker's or D-Bus's).
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(0.5)
        s.connect(os.environ["ATTACK_SOCKET"])
        s.sendall(b"hello from the agent")
        s.close()
        done["sockets"] += 1
    except OSError:
        pass
    for folder in (os.environ["ATTACK_PLANT"], "/tmp"):
        try:
            with open(os.path.join(folder, "planted-%d" % os.getpid()), "w") as f:
                f.write("planted")
            done["writes"] += 1
        except OSError:
            pass
    time.sleep(0.05)
# On stdout, which its case keeps: it can write nowhere else.
print(json.dumps(done))
"#;

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// Runs the bundled reporter beside the forger (as an ordinary user when `ordinary`): the
/// reporter's verdicts are its own, and none of the forger's attacks reached a neighbour.
fn assert_forger_reaches_no_neighbour(ordinary: bool) {
    let dir = shared_tempdir();
    let agents = script_agent(dir.path(), "forger", "url", "\"json\"", FORGER);
    std::fs::copy(
        repo().join("conformance/agents/provision-report.toml"),
        agents.join("provision-report.toml"),
    )
    .unwrap();
    let plant = dir.path().join("plant");
    std::fs::create_dir(&plant).unwrap();
    open_to_all(&plant);
    let out = dir.path().join("out");
    let mut cmd = wirecheck(&repo());
    cmd.args([
        "run",
        "--quiet",
        "--agent",
        "forger",
        "--agent",
        "provision-report",
    ])
    .arg("--agents-dir")
    .arg(&agents)
    .arg("--out")
    .arg(&out)
    .args(["--cases", "{wire.health.*,retry.status.*,transport.*}"])
    .env("ATTACK_OUT", &out)
    .env("ATTACK_PLANT", &plant);
    // A named socket of the machine's: the forger must not reach it.
    let socket_path = dir.path().join("machine.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::fs::set_permissions(
        &socket_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    cmd.env("ATTACK_SOCKET", &socket_path);
    let mut cmd = if ordinary { as_ordinary_user(cmd) } else { cmd };
    // A descriptor wirecheck inherits from its caller, open on a folder outside every case.
    let outside = std::fs::File::open(dir.path()).unwrap();
    {
        use std::os::fd::AsRawFd as _;
        use std::os::unix::process::CommandExt as _;
        let fd = outside.as_raw_fd();
        // SAFETY: dup2 only, between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(fd, 10) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let o = cmd.output().unwrap();
    drop(outside);
    assert!(
        listener.accept().is_err(),
        "the forger connected to a named socket of the machine's"
    );
    let r = results(&out);
    let reporter = runner_support::counts(&r, "provision-report");
    let failed: Vec<String> = r["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["agent"] == "provision-report")
        .flat_map(|a| a["cases"].as_array().unwrap().iter())
        .filter(|c| c["verdict"] == "fail")
        .map(|c| format!("{}: {} {}", c["id"], c["reason"], c["evidence"]))
        .collect();
    // No report of the forger's reached the reporter's fakes (a timing verdict of the
    // reporter's on a machine the forger and the test load is not what this test judges).
    for journal in walk(&out.join("artifacts/provision-report")) {
        if journal.file_name().is_some_and(|n| n == "journal.jsonl") {
            let text = std::fs::read_to_string(&journal).unwrap();
            assert!(
                !text.contains("reason=forged"),
                "{} holds a forged report",
                journal.display()
            );
        }
    }
    let forged_fail = failed.iter().any(|f| f.contains("forged"));
    assert!(!forged_fail, "{reporter:?}\n{failed:#?}");
    assert!(
        reporter.get("pass").is_some_and(|n| *n > 100),
        "{reporter:?}\n{}",
        show(&o)
    );
    let mut attacks = 0;
    let outputs = walk(&out.join("artifacts/forger"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "stdout"));
    for output in outputs {
        let text = std::fs::read_to_string(&output).unwrap();
        let Some(line) = text.lines().rev().find(|l| l.starts_with('{')) else {
            continue;
        };
        let done: serde_json::Value = serde_json::from_str(line).unwrap();
        attacks += 1;
        for what in [
            "posts", "pools", "kills", "results", "umounts", "writes", "disks", "sysctls",
            "sockets", "tty", "fds",
        ] {
            assert_eq!(
                done[what], 0,
                "the forger's {what} reached a neighbour: {done}"
            );
        }
    }
    assert!(attacks >= 5, "the forger ran {attacks} times");
    // Nothing was planted in the results, and the reporter's pools hold only its own records.
    let planted: Vec<_> = walk(&out)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "planted"))
        .collect();
    assert!(planted.is_empty(), "{planted:?}");
    let planted = walk(&plant);
    assert!(
        planted.is_empty(),
        "planted outside its case folder: {planted:?}"
    );
    for pool in walk(&out.join("artifacts/provision-report")) {
        if pool.file_name().is_some_and(|n| n == "kvp_pool_1") {
            let bytes = std::fs::read(&pool).unwrap();
            assert!(
                !bytes.windows(6).any(|w| w == b"FORGED"),
                "{} has a forged record",
                pool.display()
            );
        }
    }
}

#[test]
fn a_forging_agent_reaches_no_other_case_as_root() {
    let _machine = quiet_machine();
    if !containment_available() {
        return;
    }
    assert_forger_reaches_no_neighbour(false);
}

#[test]
fn a_forging_agent_reaches_no_other_case_as_an_ordinary_user() {
    let _machine = quiet_machine();
    if !containment_available() {
        return;
    }
    assert_forger_reaches_no_neighbour(true);
}

/// Root only (CI runs as root; setting the machine up needs it): in a container that masks
/// `/proc` (here a read-only tmpfs over `/proc/sys`, in a mount namespace of the test's own),
/// an ordinary user's run cannot give agents a fresh `/proc`. The run refuses to start, saying
/// why (never failing every case and blaming the agent); with `--uncontained` it says so once,
/// runs the agents uncontained and the results record why.
#[test]
fn a_machine_that_refuses_part_of_the_containment_refuses_the_run_unless_uncontained() {
    let _machine = quiet_machine();
    if !rustix::process::geteuid().is_root() {
        eprintln!("not run: masking /proc for the test needs root");
        return;
    }
    let dir = shared_tempdir();
    let out = dir.path().join("out");
    let run = |extra: &str| {
        let run = format!(
            "mount -t tmpfs -o ro none /proc/sys && exec setpriv --reuid=65534 --regid=65534 --clear-groups -- {} run --quiet --cases 'wire.health.*' --out {} {extra}",
            runner_support::wirecheck_path().display(),
            out.display()
        );
        std::process::Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                &run,
            ])
            .current_dir(repo())
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let refused = run("");
    assert_eq!(refused.status.code(), Some(2), "{}", show(&refused));
    assert!(
        stderr(&refused).contains("cannot contain the agents on this machine")
            && stderr(&refused).contains("refuses part of that"),
        "{}",
        show(&refused)
    );
    assert!(!out.join("results.json").exists());
    let o = run("--uncontained");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let warnings: Vec<&str> = std::str::from_utf8(&o.stderr)
        .unwrap()
        .lines()
        .filter(|l| l.contains("refuses part of that"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", show(&o));
    let r = results(&out);
    let counts = runner_support::counts(&r, "provision-report");
    assert_eq!(counts.get("fail"), None, "{counts:?}");
    // ... and the results say so, for whoever reads them later.
    assert!(
        r["uncontained"]
            .as_str()
            .is_some_and(|why| why.contains("refuses part of that")),
        "{}",
        r["uncontained"]
    );
}

/// Retries every 10 ms (the scenarios ask for 200 ms) and starts four CPU spinners per core
/// first, to make wirecheck's own wake-ups late and its retries look like something a stall
/// could excuse.
const BURNER: &str = r#"
import http.client, os, time, urllib.parse
# Spinners: make wirecheck's own wake-ups late, hoping its too-fast retries go unjudged.
for _ in range(4 * os.cpu_count()):
    if os.fork() == 0:
        while True:
            pass
url = urllib.parse.urlparse(os.environ["WIRECHECK_CASE_WIRESERVER_URL"])
time.sleep(0.5)
for _ in range(50):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=2)
    c.request("POST", "/provisioning/health", body=b'{"state":"Ready"}', headers={"Content-Type": "application/json"})
    s = c.getresponse().status
    c.close()
    if 200 <= s < 300:
        raise SystemExit(0)
    time.sleep(0.01)
raise SystemExit(1)
"#;

#[test]
fn a_too_fast_agent_that_loads_the_machine_still_fails_the_interval_check() {
    let _machine = quiet_machine();
    let dir = tempfile::tempdir().unwrap();
    let agents = script_agent(dir.path(), "burner", "url", "\"json\"", BURNER);
    let o = run(
        dir.path(),
        "burner",
        &agents,
        &[
            "--cases",
            "{retry.status.500,retry.status.429}.behaviour.interval",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let r = results(&dir.path().join("out"));
    for id in [
        "retry.status.500.behaviour.interval",
        "retry.status.429.behaviour.interval",
    ] {
        let c = case(&r, "burner", id);
        assert_eq!(c["verdict"], "fail", "{c}");
    }
}

/// The XML bomber's profile, its script's path filled in (`tests/trust_support`).
fn xml_bomber_profile(dir: &Path) -> std::path::PathBuf {
    let support = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/trust_support");
    let profile = std::fs::read_to_string(support.join("xml_bomber.toml.in"))
        .unwrap()
        .replace(
            "@SCRIPT@",
            &support.join("xml_bomber.py").display().to_string(),
        );
    let path = dir.join("xml-bomber.toml");
    std::fs::write(&path, profile).unwrap();
    path
}

/// One agent's cases by id: (verdict, reason).
fn judgements(
    r: &serde_json::Value,
    agent: &str,
) -> std::collections::BTreeMap<String, (String, String)> {
    r["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["agent"] == agent)
        .flat_map(|a| a["cases"].as_array().unwrap())
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                (
                    c["verdict"].as_str().unwrap().to_owned(),
                    c["reason"].as_str().unwrap_or_default().to_owned(),
                ),
            )
        })
        .collect()
}

/// The same judgement, or one of the two runs said it could not judge a timing on a loaded
/// machine (`informational`, "not judged, ...") where the other passed: runs alone differ that
/// way too on a busy machine; it is not a verdict.
fn same_judgement(a: &(String, String), b: &(String, String)) -> bool {
    let not_judged = |(v, why): &(String, String)| {
        v == "informational" && why.starts_with("not judged, the machine was too loaded")
    };
    a.0 == b.0 || (not_judged(a) && b.0 == "pass") || (not_judged(b) && a.0 == "pass")
}

/// Issue 23, "quadratic XML parsing": two 300 KB bodies of nested tags froze every case's fake
/// for 10–30 s, and the bundled reporter in the same run went from 65/65 pass to 8 fail. The
/// default suite beside the XML bomber (`tests/trust_support/xml_bomber.py`, every case of it
/// posting two such bodies) now gives the reporter the verdicts of a run alone. Two runs
/// beside it (`BOMBER_RUNS=10` for the issue's ten; about 10 s each here).
#[test]
fn quadratic_xml_parsing_a_bomber_beside_the_reporter_changes_none_of_its_verdicts() {
    let _machine = LOAD.write().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let bomber = xml_bomber_profile(dir.path());
    let suite = |name: &str, extra: &[&std::ffi::OsStr]| {
        let out = dir.path().join(name);
        let o = wirecheck(&repo())
            .args(["run", "--quiet", "--agent", "provision-report"])
            .args(extra)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        (o, results(&out))
    };
    let (o, alone) = suite("alone", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let alone = judgements(&alone, "provision-report");
    assert!(alone.len() >= 500, "{} cases", alone.len());
    // Skipped only where there is nothing to judge (a status the reporter rightly does not
    // retry leaves behaviour.interval nothing); a guest it does not provision is not offered.
    assert!(
        alone.values().all(|(v, r)| v == "pass"
            || v == "informational"
            || (v == "skipped" && r.starts_with("nothing to judge"))),
        "{alone:?}"
    );
    let runs: usize = std::env::var("BOMBER_RUNS").map_or(2, |n| n.parse().unwrap());
    for run in 1..=runs {
        let (o, beside) = suite(
            &format!("beside-{run}"),
            &["--agent".as_ref(), bomber.as_os_str()],
        );
        // The bomber reports nothing: its own cases fail.
        assert_eq!(o.status.code(), Some(1), "{}", show(&o));
        let bombed = judgements(&beside, "xml-bomber")
            .values()
            .filter(|(_, why)| why.contains("the root element is <a>"))
            .count();
        assert!(bombed > 0, "the bomber's bodies never reached a fake");
        let beside = judgements(&beside, "provision-report");
        assert_eq!(
            beside.keys().collect::<Vec<_>>(),
            alone.keys().collect::<Vec<_>>()
        );
        let changed: Vec<_> = alone
            .iter()
            .filter(|(id, a)| !same_judgement(a, &beside[*id]))
            .map(|(id, a)| format!("{id}: {} alone, {:?} beside the bomber", a.0, beside[id]))
            .collect();
        assert!(
            changed.is_empty(),
            "run {run} beside the XML bomber changed {} verdict(s):\n{}",
            changed.len(),
            changed.join("\n")
        );
    }
}
