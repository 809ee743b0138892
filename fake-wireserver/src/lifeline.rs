//! A child that dies with the process that started it, however that one ends (SIGKILL, a CI
//! timeout, a closed terminal): the kernel's parent-death signal (`PR_SET_PDEATHSIG`), set
//! between fork and exec.
//!
//! The kernel sends it when the *thread* that forked the child ends, not the process: fork
//! from a thread that outlives the child (a runtime's blocking thread may end after ten idle
//! seconds, and would take the child with it). The setting survives exec, but not the exec of
//! a set-uid program, and it is not inherited by the child's own children: what the child
//! starts must be tied to it in turn (a PID namespace whose init dies with it, as `wirecheck`
//! and `fake-wireserver sandbox` do).

use rustix::process::{Pid, Signal, getpid, getppid, set_parent_process_death_signal};

/// A `pre_exec` hook (register it before any other, whose work it then covers): the child
/// gets SIGKILL when the thread that forked it ends. A child whose parent ended before the
/// hook ran (the signal would never come) fails to start instead. System calls only.
pub fn die_with_parent() -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    let parent = getpid();
    move || {
        set_parent_process_death_signal(Some(Signal::KILL))?;
        orphaned(parent)
    }
}

/// `Err` when this process's parent is no longer `parent` (it ended, and the process was
/// handed to a reaper).
fn orphaned(parent: Pid) -> std::io::Result<()> {
    if getppid() == Some(parent) {
        Ok(())
    } else {
        Err(std::io::Error::other("its parent ended before it started"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell started with the hook from a thread that then ends is killed; started from a
    /// thread that lives on, it is not.
    #[test]
    fn a_child_dies_when_the_thread_that_started_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let start = |tag: &str| {
            let marker = dir.path().join(tag);
            let script = format!("while :; do touch {}; sleep 0.05; done", marker.display());
            let mut cmd = std::process::Command::new("/bin/sh");
            cmd.args(["-c", &script]);
            // SAFETY: the hook makes system calls only.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, die_with_parent());
            }
            (cmd, marker)
        };
        let (cmd, ended_marker) = start("ended");
        let mut short = std::thread::spawn(move || {
            let mut cmd = cmd;
            cmd.spawn().unwrap()
        })
        .join()
        .unwrap();
        let (mut cmd, alive_marker) = start("alive");
        let mut long = cmd.spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        let status = short.wait().unwrap();
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(Signal::KILL.as_raw()), "{status:?}");
        let _ = std::fs::remove_file(&ended_marker);
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!ended_marker.exists());
        assert!(
            alive_marker.exists(),
            "the child of a live thread was killed"
        );
        long.kill().unwrap();
        long.wait().unwrap();
    }
}
