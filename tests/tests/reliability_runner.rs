//! The conformance runner contains misbehaving agents: one that hangs (leaving a child
//! behind), one that crashes, and one that floods the fake with pipelined requests and its
//! stdout with megabytes, all in one `wirecheck run` next to the bundled reporter. Each bad
//! agent is killed with its process group at the deadline, its output and journal are kept
//! bounded, and the rest of the run completes with correct verdicts.

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod reliability_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use reliability_support::{run_with_hard_stop, wirecheck};

/// Seconds the runner gives each agent invocation in the scenario below.
const DEADLINE: f64 = 4.0;
/// Markers in the command lines of processes that must not outlive the run.
const HANG_MARKER: &str = "300.4243";
const FLOOD_CHILD_MARKER: &str = "300.4244";

const SCENARIO: &str = r#"
id = "contain.ready"
title = "containment: a Ready report over JSON"
checks = ["behaviour.terminal", "behaviour.exit"]

[agent]
action = "ready"
protocol = "json"
budget = 1.0
request_timeout = 0.5
deadline = 4.0

[expect]
outcome = "reported"
"#;

/// Floods the wireserver with pipelined requests (a thread drains the answers) and stdout with
/// megabytes, and leaves a child process behind.
const FLOOD: &str = r#"
import socket, subprocess, sys, threading
subprocess.Popen(["sleep", "300.4244"])
def spam_stdout():
    chunk = "x" * 65536 + "\n"
    while True:
        sys.stdout.write(chunk)
threading.Thread(target=spam_stdout, daemon=True).start()
host, port = sys.argv[1].split("//", 1)[1].rstrip("/").rsplit(":", 1)
conn = socket.create_connection((host, int(port)))
def drain():
    while conn.recv(1 << 16):
        pass
threading.Thread(target=drain, daemon=True).start()
batch = b"GET /?comp=versions HTTP/1.1\r\nHost: 168.63.129.16\r\n\r\n" * 200
while True:
    conn.sendall(batch)
"#;

fn profile(name: &str, ready: &str) -> String {
    format!(
        r#"name = "{name}"
description = "reliability test agent"
attach = "url"
capabilities = ["json"]

[commands]
ready = {ready}

[reactions]
retryable = [404, 410, 429, 500, 503]
transport_errors = "retry"
status_403 = "throttle-body"

[exit]
reported = [0]
failed = [1]
"#
    )
}

fn leftover_processes(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            found.push(format!(
                "{}: {cmdline}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    found
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

#[test]
fn hanging_crashing_and_flooding_agents_are_contained() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = dir.path().join("scenarios");
    let agents = dir.path().join("agents");
    let out = dir.path().join("out");
    std::fs::create_dir_all(&scenarios).unwrap();
    std::fs::create_dir_all(&agents).unwrap();
    write(&scenarios.join("contain.toml"), SCENARIO);
    let flood_script = dir.path().join("flood.py");
    write(&flood_script, FLOOD);
    write(
        &agents.join("hang.toml"),
        &profile(
            "hang",
            &format!(r#"["sh", "-c", "trap '' TERM; sleep {HANG_MARKER} & wait"]"#),
        ),
    );
    write(
        &agents.join("crash.toml"),
        &profile("crash", r#"["sh", "-c", "kill -SEGV $$"]"#),
    );
    write(
        &agents.join("flood.toml"),
        &profile(
            "flood",
            &format!(
                r#"["python3", "{}", "{{wireserver_url}}"]"#,
                flood_script.display()
            ),
        ),
    );
    let bundled = wirecheck_e2e::repo_root().join("conformance/agents/provision-report.toml");
    std::fs::copy(&bundled, agents.join("provision-report.toml")).unwrap();

    let finished = run_with_hard_stop(
        Command::new(wirecheck())
            .arg("run")
            .arg(format!("--scenarios={}", scenarios.display()))
            .arg(format!("--agents-dir={}", agents.display()))
            .args(["--agent=hang", "--agent=crash", "--agent=flood"])
            .arg("--agent=provision-report")
            .arg(format!("--out={}", out.display()))
            .args(["--jobs=4", "--quiet"]),
        Duration::from_secs(120),
    );
    // Every agent runs at once: the run takes about one deadline, plus generous slack.
    assert!(
        finished.elapsed.as_secs_f64() < DEADLINE + 15.0,
        "the run took {:.1} s",
        finished.elapsed.as_secs_f64()
    );
    assert_eq!(
        finished.code(),
        Some(1),
        "cases failed, so exit 1:\nstdout:\n{}\nstderr:\n{}",
        finished.stdout,
        finished.stderr
    );
    assert!(!finished.stderr.contains("panicked"), "{}", finished.stderr);

    for marker in [HANG_MARKER, FLOOD_CHILD_MARKER] {
        // The kill is synchronous with the run's end; allow the kernel a moment to reap.
        let mut left = leftover_processes(marker);
        for _ in 0..20 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            left = leftover_processes(marker);
        }
        assert!(left.is_empty(), "processes outlived the run: {left:?}");
    }

    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let agent = |name: &str| -> Vec<serde_json::Value> {
        results["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["agent"] == name)
            .unwrap_or_else(|| panic!("no results for agent {name}"))["cases"]
            .as_array()
            .unwrap()
            .clone()
    };
    for case in agent("provision-report") {
        assert_eq!(case["verdict"], "pass", "the good agent's case: {case}");
    }
    let reasons = |name: &str| -> String {
        let cases = agent(name);
        assert!(!cases.is_empty());
        for case in &cases {
            assert_eq!(case["verdict"], "fail", "{name}: {case}");
        }
        cases
            .iter()
            .map(|c| c["reason"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let hang = reasons("hang");
    assert!(hang.contains("deadline"), "hang: {hang}");
    let crash = reasons("crash");
    assert!(crash.contains("signal"), "crash: {crash}");
    // The flood sends more requests than a case's journal keeps: not judged, and says so.
    let flood = reasons("flood");
    assert!(flood.contains("a case's journal keeps"), "flood: {flood}");

    // Bounded artifacts for the flood: stdout cut (with a note), the journal a bounded window.
    let artifacts = out.join("artifacts/flood/contain.ready");
    let stdout = std::fs::read(artifacts.join("run-1.stdout")).unwrap();
    assert!(
        stdout.len() < 300 * 1024,
        "flood stdout kept {} bytes",
        stdout.len()
    );
    assert!(
        String::from_utf8_lossy(&stdout[stdout.len().saturating_sub(200)..]).contains("output cut"),
        "the cut is not said"
    );
    let journal = std::fs::read_to_string(artifacts.join("journal.jsonl")).unwrap();
    let entries = journal.lines().count();
    let last_seq = journal
        .lines()
        .last()
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|e| e["seq"].as_u64())
        .unwrap_or(0);
    eprintln!("flood: journal kept {entries} entries; the fake saw {last_seq} requests");
    assert!(
        entries <= fake_wireserver::journal::DEFAULT_CAPACITY,
        "journal kept {entries} entries"
    );
    assert!(
        entries > 1000,
        "the flood did not reach the fake ({entries} entries)"
    );
}
