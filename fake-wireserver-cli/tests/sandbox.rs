//! `fake-wireserver sandbox`: the real binary, real namespaces (needs root; without root these
//! tests fail rather than skip, except the one that checks the refusal as an unprivileged user).
//!
//! Commands here use bash's /dev/tcp so the tests depend on nothing but bash, util-linux and
//! iproute2. Every request goes to 168.63.129.16 / 169.254.169.254 inside the sandbox's own
//! network namespace only.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fake_wireserver::journal::Entry;
use fake_wireserver::{EndpointId, HealthState, Listener};

const FAKE: &str = env!("CARGO_BIN_EXE_fake-wireserver");

fn require_root() {
    assert!(
        rustix::process::geteuid().is_root(),
        "the sandbox tests create namespaces and must run as root"
    );
}

fn sandbox(out: &Path, extra: &[&str], command: &[&str]) -> Output {
    wirecheck_test_support::sandbox::run(Path::new(FAKE), out, extra, command)
}

fn journal(out: &Path) -> Vec<Entry> {
    wirecheck_test_support::sandbox::journal(out)
}

use wirecheck_test_support::http::{get, post};
use wirecheck_test_support::sandbox::{PRINT_STATUS_LINE, bash_send, describe, summary};

/// A bash snippet sending one GET (`Connection: close`) and printing the status line.
fn http_get(host: &str, target: &str, headers: &[(&str, &str)]) -> String {
    bash_send(host, &get(target, host, headers)) + PRINT_STATUS_LINE
}

#[test]
fn sandbox_command_reaches_the_fake_on_both_platform_addresses() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let script = format!(
        "{} && {}",
        http_get("168.63.129.16", "/?comp=versions", &[]),
        http_get(
            "169.254.169.254",
            "/metadata/instance?api-version=2021-02-01",
            &[("Metadata", "true")]
        ),
    );
    let output = sandbox(out.path(), &[], &["bash", "-c", &script]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["HTTP/1.1 200 OK", "HTTP/1.1 200 OK"],
        "{}",
        describe(&output)
    );

    let journal = journal(out.path());
    let seen: Vec<_> = journal
        .iter()
        .map(|e| (e.listener, e.endpoint, e.answer.status))
        .collect();
    assert_eq!(
        seen,
        [
            (
                Listener::Wireserver,
                EndpointId::WireserverVersions,
                Some(200)
            ),
            (Listener::Imds, EndpointId::ImdsInstance, Some(200)),
        ]
    );
    let summary = summary(out.path());
    assert_eq!(summary["exit_status"], 0);
    assert_eq!(summary["wireserver"], "168.63.129.16:80");
    assert_eq!(summary["imds"], "169.254.169.254:80");
    assert_eq!(summary["journal_entries"], 2);
}

#[test]
fn sandbox_exit_status_is_the_commands() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let output = sandbox(out.path(), &[], &["sh", "-c", "echo hello; exit 7"]);
    assert_eq!(output.status.code(), Some(7), "{}", describe(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "hello\n");
    assert_eq!(summary(out.path())["exit_status"], 7);
    assert!(journal(out.path()).is_empty());

    let output = sandbox(out.path(), &[], &["sh", "-c", "kill -TERM $$"]);
    assert_eq!(
        output.status.code(),
        Some(128 + 15),
        "{}",
        describe(&output)
    );
    assert_eq!(summary(out.path())["signal"], 15);

    let output = sandbox(out.path(), &[], &["/nonexistent/agent"]);
    assert_eq!(output.status.code(), Some(127), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("cannot run /nonexistent/agent"),
        "{}",
        describe(&output)
    );
}

/// What a sandbox must leave alone on the host.
#[derive(Debug, PartialEq)]
struct HostState {
    addresses: String,
    run: Vec<String>,
    run_ino: u64,
    var_lib: Vec<String>,
    hyperv: Option<Vec<String>>,
    net_ns: u64,
}

fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn host_state() -> HostState {
    let addresses = Command::new("ip").args(["-o", "addr"]).output().unwrap();
    HostState {
        addresses: String::from_utf8_lossy(&addresses.stdout).into_owned(),
        run: list(Path::new("/run")),
        run_ino: std::fs::metadata("/run").unwrap().ino(),
        var_lib: list(Path::new("/var/lib")),
        hyperv: Path::new("/var/lib/hyperv")
            .is_dir()
            .then(|| list(Path::new("/var/lib/hyperv"))),
        net_ns: std::fs::metadata("/proc/self/ns/net").unwrap().ino(),
    }
}

