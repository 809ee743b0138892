//! The outer half, in the caller's namespaces: check privileges and input, start the inner half
//! under `unshare`, pass signals on, and return the inner half's exit status.
//!
//! `unshare --fork` blocks SIGINT and SIGTERM while it waits, so the outer half does not exec
//! it: it stays the process the caller sees. On SIGTERM or SIGHUP it kills `unshare`, whose
//! `--kill-child=SIGTERM` tells the inner half to stop COMMAND and finish; the inner half
//! reports its exit status through a pipe, whose end-of-file also says it is done (artifacts
//! written). `unshare` dies with the outer half (`lifeline`), so a SIGKILL of the outer half
//! ends COMMAND the same way.

use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};

use super::setup::{self, find_in_path};
use super::{EXIT_SANDBOX_FAILED, EXIT_USAGE, NamespaceIds, SandboxArgs, error};
use fake_wireserver::Scenario;

pub(super) fn run(args: SandboxArgs) -> i32 {
    if !rustix::process::geteuid().is_root() {
        error(
            "needs root: it creates network, mount and PID namespaces, adds 168.63.129.16 and \
             169.254.169.254 to their loopback and mounts tmpfs over /run and /var/lib/hyperv \
             inside them (the host's are never touched). Run it as root (e.g. with sudo).",
        );
        return EXIT_USAGE;
    }
    for (tool, package) in [
        ("unshare", "util-linux"),
        ("ip", "iproute2"),
        ("mount", "mount"),
        ("umount", "mount"),
    ] {
        if find_in_path(tool).is_none() {
            error(format!(
                "`{tool}` not found in PATH: install the {package} package"
            ));
            return EXIT_USAGE;
        }
    }
    if let Some(scale) = args.time_scale
        && let Err(e) = fake_wireserver::clock::agent_env(scale)
    {
        error(format!("--time-scale: {e}"));
        return EXIT_USAGE;
    }
    let scenario = match args.scenario.as_deref().map(absolute).transpose() {
        Ok(s) => s,
        Err(e) => {
            error(format!("{e:#}"));
            return EXIT_USAGE;
        }
    };
    // Fail before making namespaces when the scenario is unusable (the message names the file,
    // line and field); the inner half loads it again.
    if let Some(path) = &scenario
        && let Err(e) = Scenario::from_file(path)
    {
        error(e);
        return EXIT_USAGE;
    }
    if let Err(e) = check_guest(&args) {
        error(format!("{e:#}"));
        return EXIT_USAGE;
    }
    for bind in &args.binds {
        for (what, path) in [("SRC", &bind.source), ("DST", &bind.target)] {
            // Made inside the private /run when missing (the host's /run is never touched).
            let made_inside = what == "DST" && setup::below_private_run(path);
            if !made_inside && !path.is_dir() {
                error(format!(
                    "--bind {}:{}: {what} {} is not an existing folder",
                    bind.source.display(),
                    bind.target.display(),
                    path.display()
                ));
                return EXIT_USAGE;
            }
        }
    }
    let out = match prepare_out_dir(&args.out) {
        Ok(out) => out,
        Err(e) => {
            error(format!("{e:#}"));
            return EXIT_USAGE;
        }
    };
    // Own thread: the caller may already be inside a tokio runtime.
    let supervised = std::thread::spawn(move || supervise(&args, scenario.as_deref(), &out))
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the sandbox thread panicked")));
    match supervised {
        Ok(code) => code,
        Err(e) => {
            error(format!("{e:#}"));
            EXIT_SANDBOX_FAILED
        }
    }
}

/// A guest file that loads, where a guest may be; its private folders would hide a `--bind`
/// source below them (binds are made after the guest).
fn check_guest(args: &SandboxArgs) -> anyhow::Result<()> {
    let Some(path) = &args.guest else {
        return Ok(());
    };
    fake_wireserver::guest::Guest::from_file(path).map_err(|e| anyhow::anyhow!("--guest {e}"))?;
    for bind in &args.binds {
        if let Some(hidden) = super::guest::hides(&bind.source) {
            anyhow::bail!(
                "--bind {}:{}: SRC is below {hidden}, which --guest replaces with a private folder",
                bind.source.display(),
                bind.target.display()
            );
        }
    }
    Ok(())
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("cannot resolve path {}", path.display()))
}

pub(super) fn prepare_out_dir(out: &Path) -> anyhow::Result<PathBuf> {
    // The sandbox mounts tmpfs over these; anything written below them would vanish. Checked
    // before creating anything (the host's /run is never touched) and again once symlinks are
    // resolved.
    let check = |path: &Path| -> anyhow::Result<()> {
        for hidden in ["/run", "/var/lib/hyperv"] {
            if path.starts_with(hidden) {
                anyhow::bail!(
                    "--out {}: must not be below {hidden}, which the sandbox replaces with a \
                     private tmpfs",
                    out.display()
                );
            }
        }
        Ok(())
    };
    check(&absolute(out)?)?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("--out {}: cannot create the folder", out.display()))?;
    let resolved = out
        .canonicalize()
        .with_context(|| format!("--out {}: cannot resolve the folder", out.display()))?;
    check(&resolved)?;
    Ok(resolved)
}

