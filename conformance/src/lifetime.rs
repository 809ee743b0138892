//! Nothing wirecheck starts outlives it, however it ends.
//!
//! * SIGINT, SIGTERM, SIGHUP (a Ctrl-C, a CI's cancel, a closed terminal): the runner stops
//!   every running agent, and still writes its results, marked interrupted
//!   (`runner::raise_on_signal`).
//! * SIGKILL (a CI timeout's last word), or a crash: nothing of wirecheck runs any more, so
//!   the kernel does it. Every child wirecheck starts gets a parent-death signal
//!   ([`fake_wireserver::lifeline`]) from a thread that lives until the child is reaped
//!   ([`spawn`]); an agent's waiter dies with wirecheck, the init of the agent's PID namespace
//!   dies with its waiter, and the kernel ends everything else in the namespace, `setsid()`
//!   daemons included. `fake-wireserver sandbox` ties its own `unshare` the same way.
//! * What a killed run leaves on disk (its case folders) is removed by the next run
//!   (`runner::case_root`).

use tokio::process::{Child, Command};

/// Keeps the thread a child was forked from alive: the child's parent-death signal fires when
/// that thread ends. Dropped once the child has been reaped (or killed).
#[derive(Debug)]
pub struct Tether(#[allow(dead_code)] std::sync::mpsc::Sender<()>);

/// Spawns `cmd` (with [`fake_wireserver::lifeline::die_with_parent`] registered, as its first
/// hook) on a thread of its own that lives until the [`Tether`] is dropped: off the runtime's
/// workers (spawning waits for the child's exec, containment set-up included), and never on a
/// runtime's blocking thread, which ends after ten idle seconds and would take the child with
/// it. Call it inside a tokio runtime.
pub async fn spawn(mut cmd: Command) -> std::io::Result<(Child, Tether)> {
    let runtime = tokio::runtime::Handle::current();
    let (spawned_tx, spawned) = tokio::sync::oneshot::channel();
    let (tether, released) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("wirecheck-child".into())
        .spawn(move || {
            let spawned = {
                let _runtime = runtime.enter();
                cmd.spawn()
            };
            // The hook (and whatever it holds) goes with the command, before the wait.
            drop(cmd);
            let started = spawned.is_ok();
            if spawned_tx.send(spawned).is_err() || !started {
                return;
            }
            // Returns once the tether is dropped.
            let _ = released.recv();
        })?;
    let child = spawned
        .await
        .map_err(|_| std::io::Error::other("the spawning thread ended"))??;
    Ok((child, Tether(tether)))
}

/// Registers the parent-death hook on `cmd`: call it before any other `pre_exec`.
pub fn die_with_wirecheck(cmd: &mut Command) {
    // SAFETY: the hook makes system calls only (prctl, getppid).
    unsafe {
        cmd.pre_exec(fake_wireserver::lifeline::die_with_parent());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt as _;
    use std::time::Duration;

    fn sleeper() -> Command {
        let mut cmd = Command::new("sleep");
        cmd.arg("30").kill_on_drop(true);
        die_with_wirecheck(&mut cmd);
        cmd
    }

    /// A runtime's blocking threads end when idle; a child forked from one dies then. One
    /// [`spawn`]ed lives on, and dies with its tether.
    #[test]
    fn a_child_outlives_the_runtimes_idle_threads_and_dies_with_its_tether() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_keep_alive(Duration::from_millis(100))
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut pooled = sleeper();
            let mut pooled = tokio::task::spawn_blocking(move || pooled.spawn())
                .await
                .unwrap()
                .unwrap();
            let (mut tethered, tether) = spawn(sleeper()).await.unwrap();
            let status = tokio::time::timeout(Duration::from_secs(10), pooled.wait())
                .await
                .expect("the blocking thread never idled out")
                .unwrap();
            assert_eq!(status.signal(), Some(libc::SIGKILL));
            assert!(tethered.try_wait().unwrap().is_none(), "killed too early");
            drop(tether);
            let status = tokio::time::timeout(Duration::from_secs(10), tethered.wait())
                .await
                .expect("the child outlived its tether")
                .unwrap();
            assert_eq!(status.signal(), Some(libc::SIGKILL));
        });
    }
}