#[test]
fn sandbox_has_private_run_lease_and_kvp_folder_and_leaves_the_host_untouched() {
    require_root();
    let before = host_state();
    let out = tempfile::tempdir().unwrap();
    // Inside: the lease names 168.63.129.16 for lo, /var/lib/hyperv starts with hv_kvp_daemon's
    // five empty pools only, /run holds nothing of the host's; then write a pool file, and
    // litter /run and /var/lib/hyperv.
    let script = r#"
        set -e
        cat /run/systemd/netif/leases/1
        test "$(ls -A /var/lib/hyperv | tr '\n' ' ')" = ".kvp_pool_0 .kvp_pool_1 .kvp_pool_2 .kvp_pool_3 .kvp_pool_4 " && echo "hyperv pools only"
        stat -c 'pool %n %s %a %u:%g %F' /var/lib/hyperv/.kvp_pool_*
        ls -A /run
        ip -o addr show dev lo | awk '{print $4}'
        printf 'KEY' > /var/lib/hyperv/.kvp_pool_1
        head -c 2557 /dev/zero >> /var/lib/hyperv/.kvp_pool_1
        touch /var/lib/hyperv/not-a-pool /run/sandbox-litter
        ls /var/lib >/dev/null
    "#;
    let output = sandbox(out.path(), &[], &["bash", "-c", script]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.contains(&"OPTION_245=A83F8110"), "{stdout}");
    assert!(lines.contains(&"hyperv pools only"), "{stdout}");
    for i in 0..5 {
        let want = format!("pool /var/lib/hyperv/.kvp_pool_{i} 0 644 0:0 regular empty file");
        assert!(lines.contains(&want.as_str()), "{want} missing: {stdout}");
    }
    assert!(lines.contains(&"systemd"), "{stdout}");
    for addr in ["127.0.0.1/8", "168.63.129.16/32", "169.254.169.254/32"] {
        assert!(lines.contains(&addr), "{addr} missing inside: {stdout}");
    }

    let pool = std::fs::read(out.path().join(".kvp_pool_1")).expect("pool copied to --out");
    assert_eq!(pool.len(), 2560);
    assert!(pool.starts_with(b"KEY"));
    assert!(!out.path().join("not-a-pool").exists());
    assert_eq!(
        summary(out.path())["pools"],
        serde_json::json!([
            ".kvp_pool_0",
            ".kvp_pool_1",
            ".kvp_pool_2",
            ".kvp_pool_3",
            ".kvp_pool_4"
        ])
    );

    let after = host_state();
    assert_eq!(before, after, "the sandbox changed the host");
    assert!(!Path::new("/run/sandbox-litter").exists());
}

#[test]
fn sandbox_refuses_to_run_without_root() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(FAKE)
        .arg("sandbox")
        .arg("--out")
        .arg(out.path().join("never-created"))
        .args(["--", "true"])
        .output()
        .expect("run setpriv (util-linux)");
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("needs root"), "{stderr}");
    assert!(!out.path().join("never-created").exists());
}

#[test]
fn sandbox_inner_half_refuses_the_hosts_namespaces() {
    require_root();
    let before = host_state();
    let net = std::fs::metadata("/proc/self/ns/net").unwrap().ino();
    let mnt = std::fs::metadata("/proc/self/ns/mnt").unwrap().ino();
    let out = tempfile::tempdir().unwrap();
    let output = sandbox(
        out.path(),
        &["--inside-namespaces", &format!("{net}:{mnt}")],
        &["true"],
    );
    assert_eq!(output.status.code(), Some(125), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("refusing to set up"),
        "{}",
        describe(&output)
    );
    assert_eq!(before, host_state());
}

