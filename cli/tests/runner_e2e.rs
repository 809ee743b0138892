//! End to end: the `wirecheck` binary against the real `provision-report` (built by the
//! workspace test command, `cargo build --workspace --bins` first), against a deliberately
//! broken agent, a hanging agent and a proxied agent.

use crate::runner_support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use runner_support::{
    case, counts, provision_report, repo, results, stderr, stdout, wirecheck, write_files,
};
use wirecheck_oracle::kvp::decode_pool;

/// The default suite against the bundled reporter, run once for every test here.
struct Suite {
    _dir: tempfile::TempDir,
    out: PathBuf,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn suite() -> &'static Suite {
    static SUITE: OnceLock<Suite> = OnceLock::new();
    SUITE.get_or_init(|| {
        provision_report();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        // From the repository root with no flags: the README's command.
        let o = wirecheck(&repo())
            .args(["run", "--quiet", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        Suite {
            _dir: dir,
            out,
            code: o.status.code(),
            stdout: stdout(&o),
            stderr: stderr(&o),
        }
    })
}

#[test]
fn the_default_suite_passes_against_the_bundled_reporter() {
    let s = suite();
    assert_eq!(
        s.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        s.stdout,
        s.stderr
    );
    let r = results(&s.out);
    assert_eq!(r["schema_version"], 1);
    let counts = counts(&r, "provision-report");
    assert_eq!(counts.get("fail"), None, "{counts:?}");
    // Every case `wirecheck list` names for it ran (the guest scenarios are not offered to it),
    // and nearly all could be judged.
    let listed = wirecheck(&repo())
        .args(["list", "--agent", "provision-report"])
        .output()
        .unwrap();
    let listed = stdout(&listed);
    let listed_cases: usize = listed
        .lines()
        .last()
        .and_then(|l| l.split_once(" cases in "))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {listed}"));
    let total: usize = counts.values().sum();
    assert_eq!(total, listed_cases, "{counts:?}");
    assert!(counts["pass"] * 10 >= total * 9, "{counts:?}");
    assert!(
        s.stdout.contains("provision-report"),
        "summary table: {}",
        s.stdout
    );
    for file in ["results.json", "junit.xml", "report.html"] {
        assert!(s.out.join(file).is_file(), "{file} missing");
    }
    let art = s.out.join("artifacts/provision-report/retry.status.503");
    for file in [
        "journal.jsonl",
        "kvp_pool_1",
        "run-1.command",
        "run-1.stdout",
        "run-1.stderr",
    ] {
        assert!(
            art.join(file).is_file(),
            "{file} missing in {}",
            art.display()
        );
    }
    let c = case(&r, "provision-report", "retry.status.503.behaviour.retry");
    assert_eq!(c["verdict"], "pass");
    assert_eq!(
        c["artifacts"],
        "artifacts/provision-report/retry.status.503"
    );
    // The timeline carries the three scripted 503s and the accepted report.
    let answers: Vec<&str> = c["timeline"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["endpoint"] == "wireserver.health.json")
        .map(|e| e["answer"].as_str().unwrap())
        .collect();
    assert_eq!(answers, ["503", "503", "503", "201"]);
}

/// `timestamp=<anything up to the next field or markup>` → `timestamp=<timestamp>`: the
/// reporter has no clock override, so only this value is normalised.
fn normalise_timestamps(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("timestamp=") {
        out.push_str(&rest[..i + "timestamp=".len()]);
        rest = &rest[i + "timestamp=".len()..];
        let end = rest
            .find(|c: char| matches!(c, '|' | '"' | '<' | '\'' | '\\') || c.is_whitespace())
            .unwrap_or(rest.len());
        out.push_str("<timestamp>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// What the reporter sent in one scenario: the accepted health reports (or, when none was
/// accepted, each distinct one it tried), and its PROVISIONING_REPORT.
fn reports_of(dir: &Path) -> String {
    let journal = std::fs::read_to_string(dir.join("journal.jsonl")).unwrap();
    let entries: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let health: Vec<&serde_json::Value> = entries
        .iter()
        .filter(|e| {
            e["endpoint"]
                .as_str()
                .unwrap()
                .starts_with("wireserver.health")
        })
        .collect();
    let accepted: Vec<&serde_json::Value> = health
        .iter()
        .copied()
        .filter(|e| {
            e["answer"]["status"]
                .as_u64()
                .is_some_and(|s| (200..300).contains(&s))
        })
        .collect();
    let mut shown: Vec<&serde_json::Value> = Vec::new();
    let pool = if accepted.is_empty() {
        &health
    } else {
        &accepted
    };
    for e in pool.iter().copied() {
        if !shown.iter().any(|s| s["body"] == e["body"]) {
            shown.push(e);
        }
    }
    let mut text = String::new();
    if accepted.is_empty() {
        text.push_str("(no report accepted)\n");
    }
    for e in shown {
        text.push_str(&format!(
            "{} {}\n",
            e["method"].as_str().unwrap(),
            e["target"].as_str().unwrap()
        ));
        for (name, value) in e["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h[0].as_str().unwrap(), h[1].as_str().unwrap()))
        {
            let lower = name.to_ascii_lowercase();
            if lower == "content-type" || lower.starts_with("x-ms-") || lower == "user-agent" {
                text.push_str(&format!("{lower}: {value}\n"));
            }
        }
        text.push('\n');
        text.push_str(&normalise_timestamps(e["body"].as_str().unwrap()));
        text.push_str("\n\n");
    }
    let pool = std::fs::read(dir.join("kvp_pool_1")).unwrap_or_default();
    match decode_pool(&pool)
        .records
        .iter()
        .rev()
        .find(|r| r.key == "PROVISIONING_REPORT")
    {
        Some(record) => text.push_str(&format!(
            "KVP PROVISIONING_REPORT ({} bytes):\n{}\n",
            record.value_bytes,
            normalise_timestamps(&record.value)
        )),
        None => text.push_str("KVP: no PROVISIONING_REPORT\n"),
    }
    text
}

#[test]
fn the_reporters_reports_per_scenario() {
    let s = suite();
    assert_eq!(s.code, Some(0), "{}", s.stdout);
    let root = s.out.join("artifacts/provision-report");
    let mut scenarios: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    scenarios.sort();
    assert!(scenarios.len() >= 30, "{scenarios:?}");
    for id in scenarios {
        insta::assert_snapshot!(format!("reports__{id}"), reports_of(&root.join(&id)));
    }
}

const BROKEN_AGENT: &str = r#"
# A deliberately broken agent: one JSON POST whatever it is asked, with a wrong state and
# content type, no retry, no KVP, and "success" as exit status.
import json, os, sys, urllib.request
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
body = json.dumps({"state": "Ready!"}).encode()
request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "text/plain"})
try:
    urllib.request.urlopen(request, timeout=2).read()
except Exception as error:
    print("not accepted:", error, file=sys.stderr)
sys.exit(0)
"#;

#[test]
fn a_broken_agent_gets_failures_with_evidence() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), &[("broken_agent.py", BROKEN_AGENT)]);
    let out = dir.path().join("out");
    let cmd = format!(
        "python3 {}/broken_agent.py {{action}}",
        dir.path().display()
    );
    let o = wirecheck(&repo())
        .args([
            "run",
            "--quiet",
            "--agent-cmd",
            &cmd,
            "--cases",
            "wire.health.json.*",
            "--cases",
            "retry.status.503.*",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    let r = results(&out);
    let verdict = |id: &str| {
        case(&r, "agent-cmd", id)["verdict"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    let headers = case(&r, "agent-cmd", "wire.health.json.ready.protocol.headers");
    assert_eq!(headers["verdict"], "fail");
    assert!(
        headers["reason"]
            .as_str()
            .unwrap()
            .contains("Content-Type \"text/plain\""),
        "{headers}"
    );
    let evidence = &headers["evidence"][0];
    assert!(
        !evidence["journal_seq"].as_array().unwrap().is_empty(),
        "{headers}"
    );
    assert!(
        evidence["excerpt"]
            .as_str()
            .unwrap()
            .contains("Content-Type: text/plain"),
        "{headers}"
    );

    let state = case(&r, "agent-cmd", "wire.health.json.failure.report.state");
    assert_eq!(state["verdict"], "fail");
    assert!(
        state["reason"]
            .as_str()
            .unwrap()
            .contains("expected NotReady/ProvisioningFailed; got Ready!"),
        "{state}"
    );
    assert!(
        !state["evidence"][0]["journal_seq"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    assert_eq!(verdict("retry.status.503.behaviour.retry"), "fail");
    assert!(
        case(&r, "agent-cmd", "retry.status.503.behaviour.retry")["reason"]
            .as_str()
            .unwrap()
            .contains("gave up after status 503")
    );
    assert_eq!(verdict("retry.status.503.behaviour.exit"), "fail");
    assert_eq!(verdict("wire.health.json.ready.kvp.report"), "fail");
    assert_eq!(
        verdict("wire.health.json.failure.report.description"),
        "fail"
    );
    // What it does right is not held against it.
    assert_eq!(verdict("wire.health.json.ready.protocol.request"), "pass");
    assert_eq!(verdict("wire.health.json.ready.behaviour.terminal"), "pass");
}

#[test]
fn a_hanging_agent_is_killed_at_the_deadline_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            (
                "scenarios/hang.toml",
                r#"id = "hang.ready"
title = "the agent never exits"
checks = ["behaviour.exit", "behaviour.budget"]
[agent]
action = "ready"
budget = 0.5
deadline = 1.0
"#,
            ),
            (
                "scenarios/quick.toml",
                r#"id = "quick.in-progress"
title = "the agent exits at once without reporting"
checks = ["behaviour.exit"]
[agent]
action = "in-progress"
"#,
            ),
        ],
    );
    let out = dir.path().join("out");
    // Ready: a shell that waits on a child forever (the whole process group must go).
    let cmd = r#"sh -c 'if [ "$WIRECHECK_CASE_ACTION" = ready ]; then sleep 600 & wait; fi'"#;
    let o = wirecheck(dir.path())
        .args([
            "run",
            "--quiet",
            "--scenarios",
            "scenarios",
            "--agent-cmd",
            cmd,
            "--out",
            "out",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    let r = results(&out);
    let hung = case(&r, "agent-cmd", "hang.ready.behaviour.exit");
    assert_eq!(hung["verdict"], "fail");
    assert!(
        hung["reason"]
            .as_str()
            .unwrap()
            .contains("still running at the deadline"),
        "{hung}"
    );
    assert!(hung["timeline"]["agent_exit_ms"].is_null());
    let budget = case(&r, "agent-cmd", "hang.ready.behaviour.budget");
    assert_eq!(budget["verdict"], "fail");
    assert!(
        budget["reason"].as_str().unwrap().contains("deadline"),
        "{budget}"
    );
    // The other scenario ran and was judged.
    let quick = case(&r, "agent-cmd", "quick.in-progress.behaviour.exit");
    assert_eq!(quick["verdict"], "fail");
    assert!(
        quick["reason"]
            .as_str()
            .unwrap()
            .contains("no report delivered"),
        "{quick}"
    );
}

const URL_AGENT: &str = r#"
# Lists the interfaces it can see, then reports Ready to the URL it was given.
import os, urllib.request
with open("/proc/self/net/dev") as f:
    print(" ".join(line.split(":")[0].strip() for line in f.readlines()[2:]))
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=2).read()
"#;

/// Runs a Python `script` as agent `name` (`attach` mode, claims only "json", retries 503 and
/// transport errors) on the `wire.health.json.ready` scenario, in `dir`.
fn run_script_agent(
    dir: &Path,
    name: &str,
    attach: &str,
    script: &str,
) -> (std::process::Output, serde_json::Value) {
    let path = dir.join(format!("{name}.py"));
    let profile = format!(
        r#"name = "{name}"
description = "a test agent: {name}.py"
attach = "{attach}"
capabilities = ["json"]

[commands]
ready = ["python3", "{}"]

[reactions]
retryable = [503]
transport_errors = "retry"
status_403 = "fatal"

[exit]
reported = [0]
"#,
        path.display()
    );
    write_files(
        dir,
        &[
            (&format!("{name}.py"), script),
            (&format!("agents/{name}.toml"), &profile),
        ],
    );
    let output = wirecheck(&repo())
        .args(["run", "--quiet", "--agent", name, "--agents-dir"])
        .arg(dir.join("agents"))
        .args(["--cases", "wire.health.json.ready.*", "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    let r = results(&dir.join("out"));
    (output, r)
}

#[test]
fn url_agents_run_beside_the_fake_in_a_private_network_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let (o, r) = run_script_agent(dir.path(), "urlagent", "url", URL_AGENT);
    assert_eq!(
        case(&r, "urlagent", "wire.health.json.ready.report.state")["verdict"],
        "pass",
        "{}",
        stdout(&o)
    );
    let seen = std::fs::read_to_string(
        dir.path()
            .join("out/artifacts/urlagent/wire.health.json.ready/run-1.stdout"),
    )
    .unwrap();
    if conformance::containment::unavailable().is_none() {
        // Nothing but lo: an agent that ignored its URL could reach no real address.
        assert_eq!(seen.trim(), "lo");
    } else {
        // Without namespaces the agent runs in the runner's own namespace, on the loopback
        // URL.
        assert!(seen.split_whitespace().any(|n| n == "lo"), "{seen}");
    }
}

#[test]
fn a_pool_written_by_an_agent_that_claims_no_kvp_is_still_judged() {
    // Reports Ready, and leaves a torn record in the pool: 100 bytes, not 2560.
    let agent = r#"
import os, urllib.request
with open(os.environ["WIRECHECK_CASE_KVP_POOL"], "ab") as pool:
    pool.write(b"PROVISIONING_REPORT" + b"\0" * 81)
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=2).read()
"#;
    let dir = tempfile::tempdir().unwrap();
    let (o, r) = run_script_agent(dir.path(), "torn", "url", agent);
    let pool = case(&r, "torn", "wire.health.json.ready.kvp.pool");
    assert_eq!(pool["verdict"], "fail", "{pool}\n{}", stdout(&o));
    assert!(pool["reason"].as_str().unwrap().contains("2560"), "{pool}");
    // Whether it should have written a report at all is for agents that claim "kvp".
    let report = case(&r, "torn", "wire.health.json.ready.kvp.report");
    assert_eq!(report["verdict"], "skipped", "{report}");
}

const PROXIED_AGENT: &str = r#"
# Reaches the real addresses only through the proxy wirecheck gives it.
import errno, json, os, socket, sys, urllib.request
proxy = os.environ.get("WIRECHECK_CASE_PROXY_URL")
if not proxy or not proxy.startswith("http://127.0.0.1:"):
    sys.exit(3)
# wirecheck runs it in a network namespace with nothing but lo (checked before anything is
# tried directly, so a broken isolation never sends to the real address).
with open("/proc/self/net/dev") as f:
    names = [line.split(":")[0].strip() for line in f.readlines()[2:]]
if names != ["lo"]:
    sys.exit(4)
# There, ignoring the proxy gets "network unreachable" instead of the machine's wireserver.
try:
    socket.create_connection(("168.63.129.16", 80), timeout=1).close()
    sys.exit(5)
except OSError as e:
    if e.errno != errno.ENETUNREACH:
        sys.exit(6)
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
opener.open(request, timeout=2).read()
"#;

#[test]
fn proxy_attach_routes_the_real_addresses_through_the_fake() {
    let dir = tempfile::tempdir().unwrap();
    let (o, r) = run_script_agent(dir.path(), "proxied", "proxy", PROXIED_AGENT);
    if conformance::containment::unavailable().is_some() {
        // No private network namespace on this machine (no root, and unprivileged user
        // namespaces refused): skipped with the reason, never run exposed.
        let state = case(&r, "proxied", "wire.health.json.ready.report.state");
        assert_eq!(state["verdict"], "skipped", "{state}");
        assert!(
            state["reason"].as_str().unwrap().contains("refuses"),
            "{state}"
        );
        return;
    }
    assert_eq!(
        case(&r, "proxied", "wire.health.json.ready.report.state")["verdict"],
        "pass",
        "{}",
        stdout(&o)
    );
    assert_eq!(
        case(&r, "proxied", "wire.health.json.ready.behaviour.exit")["verdict"],
        "pass"
    );
    let journal = std::fs::read_to_string(
        dir.path()
            .join("out/artifacts/proxied/wire.health.json.ready/journal.jsonl"),
    )
    .unwrap();
    let first: serde_json::Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
    assert_eq!(first["listener"], "proxy");
    assert_eq!(first["target"], "http://168.63.129.16/provisioning/health");
    // It claims no KVP: those cases are skipped with the reason, not failed.
    let kvp = case(&r, "proxied", "wire.health.json.ready.kvp.report");
    assert_eq!(kvp["verdict"], "skipped");
    assert!(
        kvp["reason"]
            .as_str()
            .unwrap()
            .contains("does not claim \"kvp\"")
    );
}

#[test]
fn known_deviations_are_shown_as_non_strict_and_strict_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("broken_agent.py");
    let profile = format!(
        r#"name = "lenient"
description = "the broken agent, with its failures declared as known deviations"
capabilities = ["json", "kvp"]

[commands]
ready = ["python3", "{}", "ready"]

[reactions]
retryable = [503]
transport_errors = "retry"
status_403 = "fatal"

[exit]
reported = [0]

[[deviation]]
cases = "wire.health.json.ready.*"
verdict = "non-strict"
reason = "sends its own content type and state; no KVP"
"#,
        script.display()
    );
    write_files(
        dir.path(),
        &[
            ("broken_agent.py", BROKEN_AGENT),
            ("agents/lenient.toml", &profile),
        ],
    );
    let run = |strict: bool| {
        let mut cmd = wirecheck(&repo());
        cmd.args(["run", "--quiet", "--agent", "lenient", "--agents-dir"])
            .arg(dir.path().join("agents"))
            .args(["--cases", "wire.health.json.ready.*", "--out"])
            .arg(dir.path().join("out"));
        if strict {
            cmd.arg("--strict");
        }
        cmd.output().unwrap()
    };
    let lenient = run(false);
    assert_eq!(lenient.status.code(), Some(0), "{}", stdout(&lenient));
    let r = results(&dir.path().join("out"));
    let headers = case(&r, "lenient", "wire.health.json.ready.protocol.headers");
    assert_eq!(headers["verdict"], "non-strict");
    assert!(
        headers["reason"]
            .as_str()
            .unwrap()
            .starts_with("known deviation (wire.health.json.ready.*): sends its own")
    );
    assert!(
        headers["reason"]
            .as_str()
            .unwrap()
            .contains("observed: wireserver.health.json: Content-Type")
    );

    let strict = run(true);
    assert_eq!(strict.status.code(), Some(1), "{}", stdout(&strict));
    assert!(
        stdout(&strict).contains("NON-STRICT lenient wire.health.json.ready.protocol.headers"),
        "{}",
        stdout(&strict)
    );
}

/// Every file's text under `dir`, concatenated (the run's artifacts hold the agent's output).
fn all_text(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&all_text(&path));
        } else if let Ok(t) = std::fs::read_to_string(&path) {
            text.push_str(&t);
        }
    }
    text
}

/// Issue 13 review: wirecheck runs every fake in its own process, each agent listener up to
/// 1,024 connections, so it raises its soft open-file limit to the hard one; the agents it runs
/// get the soft limit they would have had without it.
#[test]
fn wirecheck_raises_its_open_file_limit_and_agents_get_the_original() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[(
            "scenarios/q.toml",
            "id = \"q.in-progress\"\ntitle = \"t\"\nchecks = [\"behaviour.exit\"]\n[agent]\naction = \"in-progress\"\n",
        )],
    );
    let agent = r#"sh -c 'echo "soft limit $(ulimit -Sn)"; sleep 1'"#;
    let mut child = std::process::Command::new("prlimit")
        .arg("--nofile=1024:4096")
        .arg(runner_support::wirecheck_path())
        .args([
            "run",
            "--quiet",
            "--scenarios",
            "scenarios",
            "--agent-cmd",
            agent,
        ])
        .args(["--out", "out"])
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // prlimit execs wirecheck in place: the child's pid is wirecheck's.
    let limits = format!("/proc/{}/limits", child.id());
    let mut raised = None;
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(30) {
        // Once prlimit has set the limit and exec'd wirecheck.
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", child.id()));
        if comm.is_ok_and(|c| c.trim() == "wirecheck")
            && let Ok(text) = std::fs::read_to_string(&limits)
            && let Some(line) = text.lines().find(|l| l.starts_with("Max open files"))
        {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields[3] != "1024" {
                raised = Some(line.to_owned());
            }
        }
        if raised.is_some() || child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "the case fails: the agent reports nothing"
    );
    let raised = raised.expect("wirecheck kept the soft limit of 1024");
    assert!(raised.contains("4096"), "{raised}");
    let text = all_text(&dir.path().join("out"));
    assert!(
        text.contains("soft limit 1024"),
        "the agent's soft limit: {text:.2000}"
    );
}