fn unshare_command(
    args: &SandboxArgs,
    scenario: Option<&Path>,
    out: &Path,
    status_fd: i32,
) -> anyhow::Result<tokio::process::Command> {
    let host = NamespaceIds::of_self().context("cannot read /proc/self/ns")?;
    let exe = std::env::current_exe().context("cannot locate the fake-wireserver binary")?;
    let mut cmd = tokio::process::Command::new("unshare");
    // Killed with this process, whatever ends it (SIGKILL included): `unshare` then tells the
    // inner half (`--kill-child`), which stops COMMAND and ends the namespace. Spawned from
    // the supervising thread, which lives until `unshare` is reaped.
    // SAFETY: the hook makes system calls only.
    unsafe {
        cmd.pre_exec(fake_wireserver::lifeline::die_with_parent());
    }
    cmd.args([
        "--net",
        "--mount",
        // The guest's own host name: `hostname` and `hostnamectl` never rename the host.
        "--uts",
        "--propagation",
        "private",
        // A PID namespace whose first process is the inner half: when it exits, the kernel
        // ends everything COMMAND left running, and /proc shows only the sandbox's processes.
        "--pid",
        "--fork",
        "--mount-proc",
        // When `unshare` dies (the outer half kills it on SIGTERM), the inner half is told.
        "--kill-child=SIGTERM",
        "--",
    ]);
    cmd.arg(&exe).arg("sandbox");
    cmd.arg("--inside-namespaces").arg(host.encode());
    cmd.arg("--status-fd").arg(status_fd.to_string());
    cmd.arg("--out").arg(out);
    if let Some(s) = scenario {
        cmd.arg("--scenario").arg(s);
    }
    if let Some(g) = &args.guest {
        cmd.arg("--guest").arg(absolute(g)?);
    }
    if let Some(t) = args.startup {
        cmd.arg("--startup").arg(t.to_string());
    }
    if let Some(t) = args.timeout {
        cmd.arg("--timeout").arg(t.to_string());
    }
    for bind in &args.binds {
        let mut spec = bind.source.clone().into_os_string();
        spec.push(":");
        spec.push(&bind.target);
        cmd.arg("--bind").arg(spec);
    }
    if let Some(limits) = &args.limits {
        cmd.arg("--limits").arg(limits.to_string());
    }
    if let Some(g) = args.stop_after_report {
        cmd.arg("--stop-after-report").arg(g.to_string());
    }
    for host in &args.refuse {
        cmd.arg("--refuse").arg(host.as_str());
    }
    if args.unprivileged {
        cmd.arg("--unprivileged");
    }
    if let Some(scale) = args.time_scale {
        cmd.arg("--time-scale").arg(scale.times().to_string());
    }
    cmd.arg("--").args(&args.command);
    Ok(cmd)
}

fn supervise(args: &SandboxArgs, scenario: Option<&Path>, out: &Path) -> anyhow::Result<i32> {
    let (mut status_reader, status_writer) =
        std::io::pipe().context("cannot create the status pipe")?;
    // The inner half inherits the write end through `unshare` (and closes it on exec of
    // COMMAND); this process must not keep it, or the end of file would never come.
    rustix::io::fcntl_setfd(&status_writer, rustix::io::FdFlags::empty())
        .context("cannot pass the status pipe on")?;
    let mut cmd = unshare_command(args, scenario, out, status_writer.as_raw_fd())?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut unshare = cmd.spawn().context("cannot run `unshare`")?;
        drop(status_writer);

        let mut reported = tokio::task::spawn_blocking(move || {
            let mut text = String::new();
            status_reader.read_to_string(&mut text).map(|_| text)
        });
        let reported = loop {
            tokio::select! {
                text = &mut reported => break text.context("status reader")?.context("status pipe")?,
                Some(()) = terminate.recv() => { let _ = unshare.start_kill(); }
                Some(()) = hangup.recv() => { let _ = unshare.start_kill(); }
                // A terminal sends SIGINT to the whole process group, COMMAND included: only
                // make sure this process waits for the artifacts.
                Some(()) = interrupt.recv() => {}
            }
        };
        let unshare_status = unshare.wait().await.context("cannot wait for `unshare`")?;
        Ok(exit_status(&reported, unshare_status))
    })
}

/// The inner half's report wins; without one (it never ran, or died), `unshare`'s status.
fn exit_status(reported: &str, unshare: ExitStatus) -> i32 {
    if let Ok(code) = reported.trim().parse::<i32>() {
        return code;
    }
    error(format!(
        "the sandbox ended without reporting a status (`unshare` {unshare}); no artifacts"
    ));
    EXIT_SANDBOX_FAILED
}