fn write_scenario(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn sandbox_serves_the_scenario_file() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        r#"
name = "versions unavailable once"

[[endpoint]]
id = "wireserver.versions"

[[endpoint.step]]
kind = "respond"
status = 503
"#,
    );
    let out = dir.path().join("out");
    let get = http_get("168.63.129.16", "/?comp=versions", &[]);
    let output = sandbox(
        &out,
        &["--scenario", scenario.to_str().unwrap()],
        &["bash", "-c", &format!("{get} && {get}")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let statuses: Vec<_> = journal(&out).iter().map(|e| e.answer.status).collect();
    assert_eq!(statuses, [Some(503), Some(200)]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .collect::<Vec<_>>(),
        ["HTTP/1.1 503 Service Unavailable", "HTTP/1.1 200 OK"]
    );
}

/// An answer still being written when COMMAND exits is recorded as it ends, not as pending:
/// an agent that reads its reply and exits at once must not leave a journal that says the
/// fake never answered.
#[test]
fn sandbox_journal_holds_answers_finished_after_the_command_exited() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        r#"
[[endpoint]]
id = "wireserver.versions"

[[endpoint.step]]
kind = "delay"
seconds = 0.5
"#,
    );
    let out = dir.path().join("out");
    // Sends the request and leaves without waiting for the (delayed) answer.
    let request = b"GET /?comp=versions HTTP/1.1\r\nHost: 168.63.129.16\r\n\r\n";
    let send = bash_send("168.63.129.16", request) + " && sleep 0.1";
    let output = sandbox(
        &out,
        &["--scenario", scenario.to_str().unwrap()],
        &["bash", "-c", &send],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let journal = journal(&out);
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert!(journal[0].done_ms.is_some(), "{:?}", journal[0]);
}

#[test]
fn sandbox_rejects_a_bad_scenario_before_making_namespaces() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        dir.path(),
        "[[endpoint]]\nid = \"wireserver.versions\"\nbogus = 1\n",
    );
    let output = sandbox(
        &dir.path().join("out"),
        &["--scenario", scenario.to_str().unwrap()],
        &["true"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("scenario.toml"), "{stderr}");
    assert!(stderr.contains("bogus"), "{stderr}");
}

#[test]
fn sandbox_timeout_kills_the_command_and_still_writes_artifacts() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let output = sandbox(
        out.path(),
        &["--timeout", "1"],
        &[
            "bash",
            "-c",
            &format!(
                "{} ; sleep 60",
                http_get("168.63.129.16", "/?comp=versions", &[])
            ),
        ],
    );
    assert_eq!(output.status.code(), Some(124), "{}", describe(&output));
    let summary = summary(out.path());
    assert_eq!(summary["timed_out"], true);
    assert_eq!(journal(out.path()).len(), 1);
}

/// A command that takes 1.5 s to start (a loaded machine, an interpreter's imports), then
/// works for 0.5 s: with `--timeout 1` from spawn it would be killed; `--startup` starts the
/// clock at its first request.
#[test]
fn sandbox_startup_starts_the_timeout_clock_at_the_first_request() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let slow_start = format!(
        "sleep 1.5; {}; sleep 0.5",
        http_get("168.63.129.16", "/?comp=versions", &[])
    );
    let output = sandbox(
        out.path(),
        &["--timeout", "1", "--startup", "5"],
        &["bash", "-c", &slow_start],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(summary(out.path())["timed_out"], false);
    // A command that sends at once gets the timeout from then, not the allowance too.
    let out = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let early = format!(
        "{}; sleep 30",
        http_get("168.63.129.16", "/?comp=versions", &[])
    );
    let output = sandbox(
        out.path(),
        &["--timeout", "1", "--startup", "5"],
        &["bash", "-c", &early],
    );
    assert_eq!(output.status.code(), Some(124), "{}", describe(&output));
    let took = started.elapsed().as_secs_f64();
    assert!(
        took < 4.0,
        "killed after {took} s: the clock did not start at the request"
    );
    // Without it the same command is killed at 1 s.
    let out = tempfile::tempdir().unwrap();
    let output = sandbox(
        out.path(),
        &["--timeout", "1"],
        &["bash", "-c", &slow_start],
    );
    assert_eq!(output.status.code(), Some(124), "{}", describe(&output));
}

/// A first attempt on a refused host is the end of the start-up as a first request is: an
/// agent that only ever tries a refused wireserver is not given its whole start-up allowance
/// on top of its timeout.
#[test]
fn sandbox_startup_ends_at_the_first_attempt_on_a_refused_host() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let script = format!("{}; sleep 30", connect("168.63.129.16", 80));
    let started = std::time::Instant::now();
    let output = sandbox(
        out.path(),
        &["--refuse", "wireserver", "--timeout", "1", "--startup", "8"],
        &["bash", "-c", &script],
    );
    assert_eq!(output.status.code(), Some(124), "{}", describe(&output));
    let took = started.elapsed().as_secs_f64();
    // Killed one second after its attempt; from the end of the allowance it would be 9 s.
    assert!(
        took < 6.0,
        "killed after {took} s: the attempt did not start the clock"
    );
}

