//! Running one agent invocation: its own process group, output captured up to a bound, and the
//! whole group killed at the deadline (or when it leaves children behind).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::netns::NetNs;

/// Bytes of stdout/stderr kept per stream; the rest is counted and dropped.
pub const OUTPUT_LIMIT: usize = 256 * 1024;

/// How long the pipes may stay open after the agent exited (children that inherited them)
/// before the process group is killed.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// What to run.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Added to (or replacing) the inherited environment.
    pub env: Vec<(String, String)>,
    /// Removed from the inherited environment (before `env` is applied).
    pub env_remove: Vec<String>,
    pub cwd: PathBuf,
    pub deadline: Duration,
    /// Joined before exec: the agent's processes live in this network namespace.
    pub netns: Option<NetNs>,
}

/// How the invocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    /// Killed by a signal it did not get from us.
    Signal(i32),
    /// Still running at the deadline: its process group was killed.
    KilledAtDeadline,
    /// It could not be started.
    SpawnFailed(String),
    /// Ended by the harness once the profile's `done` condition held (its terminal report was
    /// accepted): the normal end of an agent that never exits on its own, not a failure.
    StoppedWhenDone,
}

impl Exit {
    pub fn code(&self) -> Option<i32> {
        match self {
            Exit::Code(c) => Some(*c),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Exit::Code(c) => format!("exit status {c}"),
            Exit::Signal(s) => format!("killed by signal {s}"),
            Exit::KilledAtDeadline => "still running at the deadline (process group killed)".into(),
            Exit::SpawnFailed(e) => format!("could not be started: {e}"),
            Exit::StoppedWhenDone => {
                "stopped by the harness after its terminal report (done = \"terminal-report\")"
                    .into()
            }
        }
    }
}

/// Captured output of one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first [`OUTPUT_LIMIT`] bytes.
    pub bytes: Vec<u8>,
    /// Everything the stream produced.
    pub total: usize,
}

