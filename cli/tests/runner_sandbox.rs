//! `attach = "sandbox"` when the sandbox cannot run: its cases are skipped with the reason, and
//! a sandbox that fails is a harness error (exit 2), never a verdict about the agent. The
//! sandbox working for real is covered by runner_real_agents.rs (afterburn).
//!
//! Each test runs a hard link of `wirecheck` from a folder of its own, so what sits "next to
//! wirecheck" (no `fake-wireserver`, or a broken one) is under the test's control.

use crate::runner_support;

use std::path::{Path, PathBuf};

use runner_support::{case, repo, stderr, stdout, wirecheck_path, write_files};

const PROFILE: &str = r#"name = "boxed"
description = "an agent attached with the sandbox"
attach = "sandbox"
capabilities = ["xml"]
[commands]
ready = ["/bin/true"]
[reactions]
retryable = [500]
transport_errors = "retry"
status_403 = "throttling"
"#;

const CASES: &str = "wire.health.xml.ready.*";

/// `<dir>/bin/wirecheck` (a hard link, else a copy) and `<dir>/agents/boxed.toml`.
fn setup(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("wirecheck");
    if std::fs::hard_link(wirecheck_path(), &exe).is_err() {
        std::fs::copy(wirecheck_path(), &exe).unwrap();
    }
    write_files(dir, &[("agents/boxed.toml", PROFILE)]);
    exe
}

fn run(dir: &Path, exe: &Path) -> std::process::Output {
    let mut cmd = std::process::Command::new(exe);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("WIRECHECK_") || key.to_ascii_lowercase().ends_with("_proxy") {
            cmd.env_remove(&key);
        }
    }
    // No fake-wireserver on PATH either: only what the test puts next to wirecheck.
    cmd.env("PATH", "/usr/bin:/bin")
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .arg("run")
        .arg("--agent=boxed")
        .arg(format!("--agents-dir={}", dir.join("agents").display()))
        .arg(format!(
            "--scenarios={}",
            repo().join("scenarios").display()
        ))
        .arg(format!("--cases={CASES}"))
        .arg(format!("--out={}", dir.join("out").display()))
        .arg("--quiet");
    cmd.output().unwrap()
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn reasons(dir: &Path) -> Vec<(String, String)> {
    verdicts(dir).into_iter().map(|(_, v, r)| (v, r)).collect()
}

#[test]
fn without_root_or_the_fake_binary_sandbox_cases_are_skipped_with_the_reason() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = setup(tmp.path());
    let out = run(tmp.path(), &exe);
    // Nothing of the agent was judged: a run that must not pass for green.
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(
            "agent boxed: nothing about it was judged (none of its 11 case(s) got a verdict"
        ),
        "{}",
        stderr(&out)
    );
    let want = if is_root() {
        format!(
            "sandbox attach needs the fake-wireserver binary next to wirecheck ({}) or on PATH",
            exe.parent().unwrap().canonicalize().unwrap().display()
        )
    } else {
        "sandbox attach needs root".to_owned()
    };
    let all = reasons(tmp.path());
    assert!(!all.is_empty());
    for (verdict, reason) in &all {
        assert_eq!(verdict, "skipped", "{reason}");
        assert!(
            reason.starts_with(&want),
            "{reason:?} should start with {want:?}"
        );
    }
}

#[test]
fn a_failing_sandbox_is_a_harness_error_not_a_verdict() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = setup(tmp.path());
    // A `fake-wireserver` whose sandbox fails before writing anything.
    let fake = exe.with_file_name("fake-wireserver");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'fake-wireserver sandbox: error: cannot add 168.63.129.16 to lo' >&2\nexit 125\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();

    let out = run(tmp.path(), &exe);
    let all = reasons(tmp.path());
    assert!(!all.is_empty());
    if !is_root() {
        // Not root: the sandbox is not even tried.
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(
            all.iter()
                .all(|(v, r)| v == "skipped" && r.starts_with("sandbox attach needs root"))
        );
        return;
    }
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("could not be run because of a harness error"),
        "{}",
        stderr(&out)
    );
    for (verdict, reason) in &all {
        assert_eq!(verdict, "skipped", "{reason}");
        assert!(
            reason.starts_with("harness error: fake-wireserver sandbox failed")
                && reason.contains("cannot add 168.63.129.16 to lo"),
            "{reason}"
        );
    }
    let results = runner_support::results(&tmp.path().join("out"));
    assert_eq!(
        case(&results, "boxed", "wire.health.xml.ready.report.state")["verdict"],
        "skipped"
    );
}