/// A command that never sends a request gets the start-up allowance, then the timeout: no
/// more.
#[test]
fn sandbox_startup_is_an_allowance_not_a_second_timeout() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let output = sandbox(
        out.path(),
        &["--timeout", "1", "--startup", "1"],
        &["sleep", "30"],
    );
    assert_eq!(output.status.code(), Some(124), "{}", describe(&output));
    let took = started.elapsed().as_secs_f64();
    assert!((1.9..10.0).contains(&took), "killed after {took} s");
    // A first request after the allowance does not restart the clock.
    let out = tempfile::tempdir().unwrap();
    // Killed at 1 + 2 = 3 s; a clock restarted by the request would kill at 2.9 + 2 = 4.9 s.
    let late = format!(
        "sleep 2.9; {}; sleep 30",
        http_get("168.63.129.16", "/?comp=versions", &[])
    );
    let started = std::time::Instant::now();
    let output = sandbox(
        out.path(),
        &["--timeout", "2", "--startup", "1"],
        &["bash", "-c", &late],
    );
    assert_eq!(output.status.code(), Some(124), "{}", describe(&output));
    let took = started.elapsed().as_secs_f64();
    assert!(
        took < 4.4,
        "killed after {took} s: the late request restarted the clock"
    );
}

#[test]
fn sandbox_refuses_an_out_folder_the_private_mounts_would_hide() {
    require_root();
    let output = sandbox(Path::new("/run/wirecheck-sandbox-out"), &[], &["true"]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("must not be below /run"));
    assert!(!Path::new("/run/wirecheck-sandbox-out").exists());
}

/// A bash snippet POSTing one XML health report to the wireserver and printing the status line.
fn http_post_health(state: &str, substatus: Option<&str>) -> String {
    let details = substatus
        .map(|s| {
            format!("<Details><SubStatus>{s}</SubStatus><Description>d</Description></Details>")
        })
        .unwrap_or_default();
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><Health><GoalStateIncarnation>1</GoalStateIncarnation><Container><ContainerId>c6d5526c-5ac2-4200-b6e2-56f2b70c5ab2</ContainerId><RoleInstanceList><Role><InstanceId>b61f93d0-e1ed-40b2-b067-22c243233448.MachineRole_IN_0</InstanceId><Health><State>{state}</State>{details}</Health></Role></RoleInstanceList></Container></Health>"
    );
    let request = post(
        "/machine?comp=health",
        "168.63.129.16",
        &[("Content-Type", "text/xml;charset=utf-8")],
        &body,
    );
    bash_send("168.63.129.16", &request) + PRINT_STATUS_LINE
}

#[test]
fn sandbox_stops_a_daemon_once_its_terminal_report_is_in() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    // In-progress first (not terminal), then Ready, then "sleep forever" with a child left
    // behind, as WALA's daemon does.
    let script = format!(
        "{} && sleep 1 && {} && (sleep 300 &) && sleep 300",
        http_post_health("NotReady", Some("Provisioning")),
        http_post_health("Ready", None)
    );
    let started = std::time::Instant::now();
    let output = sandbox(
        out.path(),
        &["--stop-after-report", "0.5", "--timeout", "60"],
        &["bash", "-c", &script],
    );
    let took = started.elapsed();
    let s = summary(out.path());
    assert_eq!(s["stopped_when_done"], true, "{s}\n{}", describe(&output));
    assert_eq!(s["timed_out"], false, "{s}");
    assert!(took.as_secs() < 20, "took {took:?}");
    // The in-progress report alone did not stop it: both reports are in the journal.
    let states: Vec<_> = journal(out.path())
        .iter()
        .filter_map(|e| e.report.as_ref().and_then(|r| r.state.clone()))
        .collect();
    assert_eq!(states, [HealthState::NotReady, HealthState::Ready]);
}

#[test]
fn sandbox_does_not_stop_a_daemon_without_a_terminal_report() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let script = format!(
        "{} && sleep 300",
        http_post_health("NotReady", Some("Provisioning"))
    );
    let output = sandbox(
        out.path(),
        &["--stop-after-report", "0", "--timeout", "3"],
        &["bash", "-c", &script],
    );
    assert_eq!(output.status.code(), Some(124), "{}", describe(&output));
    let s = summary(out.path());
    assert_eq!(
        (s["timed_out"].clone(), s["stopped_when_done"].clone()),
        (true.into(), false.into()),
        "{s}"
    );
}

