//! The preload keeps an agent's timed waits at its speed: at x10, waits of 6 s of the agent's
//! time end in well under 6 s of the wall's, where libfaketime alone leaves them on a deadline
//! of the real clock (a Python `Event.wait(2)` and a Rust `recv_timeout` then never return).
//! Needs Debian's libfaketime (the README's test command installs it).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const SCALE: u32 = 10;

/// The cdylib cargo built beside this test binary's folder.
fn preload() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("libwirecheck_agent_clock.so");
    assert!(lib.is_file(), "{} not built", lib.display());
    lib
}

fn libfaketime() -> &'static str {
    let lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
    assert!(
        std::path::Path::new(lib).is_file(),
        "libfaketime is not installed (apt-get install libfaketime)"
    );
    lib
}

/// Runs `cmd` at x10 (with the preload or without) and returns its wall time, or `None` when
/// it had not ended after 12 s.
fn wall_time(mut cmd: Command, with_preload: bool) -> Option<Duration> {
    let preloads = if with_preload {
        format!("{}:{}", preload().display(), libfaketime())
    } else {
        libfaketime().to_owned()
    };
    cmd.env("LD_PRELOAD", preloads)
        .env("FAKETIME", format!("+0 x{SCALE}"))
        .env("WIRECHECK_AGENT_CLOCK_SCALE", SCALE.to_string());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    while started.elapsed() < Duration::from_secs(12) {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Python's `threading` waits (all through `sem_clockwait`): 6 s of agent time.
fn python() -> Command {
    let mut cmd = Command::new("python3");
    cmd.args([
        "-c",
        "import threading\n\
         threading.Event().wait(2)\n\
         l = threading.Lock(); l.acquire(); l.acquire(timeout=2)\n\
         c = threading.Condition(); c.acquire(); c.wait(2)\n",
    ]);
    cmd
}

/// Rust's standard library's timed waits (futex system calls): 6 s of agent time, run by this
/// same test binary in its child role.
fn rust() -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_waits", "--nocapture"])
        .env("AGENT_CLOCK_CHILD", "1");
    cmd
}

/// The child role of [`rust`]: nothing unless started as the child.
#[test]
fn child_waits() {
    if std::env::var_os("AGENT_CLOCK_CHILD").is_none() {
        return;
    }
    let (_tx, rx) = std::sync::mpsc::channel::<()>();
    let _ = rx.recv_timeout(Duration::from_secs(2));
    std::thread::park_timeout(Duration::from_secs(2));
    let pair = std::sync::Mutex::new(());
    let guard = pair.lock().unwrap();
    let _ = std::sync::Condvar::new().wait_timeout(guard, Duration::from_secs(2));
}

#[test]
fn python_threading_waits_run_at_the_agents_speed() {
    let took = wall_time(python(), true).expect("hung with the preload");
    assert!(
        took < Duration::from_secs(4),
        "6 s of agent time took {took:?}"
    );
    // And the defect it works around: without it, the first wait does not end.
    assert_eq!(
        wall_time(python(), false),
        None,
        "libfaketime alone kept time"
    );
}

#[test]
fn rust_futex_waits_run_at_the_agents_speed() {
    let took = wall_time(rust(), true).expect("hung with the preload");
    assert!(
        took < Duration::from_secs(4),
        "6 s of agent time took {took:?}"
    );
    assert_eq!(
        wall_time(rust(), false),
        None,
        "libfaketime alone kept time"
    );
}
