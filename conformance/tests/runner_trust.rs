//! Verdicts a user can trust: each test is one way an agent (or a loaded machine) used to get
//! a wrong verdict out of `wirecheck run`, named after that finding.

mod runner_support;

use std::path::Path;
use std::process::Output;

use runner_support::{case, repo, results, stderr, stdout, wirecheck, write_files};

/// Writes a Python agent `name` with a profile (`capabilities`, every action running the
/// script with the action as its argument) into `dir`, and returns the agents folder.
fn script_agent(
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

/// `wirecheck` as an ordinary user: `nobody` when the tests run as root (CI), else as is.
fn as_ordinary_user(mut cmd: std::process::Command) -> std::process::Command {
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
fn shared_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

#[test]
fn a_run_in_which_every_case_was_skipped_exits_non_zero_saying_why() {
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

/// A JSON-flow agent that starts slowly (an interpreter taking its time, longer than the
/// scenario's whole deadline), then reports Ready, retrying 429/500/503 and transport errors
/// within its budget, half an interval more than the scenario's interval apart (a conforming
/// agent with room to spare, so only a wrong judge could fail it).
const SLOW_STARTER: &str = r#"
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
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(threads: usize) -> Load {
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

/// Verdicts by case id.
fn verdicts(r: &serde_json::Value) -> std::collections::BTreeMap<String, String> {
    r["agents"][0]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_slow_starting_agent_gets_the_same_verdicts_ten_times_under_load() {
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

#[test]
fn an_agent_that_pads_the_journal_past_its_bound_is_not_judged_as_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let agents = script_agent(dir.path(), "padder", "url", "\"json\"", PADDING_AGENT);
    let o = run(
        dir.path(),
        "padder",
        &agents,
        &["--cases", "wire.health.json.ready.*"],
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

/// Reports Ready, but first leaves a `setsid()` daemon behind that keeps a heartbeat file
/// fresh and tries to rewrite the results after wirecheck is done.
const DAEMON_AGENT: &str = r#"
import os, time, urllib.request
watch = os.environ["DAEMON_DIR"]
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
    let watch = dir.path().join("watch");
    std::fs::create_dir(&watch).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&watch, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = dir.path().join("out");
    let mut cmd = wirecheck(&repo());
    cmd.args(["run", "--quiet", "--agent", "daemon", "--agents-dir"])
        .arg(&agents)
        .arg("--out")
        .arg(&out)
        .args(["--cases", "wire.health.json.ready.*"])
        .env("DAEMON_DIR", &watch)
        .env("DAEMON_RESULTS", out.join("results.json"));
    let mut cmd = if ordinary { as_ordinary_user(cmd) } else { cmd };
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let heartbeat = watch.join("heartbeat");
    assert!(heartbeat.exists(), "the daemon never ran");
    let results_before = std::fs::read_to_string(out.join("results.json")).unwrap();
    std::fs::remove_file(&heartbeat).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3000));
    assert!(
        !heartbeat.exists(),
        "a setsid() daemon of the agent outlived its case and wirecheck"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("results.json")).unwrap(),
        results_before
    );
}

#[test]
fn a_setsid_daemon_of_the_agent_does_not_outlive_its_case() {
    assert_no_daemon_survives(false);
}

#[test]
fn a_setsid_daemon_does_not_outlive_its_case_without_root_either() {
    assert_no_daemon_survives(true);
}