#[test]
fn sandbox_does_not_stop_when_the_report_was_refused() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let scenario = write_scenario(
        out.path(),
        "[[endpoint]]\nid = \"wireserver.health.xml\"\nend = \"repeat-last\"\n[[endpoint.step]]\nkind = \"respond\"\nstatus = 500\n",
    );
    let script = format!("{} && sleep 300", http_post_health("Ready", None));
    let output = sandbox(
        &out.path().join("out"),
        &[
            "--scenario",
            scenario.to_str().unwrap(),
            "--stop-after-report",
            "0",
            "--timeout",
            "3",
        ],
        &["bash", "-c", &script],
    );
    assert_eq!(output.status.code(), Some(124), "{}", describe(&output));
    assert_eq!(summary(&out.path().join("out"))["stopped_when_done"], false);
}

#[test]
fn sandbox_bind_gives_the_command_a_private_folder() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let name = format!("wirecheck-bind-test-{}", std::process::id());
    let spec = format!("{}:/var/log", scratch.path().display());
    let output = sandbox(
        out.path(),
        &["--bind", &spec],
        &["bash", "-c", &format!("echo inside > /var/log/{name}")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(
        std::fs::read_to_string(scratch.path().join(&name)).unwrap(),
        "inside\n"
    );
    assert!(
        !Path::new("/var/log").join(&name).exists(),
        "the host's /var/log was written"
    );
    // A source that does not exist is refused before anything is made.
    let output = sandbox(
        out.path(),
        &["--bind", "/nonexistent-wirecheck:/var/log"],
        &["true"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not an existing folder"));
}

/// An agent that writes no KVP leaves the pools as hv_kvp_daemon made them: present and empty,
/// so the runner sees an empty pool, not a removed one.
#[test]
fn sandbox_keeps_the_empty_pools_of_an_agent_that_writes_none() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let output = sandbox(out.path(), &[], &["true"]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary = summary(out.path());
    let names: Vec<String> = (0..5).map(|i| format!(".kvp_pool_{i}")).collect();
    assert_eq!(summary["pools"], serde_json::json!(names), "{summary}");
    assert_eq!(
        summary["pools_not_copied"],
        serde_json::json!([]),
        "{summary}"
    );
    for name in &names {
        let copy = std::fs::read(out.path().join(name)).expect("pool copied to --out");
        assert!(copy.is_empty(), "{name}: {} bytes", copy.len());
    }
}

#[test]
fn sandbox_does_not_copy_an_8_gib_sparse_pool_or_a_symlinked_pool_and_says_why() {
    use std::os::unix::process::CommandExt as _;
    require_root();
    let out = tempfile::tempdir().unwrap();
    // A sparse 8 GiB pool costs the agent nothing; a link points the copy at a host file; and
    // the private tmpfs is bounded, so writing 200 MiB into it fails.
    let script = r#"
        truncate -s 8G /var/lib/hyperv/.kvp_pool_1
        ln -sf /etc/passwd /var/lib/hyperv/.kvp_pool_2
        printf 'KEY' > /var/lib/hyperv/.kvp_pool_3
        if head -c 200M /dev/zero > /var/lib/hyperv/filler 2>/dev/null; then echo "tmpfs unbounded"; else echo "tmpfs full"; fi
        rm -f /var/lib/hyperv/filler
    "#;
    let started = std::time::Instant::now();
    // 1 GiB of address space for the whole sandbox: reading the pool whole cannot fit.
    let mut cmd = Command::new(FAKE);
    cmd.arg("sandbox")
        .arg("--out")
        .arg(out.path())
        .args(["--", "bash", "-c", script]);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = rustix::process::Rlimit {
                current: Some(1 << 30),
                maximum: Some(1 << 30),
            };
            rustix::process::setrlimit(rustix::process::Resource::As, limit)
                .map_err(std::io::Error::from)
        });
    }
    let output = cmd.output().expect("run fake-wireserver sandbox");
    let elapsed = started.elapsed();
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        elapsed < std::time::Duration::from_secs(20),
        "took {elapsed:?}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.lines().any(|l| l == "tmpfs full"), "{stdout}");

    let summary = summary(out.path());
    assert_eq!(
        summary["pools"],
        serde_json::json!([".kvp_pool_0", ".kvp_pool_3", ".kvp_pool_4"])
    );
    assert_eq!(
        summary["pools_not_copied"],
        serde_json::json!([
            {"name": ".kvp_pool_1", "why": "is larger than 67108864 bytes"},
            {"name": ".kvp_pool_2", "why": "is a symbolic link (not followed)"},
        ]),
        "{}",
        describe(&output)
    );
    assert!(!out.path().join(".kvp_pool_1").exists());
    assert!(!out.path().join(".kvp_pool_2").exists());
    assert_eq!(
        std::fs::read(out.path().join(".kvp_pool_3")).unwrap(),
        b"KEY"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(".kvp_pool_1 is larger than"),
        "the sandbox says why: {stderr}"
    );
}

