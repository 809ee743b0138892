//! The fault kinds the suite scripts since scenarios run on every flow (issue 24), each against a
//! planted agent: one small Python agent that follows the recommended policy (docs/protocol.md
//! §8.2) passes the case, and the same agent with one bug fails it. So a verdict of `pass` on
//! these cases means the agent did the right thing, not that nothing was looked at.

use crate::runner_support;

use std::path::Path;

use runner_support::{cases, repo, results, stderr, wirecheck, write_files};

/// The planted agent: IMDS first (the VM id, unless one is given), then the health report over
/// JSON, every attempt inside one budget. `{bug}` names the one thing it does wrong, if any.
const AGENT: &str = r#"
import http.client, json, os, sys, time, urllib.parse
BUG = "{bug}"
action = sys.argv[1]
ws = urllib.parse.urlparse(os.environ["WIRECHECK_CASE_WIRESERVER_URL"])
imds = urllib.parse.urlparse(os.environ["WIRECHECK_CASE_IMDS_URL"])
budget = float(os.environ["WIRECHECK_CASE_BUDGET"])
interval = float(os.environ["WIRECHECK_CASE_RETRY_INTERVAL"])
timeout = float(os.environ["WIRECHECK_CASE_REQUEST_TIMEOUT"])
end = time.monotonic() + budget
RETRY = (404, 410, 429, 500, 503)

def request(u, method, path, body=None, headers={}):
    left = max(0.05, min(timeout, end - time.monotonic()))
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=left)
    try:
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    except (OSError, http.client.HTTPException):
        return None, {}, b""
    finally:
        c.close()

def pause(headers):
    if BUG == "sleeps-retry-after" and "retry-after" in headers:
        # Honoured as the server asks, whatever the budget says.
        time.sleep(float(headers["retry-after"]))
        return
    if time.monotonic() + interval >= end:
        sys.exit(1)
    time.sleep(interval)

def vm_id_from_imds():
    while True:
        status, headers, data = request(imds, "GET", "/metadata/instance?api-version=2021-08-01",
                                        headers={"Metadata": "true"})
        if status == 200:
            try:
                return json.loads(data)["compute"]["vmId"]
            except (ValueError, KeyError, TypeError):
                if BUG != "rereads-imds-at-once":
                    pause(headers)
                continue
        if status == 403 and BUG != "retries-imds-403":
            return None
        if status is None or status in RETRY or status == 403:
            pause(headers)
            continue
        return None

vm_id = vm_id_from_imds() or "unknown"
vm_id = os.environ.get("WIRECHECK_CASE_VM_ID") or vm_id
if action == "ready":
    body = {"state": "Ready"}
else:
    reason = os.environ.get("WIRECHECK_CASE_REASON", "")
    body = {"state": "NotReady", "details": {"subStatus": "ProvisioningFailed",
            "description": f"result=error|reason={reason}|agent=planted|vm_id={vm_id}"}}
while True:
    status, headers, data = request(ws, "POST", "/provisioning/health", json.dumps(body).encode(),
                                    {"Content-Type": "application/json"})
    if status is not None and 200 <= status < 300:
        sys.exit(0)
    throttled = status == 403 and b"RequestRateLimitExceeded" in data
    if throttled and BUG == "gives-up-when-throttled":
        sys.exit(1)
    if status is None or status in RETRY or throttled or (status == 400 and BUG == "retries-400"):
        pause(headers)
        continue
    sys.exit(1)
"#;

/// Writes the agent with `bug` (empty: none) as profile `planted`, the recommended reactions.
fn planted(dir: &Path, bug: &str) -> std::path::PathBuf {
    let script = dir.join("planted.py");
    let profile = format!(
        r#"name = "planted"
description = "a planted agent ({bug})"
attach = "url"
capabilities = ["json", "failure"]

[commands]
ready = ["python3", "{p}", "ready"]
failure = ["python3", "{p}", "failure"]

[reactions]
retryable = [404, 410, 429, 500, 503]
transport_errors = "retry"
status_403 = "throttle-body"
imds_status_403 = "fatal"

[exit]
reported = [0]
failed = [1]
"#,
        p = script.display(),
        bug = if bug.is_empty() { "none" } else { bug },
    );
    write_files(
        dir,
        &[
            ("planted.py", &AGENT.replace("{bug}", bug)),
            ("agents/planted.toml", &profile),
        ],
    );
    dir.join("agents")
}

/// The verdict and reason of `case` for the agent with `bug`.
fn judged(bug: &str, case: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let agents = planted(dir.path(), bug);
    let out = dir.path().join("out");
    let o = wirecheck(&repo())
        .args(["run", "--quiet", "--agent", "planted", "--agents-dir"])
        .arg(&agents)
        .arg("--out")
        .arg(&out)
        .args(["--cases", case])
        .output()
        .unwrap();
    assert!(out.join("results.json").is_file(), "{}", stderr(&o));
    let all = cases(&results(&out));
    let (_, verdict, reason) = all
        .into_iter()
        .find(|(id, _, _)| id == case)
        .unwrap_or_else(|| panic!("{case} not run: {}", stderr(&o)));
    (verdict, reason)
}

/// The correct agent passes `case`; the one with `bug` fails it, saying `why`.
fn caught(case: &str, bug: &str, why: &str) {
    let (verdict, reason) = judged("", case);
    assert_eq!(verdict, "pass", "the correct agent on {case}: {reason}");
    let (verdict, reason) = judged(bug, case);
    assert_eq!(verdict, "fail", "{bug} on {case}: {reason}");
    assert!(reason.contains(why), "{bug} on {case}: {reason}");
}

#[test]
fn an_agent_sleeping_a_retry_after_past_its_budget_fails_the_budget() {
    caught(
        "retry.retry-after.huge.behaviour.budget",
        "sleeps-retry-after",
        "still running",
    );
}

#[test]
fn an_agent_asking_imds_again_at_once_after_an_unusable_200_fails_the_interval() {
    caught(
        "imds.unusable.200.behaviour.interval",
        "rereads-imds-at-once",
        "imds.instance",
    );
}

#[test]
fn an_agent_giving_up_on_a_throttled_failure_report_fails_the_retry_decision() {
    caught(
        "retry.throttle.failure.behaviour.retry",
        "gives-up-when-throttled",
        "gave up",
    );
}

#[test]
fn an_agent_retrying_what_its_policy_calls_fatal_fails_the_retry_decision() {
    caught("retry.status.400.behaviour.retry", "retries-400", "400");
    caught("imds.fatal.403.behaviour.retry", "retries-imds-403", "403");
}