/// Asks IMDS for ten leaves at once (as afterburn asks for several), then reports Ready. On a
/// 429 it retries after `BACKOFF` seconds (0: at once, the planted defect).
const IMDS_BURST_AGENT: &str = r#"
import os, sys, time, urllib.error, urllib.request
backoff = float(sys.argv[1])
imds = os.environ["WIRECHECK_CASE_IMDS_URL"]
for leaf in ["name", "vmSize", "vmId", "location", "zone", "sku", "offer", "publisher",
             "version", "osType"]:
    url = imds + "/metadata/instance/compute/" + leaf + "?api-version=2021-02-01&format=text"
    while True:
        try:
            urllib.request.urlopen(urllib.request.Request(url, headers={"Metadata": "true"}),
                                   timeout=2).read()
            break
        except urllib.error.HTTPError as error:
            if error.code != 429:
                raise
            time.sleep(backoff)
url = os.environ["WIRECHECK_CASE_WIRESERVER_URL"] + "/provisioning/health"
request = urllib.request.Request(url, data=b'{"state":"Ready"}', method="POST",
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=2).read()
"#;

/// Runs [`IMDS_BURST_AGENT`] as agent `name`, retrying a 429 after `backoff` seconds, on a
/// scenario with no scripted fault: the only 429s are IMDS's own per-VM limit's.
fn run_imds_burst_agent(dir: &Path, name: &str, backoff: &str) -> serde_json::Value {
    let script = dir.join("burst.py");
    let profile = format!(
        r#"name = "{name}"
description = "a test agent asking IMDS for ten leaves at once"
attach = "url"
capabilities = ["json"]

[commands]
ready = ["python3", "{}", "{backoff}"]

[reactions]
retryable = [503]
imds_retryable = [429]
imds_retry_interval_min = 1.0
transport_errors = "retry"
status_403 = "fatal"

[exit]
reported = [0]
"#,
        script.display()
    );
    write_files(
        dir,
        &[
            ("burst.py", IMDS_BURST_AGENT),
            (&format!("agents/{name}.toml"), &profile),
            (
                "scenarios/imds-burst.toml",
                r#"id = "imds.burst"
title = "ten IMDS leaves at once: IMDS's per-VM limit answers 429 beyond 5 a second"
checks = ["behaviour.retry", "behaviour.interval"]
[agent]
action = "ready"
protocol = "json"
budget = 20.0
"#,
            ),
        ],
    );
    let out = dir.join(format!("out-{name}"));
    let o = wirecheck(dir)
        .args(["run", "--quiet", "--agent", name, "--agents-dir", "agents"])
        .args(["--scenarios", "scenarios", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    results(&out)
}

#[test]
fn an_agent_that_does_not_back_off_on_imds_429_fails() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_imds_burst_agent(dir.path(), "hammer", "0");
    let interval = case(&r, "hammer", "imds.burst.behaviour.interval");
    assert_eq!(interval["verdict"], "fail", "{interval}");
    let reason = interval["reason"].as_str().unwrap();
    assert!(
        reason.contains("retried imds.instance only") && reason.contains("at least 1000 ms"),
        "{reason}"
    );
    // The evidence is IMDS's own 429, journaled as a rate limit's refusal.
    let journal = std::fs::read_to_string(
        dir.path()
            .join("out-hammer/artifacts/hammer/imds.burst/journal.jsonl"),
    )
    .unwrap();
    assert!(
        journal.lines().any(|l| {
            let e: serde_json::Value = serde_json::from_str(l).unwrap();
            e["answer"]["kind"] == "throttled" && e["answer"]["status"] == 429
        }),
        "{journal}"
    );

    // The same agent waiting a second after a 429 passes both.
    let r = run_imds_burst_agent(dir.path(), "patient", "1.05");
    for check in ["behaviour.interval", "behaviour.retry"] {
        let c = case(&r, "patient", &format!("imds.burst.{check}"));
        assert_eq!(c["verdict"], "pass", "{c}");
    }
}
