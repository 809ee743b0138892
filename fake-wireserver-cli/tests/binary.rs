//! The `fake-wireserver` binary: ready line, endpoints, admin journal, JSON Lines journal,
//! `--print-config`, and refusing bad scenario files with exit status 2.

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

// The fake's own test helpers (one copy for its suites and these).
#[path = "../../fake-wireserver/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fake_wireserver::{AnswerKind, EndpointId, Entry, HealthState};
use serde_json::Value;

use common::{exchange, get, goalstate_get, post, response};

const T: Duration = Duration::from_secs(10);

/// The fake's crate folder: the scenario paths below (and in the snapshots) are relative to it.
fn fake_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fake-wireserver")
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fake-wireserver"));
    c.current_dir(fake_dir());
    c.env_remove("FAKE_WIRESERVER_SCENARIO");
    c
}

/// Kills the child on drop so a failing test leaves no process behind.
struct Running(Child);
impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn addr(v: &Value, key: &str) -> SocketAddr {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {v}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn serves_reports_ready_and_journals() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let mut child = Running(
        bin()
            .args([
                "--proxy",
                "127.0.0.1:0",
                "--scenario",
                "../scenarios/examples/throttle-health-then-succeed.toml",
                "--journal",
            ])
            .arg(&journal)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    // Exactly one JSON line, keys in the documented order, ports resolved.
    assert!(line.starts_with("{\"wireserver\":\"127.0.0.1:"), "{line}");
    let ready: Value = serde_json::from_str(&line).unwrap();
    let keys: Vec<&String> = ready.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["wireserver", "imds", "proxy", "admin", "admin_token"]
    );
    let token = ready["admin_token"].as_str().unwrap().to_owned();
    assert!(
        token.len() == 64 && token.bytes().all(|b| b.is_ascii_hexdigit()),
        "256 bits as hex: {token}"
    );
    let (ws, imds, proxy, admin) = (
        addr(&ready, "wireserver"),
        addr(&ready, "imds"),
        addr(&ready, "proxy"),
        addr(&ready, "admin"),
    );
    for a in [ws, imds, proxy, admin] {
        assert_ne!(a.port(), 0);
    }

    assert_eq!(
        response(exchange(ws, &goalstate_get(), T).await).status,
        200
    );
    let md = get(
        "/metadata/instance?api-version=2021-08-01&extended=true",
        "169.254.169.254",
        &[("Metadata", "true")],
    );
    assert_eq!(response(exchange(imds, &md, T).await).status, 200);
    let via_proxy = get("http://168.63.129.16/?comp=versions", "168.63.129.16", &[]);
    assert_eq!(response(exchange(proxy, &via_proxy, T).await).status, 200);
    let elsewhere = get("http://example.com/", "example.com", &[]);
    assert_eq!(response(exchange(proxy, &elsewhere, T).await).status, 502);
    let health = post(
        "/provisioning/health",
        "168.63.129.16",
        &[("Content-Type", "application/json")],
        r#"{"state":"Ready"}"#,
    );
    assert_eq!(
        response(exchange(ws, &health, T).await).status,
        403,
        "scenario: throttled"
    );

    let bearer = format!("Bearer {token}");
    let r = response(
        exchange(
            admin,
            &get(
                "/__admin/journal",
                &admin.to_string(),
                &[("Authorization", &bearer)],
            ),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let entries: Vec<Entry> = serde_json::from_slice(&r.body).unwrap();
    let endpoints: Vec<EndpointId> = entries.iter().map(|e| e.endpoint).collect();
    assert_eq!(
        endpoints,
        [
            EndpointId::WireserverGoalstate,
            EndpointId::ImdsInstance,
            EndpointId::WireserverVersions,
            EndpointId::ProxyUnknownHost,
            EndpointId::WireserverHealthJson
        ]
    );
    assert_eq!(entries[4].answer.kind, AnswerKind::Respond);
    assert_eq!(
        entries[4].report.as_ref().unwrap().state,
        Some(HealthState::Ready)
    );

    // SIGTERM: a clean exit; the JSON Lines file has every entry.
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child.0),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let lines = std::fs::read_to_string(&journal).unwrap();
    let from_file: Vec<Entry> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(from_file.len(), 5);
}

fn print_config(args: &[&str]) -> String {
    let out = bin().args(args).arg("--print-config").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn print_config_merges_defaults_file_and_flags() {
    let plain = print_config(&[]);
    insta::assert_snapshot!("print_config_defaults", plain);
    let merged = print_config(&[
        "--scenario",
        "../scenarios/examples/throttle-health-then-succeed.toml",
        "--proxy",
        "127.0.0.1:3128",
        "--imds",
        "off",
        "--journal",
        "journal.jsonl",
        "--max-body",
        "2048",
        "--journal-max-bytes",
        "1048576",
    ]);
    insta::assert_snapshot!("print_config_merged", merged);
    // The [fake] table is a valid scenario again.
    let table: toml::Table = toml::from_str(&merged).unwrap();
    let fake = toml::to_string(&table["fake"]).unwrap();
    fake_wireserver::Scenario::from_toml_str(&fake, "printed").unwrap();
}

#[test]
fn bad_scenario_refuses_to_start_with_exit_2() {
    let out = bin()
        .args(["--scenario", "tests/data/scenarios/unknown-step.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no ready line");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("tests/data/scenarios/unknown-step.toml:7:8: endpoint[1].step[1].kind: unknown variant `explode`"),
        "{stderr}"
    );
    let out = bin()
        .args(["--scenario", "no/such/file.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no/such/file.toml"));
}

#[test]
fn admin_must_stay_on_loopback() {
    let out = bin().args(["--admin", "0.0.0.0:0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
    assert!(Path::new(env!("CARGO_BIN_EXE_fake-wireserver")).exists());
}

/// Issue 13: a 200,000-`*` endpoint glob (globset panicked compiling it) is a scenario error
/// naming the file, line and field: exit 2, no panic, and the glob is not echoed whole.
#[test]
fn glob_of_200000_stars_is_a_clear_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stars.toml");
    let stars = "*".repeat(200_000);
    std::fs::write(
        &file,
        format!("[[endpoint]]\nid = \"{stars}\"\n[[endpoint.step]]\nkind = \"hang\"\n"),
    )
    .unwrap();
    let out = bin()
        .args(["--scenario", file.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", common::clip(&stderr));
    assert!(!stderr.contains("panicked"), "{}", common::clip(&stderr));
    assert!(
        stderr.contains("stars.toml:2:6: endpoint[1].id:")
            && stderr.contains("at most 256 characters and 32 wildcards"),
        "{}",
        common::clip(&stderr)
    );
    assert!(stderr.len() < 2000, "{}", common::clip(&stderr));
}

/// Issue 13: terminal escapes from a scenario someone else wrote (here in its folder's name
/// and its contents) reach the terminal escaped, in the error that refuses it.
#[test]
fn terminal_escapes_in_a_bad_scenario_are_not_printed_raw() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("shared\u{1b}]0;owned\u{7}\u{1b}[2J");
    std::fs::create_dir(&folder).unwrap();
    let file = folder.join("esc.toml");
    std::fs::write(&file, "name = \"x\u{1b}[2J\"\n").unwrap();
    let out = bin().arg("--scenario").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
        "{stderr:?}"
    );
    assert!(stderr.contains("shared\\u{1b}]0;owned"), "{stderr}");
}

/// Lets this process hold a few thousand sockets (the client ends of the connections below).
fn raise_fd_limit(want: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|c| c < want) {
        limit.current = Some(limit.maximum.map_or(want, |m| m.min(want)));
        let _ = setrlimit(Resource::Nofile, limit);
    }
}

/// Issue 13 review: the shipped binary under the usual 1,024-descriptor limit (soft = hard, so
/// raising it does not help) with 1,100 idle connections still answers a real request; it
/// must not run out of descriptors before its connection cap and stall in `accept`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_1024_under_a_1024_descriptor_limit_do_not_starve_the_binary() {
    raise_fd_limit(8192);
    let mut child = Running(
        Command::new("prlimit")
            .arg("--nofile=1024:1024")
            .arg(env!("CARGO_BIN_EXE_fake-wireserver"))
            .current_dir(fake_dir())
            .env_remove("FAKE_WIRESERVER_SCENARIO")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdout = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let ready: Value = serde_json::from_str(&line).unwrap();
    let ws = addr(&ready, "wireserver");
    let mut idle = Vec::with_capacity(1100);
    for _ in 0..1100 {
        idle.push(tokio::net::TcpStream::connect(ws).await.unwrap());
    }
    // Let the fake accept what it can.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let outcome = exchange(ws, &goalstate_get(), Duration::from_secs(2)).await;
    let elapsed = started.elapsed();
    let stderr_of = |mut child: Running| {
        let _ = child.0.kill();
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut err);
        err
    };
    match outcome {
        common::Outcome::Response(r) => assert_eq!(r.status, 200),
        other => panic!(
            "no answer within 2 s behind 1,100 idle connections under a 1,024-descriptor limit: {other:?} after {elapsed:?}; stderr:\n{}",
            common::clip(&stderr_of(child))
        ),
    }
    drop(idle);
    let stderr = stderr_of(child);
    assert!(
        !stderr.contains("Too many open files"),
        "descriptors ran out: {}",
        common::clip(&stderr)
    );
}

/// Starts the binary with `--journal PATH` (and, with `fsize`, a file size limit of that many
/// bytes, as a nearly full disk would leave), and returns it with its ready line.
fn start_with_journal(path: &Path, fsize: Option<u64>) -> (Running, Value) {
    let mut cmd = bin();
    cmd.arg("--journal")
        .arg(path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(bytes) = fsize {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: one async-signal-safe system call between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let limit = rustix::process::Rlimit {
                    current: Some(bytes),
                    maximum: Some(bytes),
                };
                rustix::process::setrlimit(rustix::process::Resource::Fsize, limit)
                    .map_err(std::io::Error::from)
            });
        }
    }
    let mut child = Running(cmd.spawn().unwrap());
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    (child, ready)
}

