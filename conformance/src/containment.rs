//! Whether agents can be contained on this machine, asked once per process: the network
//! namespace (`netns`), and as root or not, a trial run of the whole containment
//! (`exec::Confine`, the PID namespace, the agent's user namespace) on `/bin/sh`. A machine that
//! refuses part of it means "no containment, saying why", never a failure blamed on each agent:
//! a run then refuses to start (`runner::uncontained`) unless the user chose `--uncontained`.

use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::time::Duration;

use fake_wireserver::contain::userns::{self, UnprivilegedRoot};

use crate::exec::{Confine, Exit, Invocation, run};
use crate::netns::NetNs;

/// Why agents cannot be isolated in namespaces of their own on this machine, if they cannot:
/// without root when this kernel or its policy refuses unprivileged user namespaces (asked
/// once, by making one); as anyone when the rest of the containment (as root: the agent's
/// user namespace too) fails its trial run.
pub fn unavailable() -> Option<String> {
    if rustix::process::geteuid().is_root() {
        return containment_unavailable();
    }
    static PROBE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            NetNs::in_user_namespace(0).err().map(|e| {
                format!(
                    "agents run in a user namespace of their own (with a private network namespace, \
                     so a request that ignores the proxy cannot reach the real 168.63.129.16), and \
                     this machine refuses user namespaces to this user: {e}"
                )
            })
        })
        .clone()
        .or_else(containment_unavailable)
}

/// Why an agent cannot be contained here although a network namespace can be made: the rest
/// of the containment (`exec::Confine`, the PID namespace and its `/proc`) is tried once, on
/// `/bin/sh -c ': > written'`. A container that masks `/proc`, or a security module that refuses
/// the mounts, then means "no containment, saying why", never a failure blamed on each agent.
fn containment_unavailable() -> Option<String> {
    static PROBE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            let tried = std::thread::spawn(probe_containment)
                .join()
                .unwrap_or_else(|_| Err("the containment probe panicked".into()));
            tried.err().map(|e| {
                format!(
                    "agents run in namespaces of their own (user, network, PID, mount), and this machine \
                     refuses part of that: a trial run ended with {e}"
                )
            })
        })
        .clone()
}

/// Runs `/bin/sh -c ': > written'` contained as an agent would be (network, PID and mount
/// namespaces, hidden folders, a fresh `/proc`, no capabilities, the system-call filter and,
/// as root, a user namespace whose root is nobody on the host): `Err` says how it ended when
/// that is not possible here. Runs its own runtime; call it off any runtime thread.
fn probe_containment() -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime: {e}"))?;
    let dir = tempfile::tempdir().map_err(|e| format!("no temporary folder: {e}"))?;
    let hidden = dir.path().join("hidden");
    let keep = hidden.join("case");
    std::fs::create_dir_all(&keep).map_err(|e| format!("{}: {e}", keep.display()))?;
    let (netns, _listeners) =
        NetNs::with_loopback_listeners(0).map_err(|e| format!("no network namespace: {e}"))?;
    // As root, the agent is root of a user namespace of its own, nobody on the host.
    let as_root = rustix::process::geteuid().is_root();
    let unprivileged_root = if as_root {
        fake_wireserver::contain::userns::hand_over(&keep).map_err(|e| e.to_string())?;
        Some(
            UnprivilegedRoot::new()
                .map_err(|e| format!("no user namespace for agents run by root: {e}"))?,
        )
    } else {
        None
    };
    let invocation = Invocation {
        program: PathBuf::from("/bin/sh"),
        // The one place it can write is its case folder.
        args: vec!["-c".into(), ": > written".into()],
        env: Vec::new(),
        env_remove: Vec::new(),
        cwd: keep.clone(),
        deadline: Duration::from_secs(20),
        activity: None,
        netns: Some(netns),
        pid_namespace: true,
        stop: None,
        confine: Some(Confine {
            hide: vec![hidden],
            keep: keep.clone(),
        }),
        unprivileged_root,
        limits: None,
    };
    let exit = runtime.block_on(run(&invocation)).exit;
    let written = std::fs::symlink_metadata(keep.join("written"));
    match (exit, written) {
        (Exit::Code(0), Ok(file)) if as_root && file.uid() != userns::OUTSIDE_UID => Err(format!(
            "it ran as uid {} on the host, not as nobody",
            file.uid()
        )),
        (Exit::Code(0), Ok(file)) if file.is_file() => Ok(()),
        (Exit::Code(0), _) => Err("its case folder is not the one it wrote to".into()),
        (other, _) => Err(other.describe()),
    }
}
