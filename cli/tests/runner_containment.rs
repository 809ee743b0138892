//! Containment that fails closed (issue 23): each test is one way an agent got out of its
//! containment, or a run went on without it, named after that finding. As root and as
//! `nobody` where the finding was both.

use crate::runner_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use runner_support::{
    as_ordinary_user, repo, results, script_agent, shared_tempdir, stderr, stdout, wirecheck,
    write_files,
};

fn show(o: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", stdout(o), stderr(o))
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Whether agents can be contained here; says why not (a run then refuses: see
/// `a_run_that_cannot_contain_its_agents_refuses_to_start_as_root`).
fn containment_available() -> bool {
    match conformance::containment::unavailable() {
        None => true,
        Some(why) => {
            eprintln!("not run: {why}");
            false
        }
    }
}

/// `hostile.c` (beside this file) built with the system's gcc into `dir`.
fn build_hostile(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/containment/hostile.c");
    let program = dir.join("hostile");
    let o = Command::new("gcc")
        .args(["-O1", "-Wall", "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .expect("gcc runs");
    assert!(o.status.success(), "gcc: {}", show(&o));
    program
}

/// A url agent `name` whose ready command is `argv`; returns the agents folder.
fn program_agent(dir: &Path, name: &str, argv: &[&str]) -> PathBuf {
    let words: Vec<String> = argv.iter().map(|w| format!("{w:?}")).collect();
    let profile = format!(
        r#"name = "{name}"
description = "a hostile test agent"
attach = "url"
capabilities = ["json"]

[commands]
ready = [{}]

[reactions]
retryable = [429, 500, 503]
transport_errors = "retry"
status_403 = "fatal"

[exit]
reported = [0]
"#,
        words.join(", ")
    );
    write_files(dir, &[(&format!("agents/{name}.toml"), &profile)]);
    dir.join("agents")
}

/// Runs agent `name` of `agents` on the JSON ready scenario (one invocation), as an ordinary
/// user when `ordinary`.
fn run_one_case(dir: &Path, name: &str, agents: &Path, ordinary: bool) -> Output {
    let mut cmd = wirecheck(&repo());
    cmd.args(["run", "--quiet", "--agent", name, "--agents-dir"])
        .arg(agents)
        .arg("--out")
        .arg(dir.join("out"))
        .args(["--cases", "wire.health.json.ready.*"]);
    let mut cmd = if ordinary { as_ordinary_user(cmd) } else { cmd };
    cmd.output().unwrap()
}

/// What agent `name` printed, in every case that kept its output.
fn agent_stdout(out: &Path, name: &str) -> Vec<String> {
    let mut texts = Vec::new();
    let mut todo = vec![out.join("artifacts").join(name)];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "stdout") {
                texts.push(std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    texts
}

/// Every file under `dir`, read.
fn every_file(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                files.push((path, bytes));
            }
        }
    }
    files
}

/// The agent makes a Unix socket through io_uring (`IORING_OP_SOCKET`, which the `socket()`
/// filter never sees) and connects it to a socket of the host's (the test's listener stands for
/// `docker.sock`): nothing may arrive, and the ring itself is refused.
fn assert_io_uring_reaches_no_socket_of_the_host(ordinary: bool) {
    let dir = shared_tempdir();
    let hostile = build_hostile(dir.path());
    let socket_path = dir.path().join("machine.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    listener.set_nonblocking(true).unwrap();
    // Anyone may connect: only the containment stands in the way.
    std::fs::set_permissions(
        &socket_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let agents = program_agent(
        dir.path(),
        "uring",
        &[
            hostile.to_str().unwrap(),
            "uring-connect",
            socket_path.to_str().unwrap(),
        ],
    );
    // The agent never reports: its cases fail (how the run ends is not what is judged here).
    let o = run_one_case(dir.path(), "uring", &agents, ordinary);
    assert!(
        listener.accept().is_err(),
        "the agent connected to a Unix socket of the host through io_uring"
    );
    let outputs = agent_stdout(&dir.path().join("out"), "uring");
    assert!(!outputs.is_empty(), "no output kept: {}", show(&o));
    for text in outputs {
        assert!(
            text.contains("io_uring_setup: Operation not permitted"),
            "{text}"
        );
        assert!(!text.contains("connected"), "{text}");
    }
}

#[test]
fn io_uring_gets_no_unix_socket_past_the_af_unix_block_as_root() {
    if !is_root() {
        eprintln!("not run: needs root (the tests run as root in CI)");
        return;
    }
    if containment_available() {
        assert_io_uring_reaches_no_socket_of_the_host(false);
    }
}

#[test]
fn io_uring_gets_no_unix_socket_past_the_af_unix_block_as_nobody() {
    if containment_available() {
        assert_io_uring_reaches_no_socket_of_the_host(true);
    }
}

/// An agent run as root adds keys to the user and the session keyring: both refused, and none
/// is in the host's keyrings after the run (where it would outlive the case and the run).
#[test]
fn an_agent_run_as_root_does_not_share_roots_kernel_keyring() {
    if !is_root() || !containment_available() {
        eprintln!("not run: needs root and containment");
        return;
    }
    let dir = shared_tempdir();
    let hostile = build_hostile(dir.path());
    let tag = format!("wirecheck-keyring-test-{}", std::process::id());
    let agents = program_agent(
        dir.path(),
        "keys",
        &[hostile.to_str().unwrap(), "add-keys", &tag],
    );
    // The agent never reports: its cases fail (how the run ends is not what is judged here).
    let o = run_one_case(dir.path(), "keys", &agents, false);
    let left = take_keys(&tag);
    let outputs = agent_stdout(&dir.path().join("out"), "keys");
    assert!(!outputs.is_empty(), "no output kept: {}", show(&o));
    for text in outputs {
        for keyring in ["user", "session"] {
            assert!(
                text.contains(&format!("add_key {keyring}: Operation not permitted")),
                "{text}"
            );
        }
    }
    assert!(left.is_empty(), "keys of the agent's are left: {left:?}");
}

/// The keys described with `tag` in the keyrings the test (root) can see, invalidated
/// (KEYCTL_INVALIDATE) so that a failing run leaves root's keyring as it was.
fn take_keys(tag: &str) -> Vec<String> {
    let keys = std::fs::read_to_string("/proc/keys").unwrap();
    let found: Vec<String> = keys
        .lines()
        .filter(|l| l.contains(tag))
        .map(str::to_owned)
        .collect();
    for line in &found {
        let serial = line
            .split(' ')
            .next()
            .and_then(|s| i32::from_str_radix(s, 16).ok());
        if let Some(serial) = serial {
            // SAFETY: keyctl(2) on a key of this test's own making.
            unsafe { libc::syscall(libc::SYS_keyctl, 21, serial) };
        }
    }
    found
}

/// Prints who it is and tries to read the host's password hashes onto its stdout (which its
/// case keeps in the artifacts a CI uploads).
const SHADOW_READER: &str = r#"
import os
print("uid", os.getuid())
try:
    print(open("/etc/shadow").read())
except OSError as e:
    print("shadow:", e)
"#;

/// A root agent's output is copied into artifacts/: it must not hold `/etc/shadow`. The agent
/// still runs as root inside its namespace (real agents insist on uid 0).
#[test]
fn an_agent_run_as_root_cannot_read_etc_shadow_into_the_artifacts() {
    if !is_root() || !containment_available() {
        eprintln!("not run: needs root and containment");
        return;
    }
    let shadow = std::fs::read_to_string("/etc/shadow").unwrap();
    let root_entry = shadow
        .lines()
        .find(|l| l.starts_with("root:"))
        .expect("/etc/shadow has root's entry")
        .to_owned();
    let dir = shared_tempdir();
    let agents = script_agent(dir.path(), "shadow", "url", "\"json\"", SHADOW_READER);
    // The agent never reports: its cases fail (how the run ends is not what is judged here).
    let o = run_one_case(dir.path(), "shadow", &agents, false);
    let outputs = agent_stdout(&dir.path().join("out"), "shadow");
    assert!(!outputs.is_empty(), "no output kept: {}", show(&o));
    for text in &outputs {
        assert!(text.contains("uid 0"), "{text}");
        assert!(
            text.contains("shadow: [Errno 13] Permission denied"),
            "{text}"
        );
    }
    for (path, bytes) in every_file(&dir.path().join("out")) {
        assert!(
            !bytes
                .windows(root_entry.len())
                .any(|w| w == root_entry.as_bytes()),
            "{} holds root's /etc/shadow entry",
            path.display()
        );
    }
}

/// A machine that refuses user namespaces, as Docker's default seccomp profile does in a
/// container (and as `kernel.apparmor_restrict_unprivileged_userns` or a zero
/// `user.max_user_namespaces` do): `unshare` and `clone` with `CLONE_NEWUSER` fail with EPERM,
/// `clone3` with ENOSYS (so the C library falls back to `clone`). Installed on `cmd` (and
/// everything it starts) before it execs.
fn refuse_user_namespaces(cmd: &mut Command) {
    use fake_wireserver::contain::seccomp::{AUDIT_ARCH, Instruction};
    const LD: u16 = 0x20;
    const JEQ: u16 = 0x15;
    const JSET: u16 = 0x45;
    const RET: u16 = 0x06;
    const ALLOW: u32 = 0x7fff_0000;
    const EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;
    const ENOSYS: u32 = 0x0005_0000 | libc::ENOSYS as u32;
    let op = |code, k, jt, jf| Instruction { code, jt, jf, k };
    let program = [
        op(LD, 4, 0, 0),
        op(JEQ, AUDIT_ARCH, 1, 0),
        op(RET, ALLOW, 0, 0),
        op(LD, 0, 0, 0),
        op(JEQ, libc::SYS_clone3 as u32, 5, 0),
        op(JEQ, libc::SYS_unshare as u32, 1, 0),
        op(JEQ, libc::SYS_clone as u32, 0, 4),
        op(LD, 16, 0, 0),
        op(JSET, libc::CLONE_NEWUSER as u32, 0, 2),
        op(RET, EPERM, 0, 0),
        op(RET, ENOSYS, 0, 0),
        op(RET, ALLOW, 0, 0),
    ];
    #[repr(C)]
    struct Fprog {
        len: u16,
        filter: *const Instruction,
    }
    // SAFETY: prctl(2) only, between fork and exec, on a program that lives in the closure.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            let prog = Fprog {
                len: program.len() as u16,
                filter: program.as_ptr(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const Fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `wirecheck run` of the bundled reporter on the JSON health scenarios where user namespaces
/// are refused, as an ordinary user when `ordinary`, with `extra` arguments and variables.
fn run_without_user_namespaces(
    out: &Path,
    ordinary: bool,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut cmd = wirecheck(&repo());
    cmd.args(["run", "--quiet", "--cases", "wire.health.json.*", "--out"])
        .arg(out)
        .args(extra)
        .envs(env.iter().copied());
    let mut cmd = if ordinary { as_ordinary_user(cmd) } else { cmd };
    refuse_user_namespaces(&mut cmd);
    cmd.output().unwrap()
}

/// Refused, exit 2, one message naming what is missing and the ways to get it; nothing run,
/// no results written.
fn assert_refused_without_user_namespaces(ordinary: bool) {
    let dir = shared_tempdir();
    let out = dir.path().join("out");
    let o = run_without_user_namespaces(&out, ordinary, &[], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    let err = stderr(&o);
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("wirecheck: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("cannot contain the agents on this machine"),
        "{err}"
    );
    for advice in [
        "user namespaces",
        "run wirecheck as root",
        "kernel.apparmor_restrict_unprivileged_userns=0",
        "user.max_user_namespaces",
        "--uncontained",
    ] {
        assert!(err.contains(advice), "no {advice:?} in:\n{err}");
    }
    assert!(!out.join("results.json").exists(), "{}", show(&o));
}

#[test]
fn a_run_that_cannot_contain_its_agents_refuses_to_start_as_root() {
    if !is_root() {
        eprintln!("not run: needs root (the tests run as root in CI)");
        return;
    }
    assert_refused_without_user_namespaces(false);
}

#[test]
fn a_run_that_cannot_contain_its_agents_refuses_to_start_as_nobody() {
    assert_refused_without_user_namespaces(true);
}

/// With the user's consent (`--uncontained`, or `WIRECHECK_UNCONTAINED=1`) the run goes on, and
/// results.json, the console summary and report.html say the agents ran uncontained.
fn assert_uncontained_run_is_flagged(ordinary: bool, consent: (&[&str], &[(&str, &str)])) {
    let dir = shared_tempdir();
    let out = dir.path().join("out");
    let o = run_without_user_namespaces(&out, ordinary, consent.0, consent.1);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let r = results(&out);
    let why = r["uncontained"].as_str().unwrap_or_default();
    assert!(why.contains("user namespace"), "{}", r["uncontained"]);
    let summary = stdout(&o);
    assert!(
        summary.contains("UNCONTAINED: the agents ran without containment (--uncontained)"),
        "{summary}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("<strong>Uncontained:</strong> the agents ran without containment"),
        "report.html does not say so"
    );
    let counts = runner_support::counts(&r, "provision-report");
    assert!(counts.get("pass").is_some_and(|n| *n > 0), "{counts:?}");
}

#[test]
fn an_uncontained_run_is_flagged_in_results_summary_and_report_as_root() {
    if !is_root() {
        eprintln!("not run: needs root (the tests run as root in CI)");
        return;
    }
    assert_uncontained_run_is_flagged(false, (&["--uncontained"], &[]));
}

#[test]
fn an_uncontained_run_is_flagged_in_results_summary_and_report_as_nobody() {
    assert_uncontained_run_is_flagged(true, (&[], &[("WIRECHECK_UNCONTAINED", "1")]));
}

/// A sandbox agent (attach = "sandbox", as WALinuxAgent and afterburn are) tries the same: it
/// must be nobody on the host under the same filter, with a case folder of its own it can
/// write, and no way to the sandbox's journal it is judged by (its working folder is root's).
const SANDBOXED: &str = r#"
import os, subprocess
print("uid", os.getuid())
try:
    open("/etc/shadow").read()
    print("shadow: read")
except OSError as e:
    print("shadow:", e)
with open(os.path.join(os.environ["WIRECHECK_CASE_CASE_DIR"], "mine"), "w") as f:
    f.write("x")
print("case folder: written")
try:
    with open("sandbox/journal.jsonl", "a") as f:
        f.write("forged")
    print("journal: written")
except OSError as e:
    print("journal:", e)
hostile = os.environ["HOSTILE"]
for args in (["uring-connect", os.environ["ATTACK_SOCKET"]], ["add-keys", os.environ["KEY_TAG"]]):
    print(subprocess.run([hostile] + args, capture_output=True, text=True).stdout)
"#;

#[test]
fn a_sandbox_agent_is_nobody_on_the_host_under_the_same_filter() {
    if !is_root() {
        eprintln!("not run: the sandbox needs root");
        return;
    }
    let dir = shared_tempdir();
    let hostile = build_hostile(dir.path());
    let socket_path = dir.path().join("machine.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::fs::set_permissions(
        &socket_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let tag = format!("wirecheck-sandbox-keyring-test-{}", std::process::id());
    let agents = script_agent(dir.path(), "boxed", "sandbox", "\"xml\"", SANDBOXED);
    let mut cmd = wirecheck(&repo());
    cmd.args(["run", "--quiet", "--agent", "boxed", "--agents-dir"])
        .arg(&agents)
        .arg("--out")
        .arg(dir.path().join("out"))
        .args(["--cases", "wire.health.xml.ready.*"])
        .env("HOSTILE", &hostile)
        .env("ATTACK_SOCKET", &socket_path)
        .env("KEY_TAG", &tag);
    let o = cmd.output().unwrap();
    let left = take_keys(&tag);
    assert!(
        listener.accept().is_err(),
        "the sandbox agent connected to a Unix socket of the host"
    );
    let outputs = agent_stdout(&dir.path().join("out"), "boxed");
    assert_eq!(outputs.len(), 1, "{}", show(&o));
    let text = &outputs[0];
    for expected in [
        "uid 0",
        "shadow: [Errno 13] Permission denied",
        "case folder: written",
        "journal: [Errno 13] Permission denied",
        "io_uring_setup: Operation not permitted",
        "add_key user: Operation not permitted",
        "add_key session: Operation not permitted",
    ] {
        assert!(text.contains(expected), "no {expected:?} in:\n{text}");
    }
    assert!(left.is_empty(), "keys of the agent's are left: {left:?}");
}