/// SIGTERM, then the exit status and stderr.
fn stop(mut child: Running) -> (Option<i32>, String) {
    use std::io::Read as _;
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child.0),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = child.0.wait().unwrap();
    let mut stderr = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code(), stderr)
}

/// `GET /__admin/stats` of a running binary.
async fn admin_stats(ready: &Value) -> Value {
    let admin = addr(ready, "admin");
    let bearer = format!("Bearer {}", ready["admin_token"].as_str().unwrap());
    let r = response(
        exchange(
            admin,
            &get(
                "/__admin/stats",
                &admin.to_string(),
                &[("Authorization", &bearer)],
            ),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

/// Issue 23, "the journal silently loses entries on a full disk while the fake exits 0":
/// `/dev/full` fails every write with ENOSPC. The admin API says so while the fake runs, and
/// it ends with exit status 3 and a line naming the file, the first entry lost and the count.
#[tokio::test]
async fn the_journal_silently_loses_entries_on_a_full_disk_no_more() {
    let (child, ready) = start_with_journal(Path::new("/dev/full"), None);
    let ws = addr(&ready, "wireserver");
    for _ in 0..3 {
        assert_eq!(
            response(exchange(ws, &goalstate_get(), T).await).status,
            200
        );
    }
    // The third entry is final once its answer is written: wait for it.
    let mut stats = admin_stats(&ready).await;
    for _ in 0..100 {
        if stats["file_lost"] == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        stats = admin_stats(&ready).await;
    }
    assert_eq!(stats["file_lost"], 3, "{stats}");
    assert_eq!(stats["file_error"]["first_seq"], 1, "{stats}");
    assert_eq!(stats["file_error"]["path"], "/dev/full", "{stats}");
    let (code, stderr) = stop(child);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.contains(
            "fake-wireserver: error: the journal file /dev/full misses 3 entries (the first at seq 1): No space left on device"
        ),
        "{stderr}"
    );
}

/// A disk that fills up part way (a file size limit of 4 KiB here): the file keeps the whole
/// lines written before the first failed write, a line cut by it is cut back, nothing comes
/// after it, and the entries it misses are counted in the exit line.
#[tokio::test]
async fn a_journal_file_that_fills_up_keeps_whole_lines_and_fails_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal.jsonl");
    let (child, ready) = start_with_journal(&path, Some(4096));
    let ws = addr(&ready, "wireserver");
    const SENT: usize = 20;
    for _ in 0..SENT {
        assert_eq!(
            response(exchange(ws, &goalstate_get(), T).await).status,
            200
        );
    }
    let (code, stderr) = stop(child);
    assert_eq!(code, Some(3), "{stderr}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.len() <= 4096 && text.ends_with('\n'), "{text:?}");
    let written: Vec<Entry> = text.lines().map(|l| Entry::from_json(l).unwrap()).collect();
    assert!(
        !written.is_empty() && written.len() < SENT,
        "{}",
        written.len()
    );
    let lost = SENT - written.len();
    assert!(
        stderr.contains(&format!(
            "the journal file {} misses {lost} entries",
            path.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("File too large"), "{stderr}");
}
