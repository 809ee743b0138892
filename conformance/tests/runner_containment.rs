//! Containment that fails closed (issue 23): each test is one way an agent got out of its
//! containment, named after that finding. As root and as
//! `nobody` where the finding was both.

mod runner_support;

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

/// Whether agents can be contained here; says why not.
fn containment_available() -> bool {
    match conformance::netns::unavailable() {
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
    let keys = std::fs::read_to_string("/proc/keys").unwrap();
    // Leave root's keyring as it was, whatever the verdict (KEYCTL_INVALIDATE).
    for line in keys.lines().filter(|l| l.contains(&tag)) {
        let serial = line
            .split(' ')
            .next()
            .and_then(|s| i32::from_str_radix(s, 16).ok());
        if let Some(serial) = serial {
            // SAFETY: keyctl(2) on a key of this test's own making.
            unsafe { libc::syscall(libc::SYS_keyctl, 21, serial) };
        }
    }
    assert!(
        !keys.contains(&tag),
        "a key of the agent's is left:\n{keys}"
    );
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