/// Reports Ready, then leaves an 8 GiB sparse file as its pool (it costs the agent nothing).
/// No braces in the script: they would be placeholders.
const SPARSE_POOL_PROFILE: &str = r#"name = "boxed"
description = "an agent attached with the sandbox that leaves a huge sparse pool"
attach = "sandbox"
capabilities = ["json"]
[commands]
ready = ["/usr/bin/python3", "-c", '''
import os, urllib.request
request = urllib.request.Request("http://168.63.129.16/provisioning/health",
                                 data=b'\x7b"state":"Ready"\x7d', method="POST",
                                 headers=dict([("Content-Type", "application/json")]))
urllib.request.urlopen(request, timeout=5).read()
with open("/var/lib/hyperv/.kvp_pool_1", "wb") as f:
    f.truncate(8 << 30)
''']
[reactions]
retryable = [500]
transport_errors = "retry"
status_403 = "throttling"
# The 8 GiB file is past the default file size limit (1 GiB).
[limits]
file_size_mib = 16384
"#;

#[test]
fn a_pool_the_sandbox_would_not_copy_is_not_judged() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = setup(tmp.path());
    write_files(tmp.path(), &[("agents/boxed.toml", SPARSE_POOL_PROFILE)]);
    let fake = wirecheck_path().with_file_name("fake-wireserver");
    assert!(
        fake.is_file(),
        "{} not found: build the workspace binaries first (cargo build --workspace --bins)",
        fake.display()
    );
    if std::fs::hard_link(&fake, exe.with_file_name("fake-wireserver")).is_err() {
        std::fs::copy(&fake, exe.with_file_name("fake-wireserver")).unwrap();
    }
    let mut cmd = std::process::Command::new(&exe);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("WIRECHECK_") || key.to_ascii_lowercase().ends_with("_proxy") {
            cmd.env_remove(&key);
        }
    }
    let started = std::time::Instant::now();
    let out = cmd
        .env("PATH", "/usr/bin:/bin")
        .env("NO_COLOR", "1")
        .current_dir(tmp.path())
        .arg("run")
        .arg("--agent=boxed")
        .arg(format!(
            "--agents-dir={}",
            tmp.path().join("agents").display()
        ))
        .arg(format!(
            "--scenarios={}",
            repo().join("scenarios").display()
        ))
        .arg("--cases=wire.health.json.ready.report.state")
        .arg(format!("--out={}", tmp.path().join("out").display()))
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(
        tmp.path().join("out/results.json").is_file(),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let all = reasons(tmp.path());
    assert!(!all.is_empty());
    if !is_root() {
        assert!(
            all.iter()
                .all(|(v, r)| v == "skipped" && r.starts_with("sandbox attach needs root"))
        );
        return;
    }
    assert!(
        started.elapsed().as_secs() < 60,
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let results = runner_support::results(&tmp.path().join("out"));
    let c = case(&results, "boxed", "wire.health.json.ready.report.state");
    assert_eq!(c["verdict"], "fail", "{c}");
    let reason = c["reason"].as_str().unwrap();
    assert!(
        reason.contains("is larger than 67108864 bytes")
            && reason.contains("did not copy it")
            && reason.contains("not judged"),
        "{reason}"
    );
}

/// Never writes KVP: tries the wireserver's JSON endpoint every `{retry_interval}` until
/// `{budget}` is spent, printing why each attempt failed, then exits 1 (not reported). No
/// braces in the script: they would be placeholders.
const NO_KVP_PROFILE: &str = r#"name = "boxed"
description = "a sandbox agent that reports only to the wireserver, never to KVP"
attach = "sandbox"
capabilities = ["json", "failure", "kvp"]
[commands]
failure = ["/usr/bin/python3", "-c", '''
import sys, time, urllib.request
url, budget, interval = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
end = time.monotonic() + budget
while True:
    try:
        request = urllib.request.Request(url + "/provisioning/health", data=b"x", method="POST")
        urllib.request.urlopen(request, timeout=1).read()
        sys.exit(0)
    except OSError as e:
        print("attempt failed:", e, flush=True)
    if time.monotonic() + interval > end:
        sys.exit(1)
    time.sleep(interval)
''', "{wireserver_url}", "{budget}", "{retry_interval}"]
[reactions]
retryable = [500]
transport_errors = "retry"
status_403 = "throttling"
[exit]
reported = [0]
failed = [1]
"#;

/// The bundled reporter's own profile (conformance/agents/provision-report.toml), attached with
/// the sandbox instead of loopback URLs: it runs `--unprivileged`, nobody on the host, from
/// the workspace's build folder.
fn reporter_in_the_sandbox() -> String {
    let profile =
        std::fs::read_to_string(repo().join("conformance/agents/provision-report.toml")).unwrap();
    let reporter = runner_support::provision_report();
    assert!(reporter.is_file(), "{} not built", reporter.display());
    let swapped = profile
        .replace(r#"name = "provision-report""#, r#"name = "boxed""#)
        .replace(r#"attach = "url""#, r#"attach = "sandbox""#)
        .replace(
            r#""provision-report","#,
            &format!("{:?},", reporter.display().to_string()),
        );
    assert!(swapped.contains(r#"attach = "sandbox""#) && swapped.contains(r#"name = "boxed""#));
    swapped
}

/// Runs `cases` for the agent `boxed` with the workspace's `fake-wireserver` next to wirecheck.
fn run_with_the_sandbox(dir: &Path, exe: &Path, cases: &str) -> std::process::Output {
    let fake = wirecheck_path().with_file_name("fake-wireserver");
    assert!(
        fake.is_file(),
        "{} not found: build the workspace binaries first (cargo build --workspace --bins)",
        fake.display()
    );
    let linked = exe.with_file_name("fake-wireserver");
    if !linked.exists() && std::fs::hard_link(&fake, &linked).is_err() {
        std::fs::copy(&fake, &linked).unwrap();
    }
    let mut cmd = std::process::Command::new(exe);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("WIRECHECK_") || key.to_ascii_lowercase().ends_with("_proxy") {
            cmd.env_remove(&key);
        }
    }
    cmd.env("PATH", "/usr/bin:/bin")
        .env("NO_COLOR", "1")
        .current_dir(dir)
        .arg("run")
        .arg("--agent=boxed")
        .arg(format!("--agents-dir={}", dir.join("agents").display()))
        .arg(format!(
            "--scenarios={}",
            repo().join("scenarios").display()
        ))
        .arg(format!("--cases={cases}"))
        .arg(format!("--out={}", dir.join("out").display()))
        .arg("--quiet")
        .output()
        .unwrap()
}

/// (id, verdict, reason) of every case of the run.
fn verdicts(dir: &Path) -> Vec<(String, String, String)> {
    runner_support::cases(&runner_support::results(&dir.join("out")))
}

/// A scenario whose wireserver (or IMDS) is refused runs in the sandbox (`--refuse`): the
/// reporter, which puts its failure report in KVP before it tries the wireserver, passes
/// `wireserver.unreachable.failure` on KVP-only delivery, and with IMDS refused still
/// delivers its report to the served wireserver.
#[test]
fn a_refused_wireserver_or_imds_is_arranged_in_the_sandbox_and_kvp_only_delivery_is_judged() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = setup(tmp.path());
    write_files(
        tmp.path(),
        &[("agents/boxed.toml", &reporter_in_the_sandbox())],
    );
    // `wirecheck list` (no root needed) shows them runnable, not "cannot be arranged".
    let list = std::process::Command::new(&exe)
        .env("NO_COLOR", "1")
        .arg("list")
        .arg("--agent=boxed")
        .arg(format!(
            "--agents-dir={}",
            tmp.path().join("agents").display()
        ))
        .arg(format!(
            "--scenarios={}",
            repo().join("scenarios").display()
        ))
        .output()
        .unwrap();
    assert_eq!(list.status.code(), Some(0), "{}", stderr(&list));
    let listed = stdout(&list);
    let refused: Vec<&str> = listed
        .lines()
        .filter(|l| l.starts_with("wireserver.unreachable.") || l.starts_with("imds.unreachable."))
        .collect();
    assert!(refused.len() >= 20, "{listed}");
    for line in &refused {
        assert!(!line.contains("[skipped"), "{line}");
    }
    let out = run_with_the_sandbox(
        tmp.path(),
        &exe,
        "{wireserver.unreachable.failure,imds.unreachable}.*",
    );
    let all = verdicts(tmp.path());
    assert!(!all.is_empty(), "{}{}", stdout(&out), stderr(&out));
    if !is_root() {
        assert!(
            all.iter()
                .all(|(_, v, r)| v == "skipped" && r.starts_with("sandbox attach needs root"))
        );
        return;
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "{all:#?}\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    for (id, verdict, reason) in &all {
        assert_eq!(verdict, "pass", "{id}: {reason}");
    }
    let ids: Vec<&str> = all.iter().map(|(id, _, _)| id.as_str()).collect();
    for id in [
        "wireserver.unreachable.failure.kvp.report",
        "wireserver.unreachable.failure.behaviour.exit",
        "imds.unreachable.report.state",
    ] {
        assert!(ids.contains(&id), "{id} not run: {ids:?}");
    }
    // Refused, as a closed port refuses: at once, not a timeout or an unreachable network.
    let log = std::fs::read_to_string(
        tmp.path()
            .join("out/artifacts/boxed/wireserver.unreachable.failure/run-1.stderr"),
    )
    .unwrap();
    assert!(log.contains("Connection refused (os error 111)"), "{log}");
}

/// The same refused wireserver for an agent that never writes KVP: its KVP cases fail (the
/// host learns nothing) because it wrote no record, not because it "removed" the pool the
/// sandbox pre-creates as hv_kvp_daemon does (an empty pool is not judged by `kvp.pool`), and
/// what it saw was a refusal, not a timeout.
#[test]
fn a_sandbox_agent_without_kvp_fails_kvp_only_delivery_when_the_wireserver_is_refused() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let exe = setup(tmp.path());
    write_files(tmp.path(), &[("agents/boxed.toml", NO_KVP_PROFILE)]);
    let out = run_with_the_sandbox(tmp.path(), &exe, "wireserver.unreachable.failure.*");
    let all = verdicts(tmp.path());
    assert!(!all.is_empty(), "{}{}", stdout(&out), stderr(&out));
    if !is_root() {
        assert!(
            all.iter()
                .all(|(_, v, r)| v == "skipped" && r.starts_with("sandbox attach needs root"))
        );
        return;
    }
    assert_eq!(
        out.status.code(),
        Some(1),
        "{all:#?}\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    for (id, verdict, reason) in &all {
        assert!(!reason.contains("removed"), "{id}: {reason}");
        match id.split('.').nth(3) {
            Some("kvp") if id.ends_with(".kvp.pool") => assert!(
                verdict == "skipped" && reason.contains("the pool file is empty"),
                "{id}: {verdict} {reason}"
            ),
            Some("kvp") if id.ends_with(".kvp.report") => assert!(
                verdict == "fail"
                    && reason.contains("no PROVISIONING_REPORT record in the pool file"),
                "{id}: {verdict} {reason}"
            ),
            Some("kvp") => assert_eq!(verdict, "fail", "{id}: {reason}"),
            // Its only requests were refused, so the fake's journal is empty.
            Some("protocol") => assert!(
                verdict == "skipped" && reason.contains("the agent sent no request"),
                "{id}: {verdict} {reason}"
            ),
            _ => assert_eq!(verdict, "pass", "{id}: {reason}"),
        }
    }
    for check in [".kvp.report", ".kvp.pool"] {
        assert!(
            all.iter().any(|(id, _, _)| id.ends_with(check)),
            "{check}: {all:#?}"
        );
    }
    let log = std::fs::read_to_string(
        tmp.path()
            .join("out/artifacts/boxed/wireserver.unreachable.failure/run-1.stdout"),
    )
    .unwrap();
    assert!(log.contains("Connection refused"), "{log}");
}