impl Captured {
    pub fn truncated(&self) -> bool {
        self.total > self.bytes.len()
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// The result of one invocation.
#[derive(Debug, Clone)]
pub struct Finished {
    pub exit: Exit,
    pub started: Instant,
    pub ended: Instant,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// Runs the invocation to its end or its deadline. Never panics on agent behaviour.
pub async fn run(inv: &Invocation) -> Finished {
    let mut cmd = Command::new(&inv.program);
    cmd.args(&inv.args)
        .current_dir(&inv.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so the whole tree can be killed at the deadline.
        .process_group(0)
        .kill_on_drop(true);
    for key in &inv.env_remove {
        cmd.env_remove(key);
    }
    for (k, v) in &inv.env {
        cmd.env(k, v);
    }
    if let Some(ns) = inv.netns.clone() {
        // SAFETY: between fork and exec the hook only calls setns(2) (no allocation, no lock).
        unsafe {
            cmd.pre_exec(move || ns.enter());
        }
    }
    let started = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Finished {
                exit: Exit::SpawnFailed(format!("{}: {e}", inv.program.display())),
                started,
                ended: Instant::now(),
                stdout: Captured::default(),
                stderr: Captured::default(),
            };
        }
    };
    let pgid = child.id();
    let stdout = tokio::spawn(capture(child.stdout.take()));
    let stderr = tokio::spawn(capture(child.stderr.take()));

    let status = tokio::time::timeout(inv.deadline, child.wait()).await;
    let ended = Instant::now();
    let exit = match status {
        Ok(Ok(status)) => {
            use std::os::unix::process::ExitStatusExt as _;
            match (status.code(), status.signal()) {
                (Some(code), _) => Exit::Code(code),
                (None, Some(sig)) => Exit::Signal(sig),
                (None, None) => Exit::Signal(0),
            }
        }
        Ok(Err(e)) => Exit::SpawnFailed(format!("waiting for it failed: {e}")),
        Err(_elapsed) => {
            kill_group(pgid);
            let _ = child.wait().await;
            Exit::KilledAtDeadline
        }
    };

    // Children that inherited the pipes keep them open; give them a moment, then end them.
    let grace_end = tokio::time::Instant::now() + PIPE_GRACE;
    let stdout = collect(stdout, grace_end, pgid).await;
    let stderr = collect(stderr, grace_end, pgid).await;
    // Nothing of this invocation may outlive it (a leftover child would keep retrying
    // against the next scenario's fake).
    kill_group(pgid);

    Finished {
        exit,
        started,
        ended,
        stdout,
        stderr,
    }
}

/// The captured stream, once its pipe closes; at `grace_end` the process group is killed so
/// the pipe closes.
async fn collect(
    mut reader: tokio::task::JoinHandle<Captured>,
    grace_end: tokio::time::Instant,
    pgid: Option<u32>,
) -> Captured {
    match tokio::time::timeout_at(grace_end, &mut reader).await {
        Ok(captured) => captured.unwrap_or_default(),
        Err(_) => {
            kill_group(pgid);
            match tokio::time::timeout(PIPE_GRACE, &mut reader).await {
                Ok(captured) => captured.unwrap_or_default(),
                Err(_) => {
                    reader.abort();
                    Captured::default()
                }
            }
        }
    }
}

fn kill_group(pgid: Option<u32>) {
    let Some(pid) = pgid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    // ESRCH (already gone) is the normal case.
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

async fn capture<R: AsyncRead + Unpin>(stream: Option<R>) -> Captured {
    let Some(mut stream) = stream else {
        return Captured::default();
    };
    let mut captured = Captured::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                captured.total += n;
                let room = OUTPUT_LIMIT.saturating_sub(captured.bytes.len());
                captured.bytes.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    captured
}

/// Finds a program: a path (with a `/`) is used as is; a bare name is looked up next to the
/// wirecheck executable first (`bin_dir`), then on `PATH`.
pub fn resolve_program(name: &str, bin_dir: &Path) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    let beside = bin_dir.join(name);
    if is_executable(&beside) {
        return Some(beside);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, deadline: Duration) -> Invocation {
        Invocation {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("WC_TEST".into(), "x".into())],
            env_remove: vec![],
            cwd: std::env::temp_dir(),
            deadline,
            netns: None,
        }
    }

    #[tokio::test]
    async fn captures_exit_code_and_output() {
        let f = run(&sh(
            "echo out-$WC_TEST; echo err >&2; exit 3",
            Duration::from_secs(20),
        ))
        .await;
        assert_eq!(f.exit, Exit::Code(3));
        assert_eq!(f.stdout.text(), "out-x\n");
        assert_eq!(f.stderr.text(), "err\n");
    }

    #[tokio::test]
    async fn a_hanging_agent_and_its_children_are_killed_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("child-alive");
        // The child keeps touching a file; after the kill it must stop.
        let script = format!(
            "(while true; do touch {m}; sleep 0.05; done) & sleep 30",
            m = marker.display()
        );
        let f = run(&sh(&script, Duration::from_millis(300))).await;
        assert_eq!(f.exit, Exit::KilledAtDeadline);
        std::thread::sleep(Duration::from_millis(200));
        let _ = std::fs::remove_file(&marker);
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !marker.exists(),
            "a child of the killed agent is still running"
        );
    }

    #[tokio::test]
    async fn output_is_bounded() {
        let f = run(&sh("head -c 600000 /dev/zero", Duration::from_secs(20))).await;
        assert_eq!(f.stdout.total, 600_000);
        assert_eq!(f.stdout.bytes.len(), OUTPUT_LIMIT);
        assert!(f.stdout.truncated());
    }

    #[tokio::test]
    async fn missing_programs_fail_to_spawn() {
        let mut inv = sh("", Duration::from_secs(1));
        inv.program = "/nonexistent/agent".into();
        assert!(matches!(run(&inv).await.exit, Exit::SpawnFailed(_)));
    }

    #[test]
    fn programs_are_found_beside_wirecheck_then_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("my-agent");
        std::fs::write(&agent, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(resolve_program("my-agent", dir.path()), Some(agent.clone()));
        assert!(resolve_program("sh", dir.path()).is_some());
        assert_eq!(resolve_program("no-such-agent-xyz", dir.path()), None);
        assert_eq!(
            resolve_program(agent.to_str().unwrap(), Path::new("/")),
            Some(agent)
        );
    }
}