/// `--unprivileged`: COMMAND is root of a user namespace of its own, nobody on the host, under
/// the agent filter; the private KVP folder is nobody's, so the pool can still be written, and
/// a `--bind` target below the private /run is made.
#[test]
fn sandbox_unprivileged_runs_the_command_as_nobody_on_the_host_under_the_agent_filter() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(scratch.path(), Some(65534), Some(65534)).unwrap();
    let spec = format!("{}:/run/sandbox-test-work", scratch.path().display());
    let script = r#"
        echo "uid $(id -u) $(awk '{print $2}' /proc/self/uid_map)"
        cat /etc/shadow >/dev/null 2>&1 && echo read-shadow
        printf pool > /var/lib/hyperv/.kvp_pool_1 && echo pool-written
        echo mine > /run/sandbox-test-work/mine && echo work-written
        python3 -c 'import socket; socket.socket(socket.AF_UNIX)' 2>&1 | grep -q PermissionError && echo unix-refused
        exit 0
    "#;
    let output = sandbox(
        out.path(),
        &["--unprivileged", "--bind", &spec],
        &["sh", "-c", script],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for expected in [
        "uid 0 65534",
        "pool-written",
        "work-written",
        "unix-refused",
    ] {
        assert!(
            text.contains(expected),
            "no {expected:?}: {}",
            describe(&output)
        );
    }
    assert!(!text.contains("read-shadow"), "{}", describe(&output));
    assert_eq!(
        std::fs::read(out.path().join(".kvp_pool_1")).unwrap(),
        b"pool"
    );
    assert!(scratch.path().join("mine").is_file());
}

/// SIGKILL to the sandbox (a CI timeout's last word) used to leave `unshare`, the inner half and
/// COMMAND running: COMMAND, and a daemon it started in a session of its own, now end with it.
#[test]
fn sandbox_killed_with_sigkill_leaves_no_process_of_its_command() {
    use wirecheck_test_support::procs;
    require_root();
    let out = tempfile::tempdir().unwrap();
    let marker = format!("WIRECHECK_SANDBOX_KILL_TEST={}", out.path().display());
    let (key, value) = marker.split_once('=').unwrap();
    let mut sandbox = Command::new(FAKE)
        .args(["sandbox", "--out"])
        .arg(out.path())
        .args(["--", "bash", "-c", "setsid sleep 600 & sleep 600"])
        .env(key, value)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The outer half, `unshare`, the inner half, bash and both sleeps.
    assert!(
        procs::wait_for(&marker, 6, std::time::Duration::from_secs(30)),
        "the command never started: {:?}",
        procs::marked(&marker)
    );
    sandbox.kill().unwrap();
    sandbox.wait().unwrap();
    let left = procs::left_after(&marker, std::time::Duration::from_secs(20));
    assert!(left.is_empty(), "outlived the sandbox: {left:#?}");
}

/// `--limits`: COMMAND's processes are held by a cgroup of its own (here, as root, the machine
/// must allow one), and a file past its size limit ends the writer with SIGXFSZ.
#[test]
fn sandbox_limits_hold_the_commands_processes_and_file_size() {
    require_root();
    if let Some(why) = fake_wireserver::limits::cgroup::available() {
        panic!("as root, a cgroup per process tree must be possible here: {why}");
    }
    let scratch = tempfile::tempdir().unwrap();
    let big = scratch.path().join("big");
    let out = tempfile::tempdir().unwrap();
    let output = sandbox(
        out.path(),
        &["--limits", "file_size_mib=1"],
        &[
            "sh",
            "-c",
            &format!("exec head -c 3000000 /dev/zero > {}", big.display()),
        ],
    );
    assert_eq!(summary(out.path())["signal"], 25, "{}", describe(&output));
    assert_eq!(std::fs::metadata(&big).unwrap().len(), 1 << 20);
    // dash gives up at the first fork that fails; `count` says how far it got.
    let count = scratch.path().join("count");
    let out = tempfile::tempdir().unwrap();
    let output = sandbox(
        out.path(),
        &["--limits", "processes=16"],
        &[
            "sh",
            "-c",
            &format!(
                "i=0; while [ $i -lt 200 ]; do sleep 600 & i=$((i+1)); echo $i > {}; done",
                count.display()
            ),
        ],
    );
    let forked: u64 = std::fs::read_to_string(&count)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        (14..=17).contains(&forked),
        "{forked}: {}",
        describe(&output)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("COMMAND reached its processes limit"),
        "{stderr}"
    );
}

