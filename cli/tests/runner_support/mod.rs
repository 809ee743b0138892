//! Helpers for the runner's end-to-end tests: the built `wirecheck` binary, the repository's
//! scenarios and profiles, and a clean environment for it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (`cli/..`).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn wirecheck_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_wirecheck"))
}

/// `wirecheck` with no `WIRECHECK_*` or proxy variables inherited, no colours, and a fixed
/// help width, run in `cwd`.
pub fn wirecheck(cwd: &Path) -> Command {
    let mut cmd = Command::new(wirecheck_path());
    cmd.current_dir(cwd);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("WIRECHECK_") || key.to_ascii_lowercase().ends_with("_proxy") {
            cmd.env_remove(&key);
        }
    }
    cmd.env("NO_COLOR", "1").env("COLUMNS", "100");
    cmd
}

/// The bundled reporter next to `wirecheck` (the workspace test command builds every binary
/// first: `cargo build --workspace --bins`, as scripts/test-all.sh does).
pub fn provision_report() -> PathBuf {
    wirecheck_test_support::binaries::workspace_binary("provision-report")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `results.json` of a finished run.
pub fn results(out: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join("results.json"))
        .unwrap_or_else(|e| panic!("{}/results.json: {e}", out.display()));
    serde_json::from_str(&text).expect("results.json is JSON")
}

/// `(case id, verdict, reason)` of every case of the first agent in `results.json`.
pub fn cases(results: &serde_json::Value) -> Vec<(String, String, String)> {
    results["agents"][0]["cases"]
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

/// The case with this id in `results.json` (any agent).
pub fn case<'a>(results: &'a serde_json::Value, agent: &str, id: &str) -> &'a serde_json::Value {
    results["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == agent)
        .unwrap_or_else(|| panic!("no agent {agent} in results.json"))["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no case {id} for {agent} in results.json"))
}

/// Verdict counts of one agent.
pub fn counts(
    results: &serde_json::Value,
    agent: &str,
) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for a in results["agents"].as_array().unwrap() {
        if a["agent"] != agent {
            continue;
        }
        for c in a["cases"].as_array().unwrap() {
            *counts
                .entry(c["verdict"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    counts
}

/// Writes `files` (relative path → contents) under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (rel, text) in files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
}

/// Writes a Python agent `name` with a profile (`capabilities`, every action running the
/// script with the action as its argument: `ready`, `failure`, `in-progress`) into `dir`, and
/// returns the agents folder.
pub fn script_agent(
    dir: &Path,
    name: &str,
    attach: &str,
    capabilities: &str,
    script: &str,
) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.py"));
    let profile = format!(
        r#"name = "{name}"
description = "a test agent: {name}.py"
attach = "{attach}"
capabilities = [{capabilities}]

[commands]
ready = ["python3", "{p}", "ready"]
failure = ["python3", "{p}", "failure"]
in-progress = ["python3", "{p}", "in-progress"]

[reactions]
retryable = [429, 500, 503]
transport_errors = "retry"
status_403 = "fatal"

[exit]
reported = [0]
"#,
        p = path.display()
    );
    write_files(
        dir,
        &[
            (&format!("{name}.py"), script),
            (&format!("agents/{name}.toml"), &profile),
        ],
    );
    dir.join("agents")
}

/// `wirecheck` as an ordinary user: `nobody` when the tests run as root (CI), else as is.
pub fn as_ordinary_user(mut cmd: std::process::Command) -> std::process::Command {
    if !rustix::process::geteuid().is_root() {
        return cmd;
    }
    let mut wrapped = std::process::Command::new("setpriv");
    wrapped.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
    wrapped.arg(cmd.get_program()).args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    cmd = wrapped;
    cmd
}

/// A folder an ordinary user can write to.
pub fn shared_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    open_to_all(dir.path());
    dir
}

/// Makes `dir` writable by anyone (the agents of an ordinary user's run write there).
pub fn open_to_all(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
}

/// Keeps a child process going and never reports: wirecheck has to be interrupted to end it.
pub const STUCK_AGENT: &str = r#"
import os, time
if os.fork() == 0:
    while True:
        time.sleep(0.05)
time.sleep(600)
"#;

/// The processes whose command line or environment names `script` (an agent's, or its
/// children's).
pub fn processes_running(script: &Path) -> Vec<u32> {
    wirecheck_test_support::procs::marked(script.to_str().unwrap())
}

/// A JSON-flow agent that starts slowly (an interpreter taking its time, longer than the
/// scenario's whole deadline), then reports Ready, retrying 429/500/503 and transport errors
/// within its budget, half an interval more than the scenario's interval apart (a conforming
/// agent with room to spare, so only a wrong judge could fail it).
pub const SLOW_STARTER: &str = r#"
import http.client, os, time, urllib.parse
time.sleep(float(os.environ["SLOW_START"]))
url = urllib.parse.urlparse(os.environ["WIRECHECK_CASE_WIRESERVER_URL"])
budget = float(os.environ["WIRECHECK_CASE_BUDGET"])
interval = float(os.environ["WIRECHECK_CASE_RETRY_INTERVAL"])
timeout = float(os.environ["WIRECHECK_CASE_REQUEST_TIMEOUT"])
end = time.monotonic() + budget
while True:
    try:
        left = max(0.05, min(timeout, end - time.monotonic()))
        c = http.client.HTTPConnection(url.hostname, url.port, timeout=left)
        c.request("POST", "/provisioning/health", body=b'{"state":"Ready"}',
                  headers={"Content-Type": "application/json"})
        status = c.getresponse().status
        c.close()
        if 200 <= status < 300:
            raise SystemExit(0)
        if status not in (429, 500, 503):
            raise SystemExit(1)
    except (OSError, http.client.HTTPException):
        pass
    if time.monotonic() + 1.5 * interval >= end:
        raise SystemExit(1)
    time.sleep(1.5 * interval)
"#;

/// Busy threads that keep every core loaded while they live.
pub struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    pub fn start(threads: usize) -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..threads)
            .map(|_| {
                let stop = std::sync::Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                })
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