/// A bash snippet that opens a TCP connection to `host:port` and prints `host:port open`, or
/// `host:port <why it failed>` (bash's last `strerror`, e.g. `Connection refused`).
fn connect(host: &str, port: u16) -> String {
    format!(
        r#"out=$( (exec 3<>/dev/tcp/{host}/{port} && echo open) 2>&1 ); echo "{host}:{port} ${{out##*: }}""#
    )
}

/// `--refuse`: the refused host's address stays on `lo` with nothing listening, so the
/// connection is refused at once (a RST, as a closed loopback port), while the other host is
/// served; the wireserver's refusal takes the HostGAPlugin port (same host) with it.
#[test]
fn sandbox_refuse_leaves_the_address_configured_but_unserved() {
    require_root();
    let probe = |extra: &[&str]| {
        let out = tempfile::tempdir().unwrap();
        let script = [
            "ip -o addr show dev lo | awk '{print $4}'".to_owned(),
            connect("168.63.129.16", 80),
            connect("168.63.129.16", 32526),
            connect("169.254.169.254", 80),
            http_get(
                "169.254.169.254",
                "/metadata/instance?api-version=2021-02-01",
                &[("Metadata", "true")],
            ) + " || echo imds-get-failed",
            http_get("168.63.129.16", "/?comp=versions", &[]) + " || echo wireserver-get-failed",
        ]
        .join("; ");
        let started = std::time::Instant::now();
        let output = sandbox(out.path(), extra, &["bash", "-c", &script]);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        assert!(
            started.elapsed().as_secs() < 20,
            "a refusal must be immediate, not a timeout: {:?}",
            started.elapsed()
        );
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        (stdout, journal(out.path()), summary(out.path()))
    };

    let (stdout, journal, summary) = probe(&["--refuse", "wireserver"]);
    let lines: Vec<&str> = stdout.lines().collect();
    for line in [
        "168.63.129.16/32",
        "169.254.169.254/32",
        "168.63.129.16:80 Connection refused",
        "168.63.129.16:32526 Connection refused",
        "169.254.169.254:80 open",
        "HTTP/1.1 200 OK",
        "wireserver-get-failed",
    ] {
        assert!(lines.contains(&line), "no {line:?} in:\n{stdout}");
    }
    let listeners: Vec<_> = journal.iter().map(|e| e.listener).collect();
    assert_eq!(listeners, [Listener::Imds], "{journal:?}");
    assert_eq!(summary["refused"], serde_json::json!(["wireserver"]));
    assert_eq!(
        summary["refused_addresses"],
        serde_json::json!(["168.63.129.16:80", "168.63.129.16:32526"])
    );

    let (stdout, journal, summary) = probe(&["--refuse", "imds"]);
    let lines: Vec<&str> = stdout.lines().collect();
    for line in [
        "169.254.169.254/32",
        "168.63.129.16:80 open",
        "168.63.129.16:32526 open",
        "169.254.169.254:80 Connection refused",
        "imds-get-failed",
        "HTTP/1.1 200 OK",
    ] {
        assert!(lines.contains(&line), "no {line:?} in:\n{stdout}");
    }
    assert!(
        journal.iter().all(|e| e.listener != Listener::Imds),
        "{journal:?}"
    );
    assert_eq!(summary["refused"], serde_json::json!(["imds"]));
    assert_eq!(
        summary["refused_addresses"],
        serde_json::json!(["169.254.169.254:80"])
    );
}

/// sandbox.json stamps the agent's start and exit on the fake's clock (the journal's `at_ms`):
/// they bracket its requests and span its own run, not the sandbox's set-up or teardown, so a
/// runner judging the agent's timing is not charged for the sandbox's.
#[test]
fn sandbox_stamps_the_agents_start_and_exit_on_the_fakes_clock() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let script = format!(
        "sleep 0.3; {}; sleep 0.3",
        http_get("168.63.129.16", "/?comp=versions", &[])
    );
    let output = sandbox(out.path(), &[], &["bash", "-c", &script]);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let summary = summary(out.path());
    let started = summary["agent_started_ms"]
        .as_u64()
        .expect("agent_started_ms");
    let exited = summary["agent_exited_ms"]
        .as_u64()
        .expect("agent_exited_ms");
    let journal = journal(out.path());
    assert_eq!(journal.len(), 1, "{journal:?}");
    let request = journal[0].at_ms;
    assert!(
        started + 300 <= request && request + 300 <= exited,
        "start {started}, request {request}, exit {exited}"
    );
}

/// POSIX shared memory is the sandbox's own: an object of the host's name is not there, one the
/// command makes does not outlive it on the host. (Processes of two sandboxes have the same PIDs
/// in their PID namespaces: on the host's `/dev/shm`, libfaketime's `/faketime_shm_<pid>` of one
/// agent refused another's, "shm_open failed: File exists", and the agent never started.)
#[test]
fn sandbox_shared_memory_is_private() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let host_object = Path::new("/dev/shm/wirecheck-sandbox-shm-probe");
    std::fs::write(host_object, b"host").unwrap();
    // `set -C`: the redirection creates the file exclusively (O_EXCL), as shm_open does.
    let output = sandbox(
        out.path(),
        &[],
        &[
            "sh",
            "-c",
            "set -C; : > /dev/shm/wirecheck-sandbox-shm-probe && : > /dev/shm/wirecheck-left-behind",
        ],
    );
    let host_after = std::fs::read(host_object);
    let _ = std::fs::remove_file(host_object);
    let left = Path::new("/dev/shm/wirecheck-left-behind").exists();
    let _ = std::fs::remove_file("/dev/shm/wirecheck-left-behind");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(host_after.unwrap(), b"host");
    assert!(!left, "the sandbox's shared memory outlived it on the host");
}

/// `--refuse`: the agent's attempts on a refused host never reach the fake, so the sandbox
/// watches for their SYNs and lists each with when it came, on the journal's clock: a retry
/// loop against a refused wireserver is timed like one against a served one. Attempts on the
/// served host are in the journal, not in that list.
#[test]
fn sandbox_lists_each_attempt_on_a_refused_host_with_its_time() {
    require_root();
    let out = tempfile::tempdir().unwrap();
    let script = [
        connect("168.63.129.16", 80),
        "sleep 0.3".to_owned(),
        connect("168.63.129.16", 32526),
        "sleep 0.3".to_owned(),
        connect("168.63.129.16", 80),
        http_get(
            "169.254.169.254",
            "/metadata/instance?api-version=2021-02-01",
            &[("Metadata", "true")],
        ),
    ]
    .join("; ");
    let output = sandbox(
        out.path(),
        &["--refuse", "wireserver"],
        &["bash", "-c", &script],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let written = summary(out.path());
    let attempts = written["refused_attempts"].as_array().unwrap();
    let addresses: Vec<&str> = attempts
        .iter()
        .map(|a| a["address"].as_str().unwrap())
        .collect();
    assert_eq!(
        addresses,
        [
            "168.63.129.16:80",
            "168.63.129.16:32526",
            "168.63.129.16:80"
        ],
        "{written}"
    );
    assert!(
        attempts.iter().all(|a| a["host"] == "wireserver"),
        "{written}"
    );
    assert_eq!(written["refused_attempts_lost"], 0, "{written}");
    // In order, the sleeps between them, and within the agent's run.
    let at: Vec<u64> = attempts
        .iter()
        .map(|a| a["at_ms"].as_u64().unwrap())
        .collect();
    assert!(at[1] >= at[0] + 300 && at[2] >= at[1] + 300, "{at:?}");
    let started = written["agent_started_ms"].as_u64().unwrap();
    let imds = journal(out.path());
    assert_eq!(imds.len(), 1, "{imds:?}");
    assert!(
        started <= at[0] && at[2] <= imds[0].at_ms,
        "{at:?} {started} {imds:?}"
    );

    // Nothing refused: no list to keep.
    let out = tempfile::tempdir().unwrap();
    let output = sandbox(
        out.path(),
        &[],
        &["bash", "-c", &connect("168.63.129.16", 80)],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert_eq!(
        summary(out.path())["refused_attempts"],
        serde_json::json!([])
    );
}
