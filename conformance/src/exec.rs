//! Running one agent invocation: its own process group, output captured up to a bound, and the
//! whole group killed at the deadline (or when it leaves children behind). It dies with
//! wirecheck, whatever ends wirecheck ([`crate::lifetime`]).
//!
//! The deadline is counted from what the agent did, not from its spawn: its clock starts at
//! the agent's first attempt, a request or a connection to a closed port the runner watches
//! (see [`Activity`]), or after [`STARTUP_ALLOWANCE`] when none came. A slow start (an
//! interpreter loading on a loaded machine) then costs nothing but wall time, and the same
//! agent gets the same verdict on a busy machine as on an idle one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::netns::NetNs;
use fake_wireserver::contain::userns::UnprivilegedRoot;
use fake_wireserver::limits::{Limits, TreeLimits};

/// Bytes of stdout/stderr kept per stream; the rest is counted and dropped.
pub const OUTPUT_LIMIT: usize = 256 * 1024;

/// How long the pipes may stay open after the agent exited (children that inherited them)
/// before the process group is killed.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// How long an agent may take to start (from spawn to its first request) before its deadline
/// clock starts anyway: an agent that never sends a request still ends.
pub const STARTUP_ALLOWANCE: Duration = Duration::from_secs(10);

/// How often the runner looks for the agent's first attempt.
const ACTIVITY_POLL: Duration = Duration::from_millis(10);

/// A count of the agent's attempts (the requests its fake received, the connections to its
/// closed ports the runner saw), so the runner can tell when the agent got going (the deadline
/// clock starts at its first).
#[derive(Clone)]
pub struct Activity(std::sync::Arc<dyn Fn() -> u64 + Send + Sync>);

impl Activity {
    pub fn new(count: impl Fn() -> u64 + Send + Sync + 'static) -> Activity {
        Activity(std::sync::Arc::new(count))
    }

    fn count(&self) -> u64 {
        (self.0)()
    }
}

impl std::fmt::Debug for Activity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Activity")
    }
}

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
    /// How long the agent may run once its clock started (its first attempt; see `activity`).
    pub deadline: Duration,
    /// The agent's attempts so far: its clock starts at the first one, or after
    /// [`STARTUP_ALLOWANCE`]. `None`: the clock starts at spawn.
    pub activity: Option<Activity>,
    /// Joined before exec: the agent's processes live in this network namespace.
    pub netns: Option<NetNs>,
    /// Run the agent in a PID namespace of its own, under an init of its own (needs root, or
    /// a `netns` with a user namespace), without capabilities: when it ends, or is killed,
    /// the kernel ends everything it started, `setsid()` daemons included, and it cannot see
    /// or signal any other process. Without it only its process group is killed.
    pub pid_namespace: bool,
    /// Ends the invocation early (wirecheck was interrupted): its tree is killed.
    pub stop: Option<Stop>,
    /// What of the file system the agent may not see (needs the same privileges as
    /// `pid_namespace`).
    pub confine: Option<Confine>,
    /// With `pid_namespace`, when wirecheck runs as root: the agent runs as root of this user
    /// namespace, nobody on the host. Required then: a contained agent is never the host's
    /// root.
    pub unprivileged_root: Option<UnprivilegedRoot>,
    /// What its process tree may use (processes, memory, file size, open files):
    /// `fake_wireserver::limits`, a cgroup of its own where the machine allows.
    pub limits: Option<Limits>,
}

/// A private mount namespace for the agent: the whole file system is read-only, each folder
/// in `hide` is covered by an empty tmpfs, and `keep` (its own case folder, inside one of
/// them) is bound back in, writable, and made its working directory: the one place it can
/// write. With `pid_namespace`, `/proc` is mounted anew so it
/// lists only the agent's own processes. Its neighbours' case folders and pools, and the
/// results folder, are then out of its sight.
///
/// The agent execs without any capability (`contain::drop_capabilities`), root included, so it cannot
/// undo these mounts.
#[derive(Debug, Clone)]
pub struct Confine {
    pub hide: Vec<PathBuf>,
    pub keep: PathBuf,
}

/// A hidden folder: empty, and nothing can be written to it.
const HIDDEN_OPTIONS: &std::ffi::CStr = c"mode=555,size=64k,nr_inodes=64";

/// The agent's `/dev`: a tmpfs with only these device nodes of the host's bound in (and the
/// usual links), not the disks: a read-only mount does not stop writes to a device, and an
/// agent run as root owns `/dev/vda`.
/// No `/dev/tty`: the agent has no controlling terminal (it runs in a session of its own), so
/// it cannot type into the user's (TIOCSTI).
const DEVICES: [&std::ffi::CStr; 5] = [
    c"/dev/null",
    c"/dev/zero",
    c"/dev/full",
    c"/dev/random",
    c"/dev/urandom",
];
const DEV_LINKS: [(&std::ffi::CStr, &std::ffi::CStr); 4] = [
    (c"/proc/self/fd", c"/dev/fd"),
    (c"/proc/self/fd/0", c"/dev/stdin"),
    (c"/proc/self/fd/1", c"/dev/stdout"),
    (c"/proc/self/fd/2", c"/dev/stderr"),
];
const DEV_OPTIONS: &std::ffi::CStr = c"mode=755,size=64k,nr_inodes=64";

/// Something of the host's to bind into the agent's view after its own mounts cover the
/// original: a descriptor slot reserved before the fork, which the child fills with a handle
/// of its own namespace (one opened before the unshare belongs to the old namespace and
/// cannot be bound there) so that `source` (`/proc/self/fd/N`) names it.
struct Rebind {
    path: std::ffi::CString,
    source: std::ffi::CString,
    slot: std::os::fd::OwnedFd,
    directory: bool,
}

impl Rebind {
    fn new(path: &std::ffi::CStr, directory: bool) -> std::io::Result<Rebind> {
        use std::os::fd::AsRawFd as _;
        let mut flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC;
        if directory {
            flags |= rustix::fs::OFlags::DIRECTORY;
        }
        let slot = rustix::fs::open(path, flags, rustix::fs::Mode::empty())?;
        Ok(Rebind {
            path: path.to_owned(),
            source: std::ffi::CString::new(format!("/proc/self/fd/{}", slot.as_raw_fd()))
                .map_err(std::io::Error::other)?,
            slot,
            directory,
        })
    }

    /// In the child, in its new mount namespace, before anything covers `path`.
    ///
    /// # Safety
    /// Only between fork and exec: system calls only.
    unsafe fn refresh(&self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd as _;
        let mut flags = libc::O_PATH | libc::O_CLOEXEC;
        if self.directory {
            flags |= libc::O_DIRECTORY;
        }
        // SAFETY: system calls on a C string that lives through them.
        unsafe {
            let fresh = libc::open(self.path.as_ptr(), flags);
            if fresh < 0 || libc::dup3(fresh, self.slot.as_raw_fd(), libc::O_CLOEXEC) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::close(fresh);
        }
        Ok(())
    }

    /// Binds the handle over `path` (which must exist by now).
    ///
    /// # Safety
    /// Only between fork and exec: system calls only.
    unsafe fn bind(&self) -> std::io::Result<()> {
        // SAFETY: a system call on C strings that live through it.
        let r = unsafe {
            libc::mount(
                self.source.as_ptr(),
                self.path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

/// [`Confine`] prepared for the child: C strings and reserved handles, made before the fork.
struct Prepared {
    hide: Vec<std::ffi::CString>,
    /// `keep` and its ancestors, outermost first: made again inside whatever hides them.
    keep_path: Vec<std::ffi::CString>,
    keep: Rebind,
    devices: Vec<Rebind>,
}

impl Confine {
    fn prepare(&self) -> std::io::Result<Prepared> {
        use std::os::unix::ffi::OsStrExt as _;
        let c = |p: &Path| {
            std::ffi::CString::new(p.as_os_str().as_bytes())
                .map_err(|_| std::io::Error::other(format!("{} has a NUL byte", p.display())))
        };
        let mut keep_path: Vec<&Path> = self.keep.ancestors().collect();
        keep_path.reverse();
        Ok(Prepared {
            // Never a link: a mount follows it, and whoever made the link would choose what
            // gets covered (`/usr`, and no agent could start).
            hide: self
                .hide
                .iter()
                .filter(|p| !std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()))
                .map(|p| c(p))
                .collect::<std::io::Result<_>>()?,
            keep_path: keep_path
                .into_iter()
                .map(c)
                .collect::<std::io::Result<_>>()?,
            keep: Rebind::new(&c(&self.keep)?, true)?,
            // What the host lacks (a container without `/dev/tty`), the agent lacks too.
            devices: DEVICES
                .iter()
                .filter_map(|d| match Rebind::new(d, false) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    made => Some(made.map_err(|e| {
                        std::io::Error::other(format!("{}: {e}", d.to_string_lossy()))
                    })),
                })
                .collect::<std::io::Result<_>>()?,
        })
    }
}

impl Prepared {
    /// In the forked child, before the PID namespace: the private mount namespace.
    ///
    /// # Safety
    /// Only between fork and exec: system calls only.
    unsafe fn enter(&self) -> std::io::Result<()> {
        let check = |r: libc::c_int| {
            if r == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        };
        // SAFETY: system calls on C strings that live through them.
        unsafe {
            // Its own mounts, and its own host name and System V IPC (a neighbour's shared
            // memory and semaphores are out of its reach, and a host name it sets is its own).
            check(libc::unshare(
                libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC,
            ))?;
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            // Everything read-only, recursively: the agent may write its own case folder (made
            // writable again below) and nothing else, not the programs of its neighbours nor
            // wirecheck's own.
            check(set_mount_attr(
                c"/",
                libc::AT_RECURSIVE,
                MOUNT_ATTR_RDONLY,
                0,
            ))?;
            // Handles on what gets covered next, in this namespace.
            self.keep.refresh()?;
            for device in &self.devices {
                device.refresh()?;
            }
            check(libc::mount(
                c"none".as_ptr(),
                c"/dev".as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NOEXEC,
                DEV_OPTIONS.as_ptr().cast(),
            ))?;
            for device in &self.devices {
                let made = libc::open(
                    device.path.as_ptr(),
                    libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o666,
                );
                if made < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(made);
                device.bind()?;
            }
            for (target, link) in DEV_LINKS {
                check(libc::symlink(target.as_ptr(), link.as_ptr()))?;
            }
            for dir in &self.hide {
                let r = libc::mount(
                    c"none".as_ptr(),
                    dir.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    HIDDEN_OPTIONS.as_ptr().cast(),
                );
                // A folder that is not there hides nothing.
                if r != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOENT) {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for dir in &self.keep_path {
                let r = libc::mkdir(dir.as_ptr(), 0o755);
                if r != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
                    return Err(std::io::Error::last_os_error());
                }
            }
            self.keep.bind()?;
            // The case folder is the agent's to write (only its top mount: nothing is mounted
            // under it).
            check(set_mount_attr(&self.keep.path, 0, 0, MOUNT_ATTR_RDONLY))?;
            // Nothing can be planted in what hides the neighbours, nor in `/dev` (the agent's
            // own view only, but a writable one would look like a way through).
            for dir in &self.hide {
                libc::mount(
                    std::ptr::null(),
                    dir.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
                    HIDDEN_OPTIONS.as_ptr().cast(),
                );
            }
            check(libc::mount(
                std::ptr::null(),
                c"/dev".as_ptr(),
                std::ptr::null(),
                libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC,
                DEV_OPTIONS.as_ptr().cast(),
            ))?;
            // The old working directory is the hidden one: `..` from it would lead to the
            // neighbours.
            check(libc::chdir(self.keep.path.as_ptr()))?;
        }
        Ok(())
    }
}

/// `MOUNT_ATTR_RDONLY` of `<linux/mount.h>`.
const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// `struct mount_attr` of `<linux/mount.h>` (not in the libc crate).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `mount_setattr(2)` on `path` (Linux 5.12): changes only the attributes named, unlike a
/// remount, which would also try to clear the mount's locked `nosuid`/`nodev` and fail in a
/// user namespace.
///
/// # Safety
/// A system call; safe between fork and exec.
unsafe fn set_mount_attr(
    path: &std::ffi::CStr,
    flags: libc::c_int,
    set: u64,
    clear: u64,
) -> libc::c_int {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the path and the attribute block live through the call; the size is theirs.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) as libc::c_int
    }
}

/// In the agent's init (PID 1 of its namespace, in its private mount namespace): a `/proc`
/// that shows only the namespace's own processes.
///
/// # Safety
/// Only between fork and exec: system calls only.
unsafe fn mount_own_proc() -> std::io::Result<()> {
    // SAFETY: a system call on static C strings.
    let r = unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            // Read-only: an agent run as root keeps uid 0 without capabilities, and
            // `/proc/sys` checks only the uid (`kernel.core_pattern` would run its program as
            // the host's root).
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY,
            std::ptr::null(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Tells running invocations that wirecheck was interrupted (SIGINT, SIGTERM, SIGHUP).
#[derive(Debug, Clone)]
pub struct Stop(tokio::sync::watch::Receiver<Option<i32>>);

impl Stop {
    /// A stop signal and the sender that raises it (with the signal number).
    pub fn new() -> (tokio::sync::watch::Sender<Option<i32>>, Stop) {
        let (tx, rx) = tokio::sync::watch::channel(None);
        (tx, Stop(rx))
    }

    /// The signal that stopped the run, if one did.
    pub fn signal(&self) -> Option<i32> {
        *self.0.borrow()
    }

    /// Resolves once the run is stopped.
    pub async fn stopped(&self) -> i32 {
        let mut rx = self.0.clone();
        loop {
            if let Some(sig) = *rx.borrow_and_update() {
                return sig;
            }
            if rx.changed().await.is_err() {
                // The sender is gone without a stop: never resolves.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// How the invocation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    /// Killed by a signal it did not get from us.
    Signal(i32),
    /// Still running at the deadline: its process group was killed.
    KilledAtDeadline,
    /// wirecheck was interrupted by this signal while it ran: its tree was killed.
    Interrupted(i32),
    /// It could not be started.
    SpawnFailed(String),
    /// Its containment (namespaces, mounts, capabilities) could not be set up: the harness's
    /// failure, not the agent's; it never ran.
    ContainmentFailed(String),
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
            Exit::Interrupted(s) => format!("ended because wirecheck was interrupted (signal {s})"),
            Exit::SpawnFailed(e) => format!("could not be started: {e}"),
            Exit::ContainmentFailed(e) => format!("could not be contained: {e}"),
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
    /// When the deadline clock started: the agent's first attempt, else spawn plus the
    /// start-up allowance (or spawn, without an activity count).
    pub clock_started: Instant,
    pub ended: Instant,
    pub stdout: Captured,
    pub stderr: Captured,
    /// Its PID (the root of its process tree), where it started: the runner's lag watch
    /// keeps the stalls of that tree for its cases (`runner::lag`).
    pub pid: Option<u32>,
}

/// Runs the invocation to its end or its deadline. Never panics on agent behaviour.
pub async fn run(inv: &Invocation) -> Finished {
    let AgentCommand {
        cmd,
        tree,
        confine,
        setup_failed,
    } = match agent_command(inv) {
        Ok(prepared) => prepared,
        Err(exit) => return never_ran(exit),
    };
    let started = Instant::now();
    // Off the runtime's workers (spawning waits for the child's exec, containment set-up
    // included), on a thread that lives as long as the child (its parent-death signal). The
    // hook (and its write end) is dropped with the command: a read then sees the byte or the
    // end of the pipe, never blocks.
    let (mut child, _tether) = match crate::lifetime::spawn(cmd).await {
        Ok(spawned) => spawned,
        Err(e) => return not_started(inv, &e, setup_failed.as_ref(), started),
    };
    // The child has its own copy of the handle on its case folder.
    drop(confine);
    let pgid = child.id();
    let stdout = tokio::spawn(capture(child.stdout.take()));
    let stderr = tokio::spawn(capture(child.stderr.take()));

    let Waited {
        exit,
        clock_started,
        ended,
    } = wait_for_agent(&mut child, inv, started, pgid).await;

    // Children that inherited the pipes keep them open; give them a moment, then end them.
    let grace_end = tokio::time::Instant::now() + PIPE_GRACE;
    let stdout = collect(stdout, grace_end, pgid).await;
    let stderr = collect(stderr, grace_end, pgid).await;
    // Nothing of this invocation may outlive it (a leftover child would keep retrying
    // against the next scenario's fake). In a PID namespace the kernel saw to that, and the
    // group, its leader reaped, may be someone else's by now.
    if !inv.pid_namespace {
        kill_group(pgid);
    }
    // What is left in its cgroup (a daemon of an uncontained agent) goes too.
    if let Some(tree) = tree {
        let _ = tokio::task::spawn_blocking(move || tree.finish()).await;
    }
    // The agent never ran when its namespace's init could not start it.
    let exit = if containment_failed(setup_failed.as_ref()) {
        Exit::ContainmentFailed(format!(
            "its PID namespace's init could not start it ({})",
            exit.describe()
        ))
    } else {
        exit
    };

    Finished {
        exit,
        started,
        clock_started,
        ended,
        stdout,
        stderr,
        pid: pgid,
    }
}

/// The agent's command, ready to spawn, and what goes with it.
struct AgentCommand {
    cmd: Command,
    /// Its limits: what is left in its cgroup is ended once it is done.
    tree: Option<TreeLimits>,
    /// Its prepared mounts, held until it is spawned.
    confine: Option<std::sync::Arc<Prepared>>,
    /// The read end of the containment's marker pipe ([`contain_in_child`]), where there is
    /// containment.
    setup_failed: Option<std::fs::File>,
}

/// The command for `inv`, with its hooks registered in the order they must run; `Err`: it
/// cannot be run (the harness's failure, not the agent's).
fn agent_command(inv: &Invocation) -> Result<AgentCommand, Exit> {
    let mut cmd = Command::new(&inv.program);
    cmd.args(&inv.args)
        .current_dir(&inv.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so the whole tree can be killed at the deadline.
        .process_group(0)
        .kill_on_drop(true);
    // First of the hooks: its waiter, and with it the agent's PID namespace, dies with
    // wirecheck however wirecheck ends (crate::lifetime).
    crate::lifetime::die_with_wirecheck(&mut cmd);
    // Its limits: its cgroup joined before anything of its tree is forked (the waiter and the
    // init included, an allowance of their own), its rlimits set in the process that execs.
    let own_user_namespace = inv.netns.as_ref().is_some_and(NetNs::has_user_namespace);
    let tree = inv
        .limits
        .as_ref()
        .map(|l| TreeLimits::new(l, own_user_namespace))
        .transpose()
        .map_err(|e| Exit::ContainmentFailed(format!("cannot set up its limits: {e}")))?;
    let rlimits_last = tree.as_ref().map(|t| t.join(&mut cmd));
    for key in &inv.env_remove {
        cmd.env_remove(key);
    }
    for (k, v) in &inv.env {
        cmd.env(k, v);
    }
    if inv.pid_namespace && inv.unprivileged_root.is_none() && rustix::process::geteuid().is_root()
    {
        return Err(Exit::ContainmentFailed(
            "as root, a contained agent needs a user namespace of its own (it is never the host's root)"
                .into(),
        ));
    }
    let confine = inv
        .confine
        .as_ref()
        .map(Confine::prepare)
        .transpose()
        .map_err(|e| Exit::ContainmentFailed(format!("cannot prepare its mounts: {e}")))?
        .map(std::sync::Arc::new);
    let setup_failed = if inv.netns.is_some() || inv.pid_namespace || confine.is_some() {
        Some(contain_in_child(&mut cmd, inv, confine.clone())?)
    } else {
        None
    };
    // Last: only the process that execs gets here (the waiter and the init never return).
    if let Some(last) = rlimits_last {
        last.then_rlimits(&mut cmd);
    }
    Ok(AgentCommand {
        cmd,
        tree,
        confine,
        setup_failed,
    })
}

/// Registers the containment hook on `cmd` (its network namespace, its mounts, its PID
/// namespace) and returns the read end of its marker pipe.
fn contain_in_child(
    cmd: &mut Command,
    inv: &Invocation,
    confine: Option<std::sync::Arc<Prepared>>,
) -> Result<std::fs::File, Exit> {
    // A byte on this pipe says the spawn failed in setting up the containment, not in
    // exec: the spawn error alone (an errno) cannot tell the two apart.
    let (read, write) =
        cloexec_pipe().map_err(|e| Exit::ContainmentFailed(format!("no pipe: {e}")))?;
    let netns = inv.netns.clone();
    let pid_namespace = inv.pid_namespace;
    let agent_root = inv.unprivileged_root.clone();
    // SAFETY: between fork and exec the hook only makes system calls (setrlimit, setns,
    // unshare, mount, fork, waitpid, write, _exit: no allocation, no lock).
    unsafe {
        cmd.pre_exec(move || {
            use std::os::fd::AsRawFd as _;
            // The limit the agent would have had without wirecheck's raise (setrlimit only).
            fake_wireserver::fdlimit::restore_for_child();
            let contain = || -> std::io::Result<()> {
                if let Some(ns) = &netns {
                    ns.enter()?;
                }
                if let Some(c) = &confine {
                    c.enter()?;
                }
                if pid_namespace {
                    enter_pid_namespace(confine.is_some(), write.as_raw_fd(), agent_root.as_ref())?;
                }
                Ok(())
            };
            contain().inspect_err(|_| {
                libc::write(write.as_raw_fd(), b"!".as_ptr().cast(), 1);
            })
        });
    }
    // Read only once every writer is gone or has written, but never to block.
    rustix::fs::fcntl_setfl(&read, rustix::fs::OFlags::NONBLOCK)
        .map_err(|e| Exit::ContainmentFailed(format!("no marker pipe: {e}")))?;
    Ok(std::fs::File::from(read))
}

/// Whether the containment hook said on its marker pipe that it failed.
fn containment_failed(marker: Option<&std::fs::File>) -> bool {
    let mut byte = [0u8; 1];
    marker.is_some_and(|mut read| matches!(std::io::Read::read(&mut read, &mut byte), Ok(1)))
}

/// An invocation whose spawn failed (`e`): in its containment's set-up, or in the exec itself.
fn not_started(
    inv: &Invocation,
    e: &std::io::Error,
    setup_failed: Option<&std::fs::File>,
    started: Instant,
) -> Finished {
    let exit = if containment_failed(setup_failed) {
        Exit::ContainmentFailed(e.to_string())
    } else {
        let hint = if inv.unprivileged_root.is_some()
            && e.kind() == std::io::ErrorKind::PermissionDenied
        {
            " (started by root, the agent runs as nobody on the host: the program and \
             every folder above it must be readable and executable by others)"
        } else {
            ""
        };
        Exit::SpawnFailed(format!("{}: {e}{hint}", inv.program.display()))
    };
    Finished {
        exit,
        started,
        clock_started: started,
        ended: Instant::now(),
        stdout: Captured::default(),
        stderr: Captured::default(),
        pid: None,
    }
}

/// How waiting for the agent ended.
struct Waited {
    exit: Exit,
    /// When its deadline clock started.
    clock_started: Instant,
    /// When the wait ended, before anything of it was killed.
    ended: Instant,
}

/// Waits for the agent to exit, until its deadline or until wirecheck is stopped; at the
/// deadline or the stop its process group is killed.
async fn wait_for_agent(
    child: &mut tokio::process::Child,
    inv: &Invocation,
    started: Instant,
    pgid: Option<u32>,
) -> Waited {
    let waited = match &inv.stop {
        Some(stop) => {
            tokio::select! {
                waited = wait_with_deadline(child, inv, started) => Ok(waited),
                sig = stop.stopped() => Err(sig),
            }
        }
        None => Ok(wait_with_deadline(child, inv, started).await),
    };
    let ended = Instant::now();
    let (exit, clock_started) = match waited {
        Ok((Ok(Ok(status)), clock)) => {
            use std::os::unix::process::ExitStatusExt as _;
            let exit = match (status.code(), status.signal()) {
                (Some(code), _) => Exit::Code(code),
                (None, Some(sig)) => Exit::Signal(sig),
                (None, None) => Exit::Signal(0),
            };
            (exit, clock)
        }
        Ok((Ok(Err(e)), clock)) => (
            Exit::SpawnFailed(format!("waiting for it failed: {e}")),
            clock,
        ),
        Ok((Err(_elapsed), clock)) => {
            kill_group(pgid);
            let _ = child.wait().await;
            (Exit::KilledAtDeadline, clock)
        }
        Err(sig) => {
            kill_group(pgid);
            let _ = child.kill().await;
            (Exit::Interrupted(sig), started)
        }
    };
    Waited {
        exit,
        clock_started,
        ended,
    }
}

/// An invocation that ended before it started.
fn never_ran(exit: Exit) -> Finished {
    let now = Instant::now();
    Finished {
        exit,
        started: now,
        clock_started: now,
        ended: now,
        stdout: Captured::default(),
        stderr: Captured::default(),
        pid: None,
    }
}

/// A pipe whose ends are closed on exec: (read, write).
fn cloexec_pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd as _;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two slots it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and ours alone.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// In the forked child, before exec: a new PID namespace for the agent. The child (the
/// waiter, outside the namespace) forks its init (PID 1), which forks the agent (PID 2; the
/// one call that returns, to go on to exec). The init reaps orphans and, when the agent ends,
/// hands its wait status to the waiter over a pipe and exits: the kernel then ends everything
/// else in the namespace. The waiter ends exactly as the agent did (status or signal), so the
/// runner's view of the agent's exit is unchanged. The agent is not PID 1 itself, so signals,
/// `kill -SEGV $$` included, reach it as they would on a host.
///
/// # Safety
/// Only between fork and exec: system calls only.
unsafe fn enter_pid_namespace(
    own_proc: bool,
    marker: libc::c_int,
    agent_root: Option<&UnprivilegedRoot>,
) -> std::io::Result<()> {
    // SAFETY: system calls on our own processes and on local buffers.
    unsafe {
        if libc::unshare(libc::CLONE_NEWPID) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut status_pipe = [0 as libc::c_int; 2];
        if libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let [read_end, write_end] = status_pipe;
        let init = libc::fork();
        if init < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if init > 0 {
            keep_only(read_end);
            let init_status = wait_for(init);
            let mut agent_status = [0u8; 4];
            let got = libc::read(read_end, agent_status.as_mut_ptr().cast(), 4);
            end_like(if got == 4 {
                i32::from_ne_bytes(agent_status)
            } else {
                init_status
            });
        }
        // The init, PID 1: dies with the waiter (a deadline kill of the group, or wirecheck's
        // end, which the waiter dies with). A waiter that ended before this shows as a status
        // pipe nobody reads.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::close(read_end);
        if unread(write_end) {
            libc::_exit(125);
        }
        // Its failures are the containment's, not the agent's: said on the marker pipe, so
        // that its exit status is not taken for the agent's.
        let failed = || {
            libc::write(marker, b"!".as_ptr().cast(), 1);
            libc::_exit(125)
        };
        if own_proc && mount_own_proc().is_err() {
            failed();
        }
        let agent = libc::fork();
        if agent < 0 {
            failed();
        }
        if agent == 0 {
            libc::close(write_end);
            // Nobody on the host (root started it), then no capabilities and the system-call
            // filter (`fake_wireserver::contain`).
            if let Some(root) = agent_root {
                root.enter()?;
            }
            fake_wireserver::contain::lock_down()?;
            // A session of its own: no controlling terminal, so nothing it does reaches the
            // user's (TIOCSTI, `/dev/tty`). The PID namespace ends it, not a group kill.
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Nothing wirecheck inherited from its own caller (a directory handle would lead
            // out of the mount namespace, a pipe to another process) reaches the agent.
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC);
            return Ok(());
        }
        keep_only(write_end);
        loop {
            let mut status = 0;
            let pid = libc::waitpid(-1, &mut status, 0);
            if pid == agent {
                libc::write(write_end, status.to_ne_bytes().as_ptr().cast(), 4);
                libc::_exit(0);
            }
            if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                libc::_exit(125);
            }
        }
    }
}

/// Whether the pipe `write_end` belongs to has no reader left.
///
/// # Safety
/// A system call only.
unsafe fn unread(write_end: libc::c_int) -> bool {
    let mut fd = libc::pollfd {
        fd: write_end,
        events: 0,
        revents: 0,
    };
    // SAFETY: poll(2) on one descriptor of ours, not waiting.
    unsafe { libc::poll(&mut fd, 1, 0) == 1 && fd.revents & libc::POLLERR != 0 }
}

/// `CLOSE_RANGE_CLOEXEC` of `<linux/close_range.h>`: mark, do not close (std's exec-error pipe
/// must stay open until the exec).
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Closes every descriptor but `fd` (the agent's pipes and the exec-status pipe then close when
/// the agent's side does).
///
/// # Safety
/// System calls only.
unsafe fn keep_only(fd: libc::c_int) {
    let keep = fd;
    let fd = fd as libc::c_uint;
    // SAFETY: close_range(2), or close(2) one by one where the kernel predates it (5.9), on
    // our own descriptor table.
    unsafe {
        let below = fd == 0 || libc::syscall(libc::SYS_close_range, 0u32, fd - 1, 0u32) == 0;
        let above = libc::syscall(libc::SYS_close_range, fd + 1, u32::MAX, 0u32) == 0;
        if !(below && above) {
            let mut limit: libc::rlimit = std::mem::zeroed();
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                limit.rlim_cur.min(1 << 20) as libc::c_int
            } else {
                4096
            };
            for other in (0..max).filter(|&d| d != keep) {
                libc::close(other);
            }
        }
    }
}

/// The wait status of child `pid` (EINTR retried; 125 << 8 if waiting fails).
///
/// # Safety
/// System calls only.
unsafe fn wait_for(pid: libc::pid_t) -> libc::c_int {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return status;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 125 << 8;
        }
    }
}

/// Ends this process the way wait status `status` says a process ended: the same exit code,
/// or the same signal (without a core dump).
///
/// # Safety
/// System calls only; never returns.
unsafe fn end_like(status: libc::c_int) -> ! {
    // SAFETY: system calls on our own process.
    unsafe {
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut all);
            libc::sigaddset(&mut all, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &all, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        libc::_exit(125)
    }
}

/// Waits for the child until its deadline: `Err` when the deadline passed first. Also returns
/// when the deadline clock started.
async fn wait_with_deadline(
    child: &mut tokio::process::Child,
    inv: &Invocation,
    started: Instant,
) -> (
    Result<std::io::Result<std::process::ExitStatus>, tokio::time::error::Elapsed>,
    Instant,
) {
    let Some(activity) = &inv.activity else {
        return (
            tokio::time::timeout(inv.deadline, child.wait()).await,
            started,
        );
    };
    let before = activity.count();
    let latest_start = started + STARTUP_ALLOWANCE;
    // Until the first request (or the allowance's end), poll for it while waiting.
    let clock_started = loop {
        let now = Instant::now();
        if activity.count() > before {
            break now;
        }
        if now >= latest_start {
            break latest_start;
        }
        let slice = ACTIVITY_POLL.min(latest_start - now);
        match tokio::time::timeout(slice, child.wait()).await {
            Ok(status) => return (Ok(status), now.min(latest_start)),
            Err(_) => continue,
        }
    };
    let until = tokio::time::Instant::from_std(clock_started + inv.deadline);
    (
        tokio::time::timeout_at(until, child.wait()).await,
        clock_started,
    )
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
/// wirecheck executable first (`bin_dir`), then on `PATH`. As root, the `PATH` entry a contained
/// agent can run is preferred (it runs as nobody: a `python3` in root's own `~/.pyenv` is not
/// one), the first one found else. Where no executable file is found, the first file that is
/// there but cannot be run says why ([`Unresolved::NotExecutable`]).
pub fn resolve_program(name: &str, bin_dir: &Path) -> Result<PathBuf, Unresolved> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let candidates: Vec<PathBuf> = if name.contains('/') {
        vec![PathBuf::from(name)]
    } else {
        std::iter::once(bin_dir.join(name))
            .chain(std::env::split_paths(&path).map(|dir| dir.join(name)))
            .collect()
    };
    if runnable(&candidates[0]).is_ok() {
        return Ok(candidates[0].clone());
    }
    if !name.contains('/')
        && let Some(found) = on_path(name, &path, rustix::process::geteuid().is_root())
    {
        return Ok(found);
    }
    // Nothing runnable: the first file that is there says why it cannot be run.
    let unrunnable = candidates
        .into_iter()
        .find_map(|candidate| match runnable(&candidate) {
            Err(Some(why)) => Some(Unresolved::NotExecutable {
                path: candidate,
                why,
            }),
            _ => None,
        });
    Err(unrunnable.unwrap_or(Unresolved::NotFound))
}

/// `name` on `path` (a `PATH` value): the first runnable entry, or with `for_nobody` the
/// first that anyone may run, when there is one.
fn on_path(name: &str, path: &std::ffi::OsStr, for_nobody: bool) -> Option<PathBuf> {
    let found: Vec<PathBuf> = std::env::split_paths(path)
        .map(|dir| dir.join(name))
        .filter(|p| runnable(p).is_ok())
        .collect();
    found
        .iter()
        .find(|p| !for_nobody || runs_for_others(p))
        .or(found.first())
        .cloned()
}

/// Whether anyone may run `path`: every folder above it searchable by others, and the file
/// executable by others (ACLs aside).
fn runs_for_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| p.metadata().map_or(0, |m| m.permissions().mode());
    mode(path) & 0o001 != 0
        && path
            .ancestors()
            .skip(1)
            .filter(|d| !d.as_os_str().is_empty())
            .all(|d| mode(d) & 0o001 != 0)
}

/// Why [`resolve_program`] found no program to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// No file of that name where it was looked for.
    NotFound,
    /// A file of that name that cannot be run: where, and why.
    NotExecutable { path: PathBuf, why: &'static str },
}

/// `Ok` for an executable regular file; `Err(None)` when nothing is there, `Err(Some(why))`
/// when something is that cannot be run.
fn runnable(path: &Path) -> Result<(), Option<&'static str>> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = path.metadata().map_err(|_| None)?;
    if meta.is_dir() {
        Err(Some("a folder"))
    } else if !meta.is_file() {
        Err(Some("not a regular file"))
    } else if meta.permissions().mode() & 0o111 == 0 {
        Err(Some("not executable (no x permission bit; chmod +x it)"))
    } else {
        Ok(())
    }
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
            activity: None,
            netns: None,
            pid_namespace: false,
            stop: None,
            confine: None,
            unprivileged_root: None,
            limits: None,
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
    async fn the_deadline_clock_starts_at_the_first_request_not_at_spawn() {
        let dir = tempfile::tempdir().unwrap();
        let request = dir.path().join("first-request");
        // A slow starter: its "first request" comes after 3 s, it is done 0.5 s later. The
        // margins (1 s under the deadline from the request, 2 s over it from spawn) are wide:
        // this runs beside every other test on 2 loaded cores.
        let script = format!("sleep 3; touch {r}; sleep 0.5", r = request.display());
        let mut inv = sh(&script, Duration::from_millis(1500));
        let seen = request.clone();
        inv.activity = Some(Activity::new(move || u64::from(seen.exists())));
        let f = run(&inv).await;
        assert_eq!(
            f.exit,
            Exit::Code(0),
            "killed although it used 0.5 s of 1.5"
        );
        let clock = f.clock_started.duration_since(f.started);
        assert!(clock >= Duration::from_millis(2900), "{clock:?}");
        // Counted from spawn, the same deadline kills it.
        let mut inv = sh(&script, Duration::from_millis(1500));
        inv.activity = None;
        assert_eq!(run(&inv).await.exit, Exit::KilledAtDeadline);
        // An agent that sends at once gets the deadline from then, not the allowance too.
        let early = dir.path().join("early");
        let mut inv = sh(
            &format!("touch {}; sleep 5", early.display()),
            Duration::from_millis(500),
        );
        inv.activity = Some(Activity::new(move || u64::from(early.exists())));
        let f = run(&inv).await;
        assert_eq!(f.exit, Exit::KilledAtDeadline);
        let took = f.ended.duration_since(f.started);
        assert!(took < Duration::from_secs(3), "killed after {took:?}");
    }

    #[tokio::test]
    async fn an_agent_that_never_sends_a_request_is_killed_after_the_allowance() {
        let mut inv = sh("sleep 60", Duration::from_millis(200));
        inv.activity = Some(Activity::new(|| 0));
        let f = run(&inv).await;
        assert_eq!(f.exit, Exit::KilledAtDeadline);
        let took = f.ended.duration_since(f.started);
        assert!(
            took >= STARTUP_ALLOWANCE && took < STARTUP_ALLOWANCE + Duration::from_secs(5),
            "{took:?}"
        );
    }

    /// Root only (CI runs as root; the runner's tests cover the unprivileged way through a
    /// user namespace): the agent is PID 2 under an init of its own, and ends as it would on a
    /// host, exit status and signals alike.
    #[tokio::test]
    async fn in_its_own_pid_namespace_the_agent_ends_as_it_would_on_a_host() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let root = UnprivilegedRoot::new().unwrap();
        let contained = |script: &str| {
            let mut inv = sh(script, Duration::from_secs(20));
            inv.pid_namespace = true;
            inv.unprivileged_root = Some(root.clone());
            inv
        };
        let f = run(&contained("echo $$ $PPID; exit 3")).await;
        assert_eq!(f.exit, Exit::Code(3));
        assert_eq!(f.stdout.text(), "2 1\n");
        assert_eq!(
            run(&contained("kill -SEGV $$")).await.exit,
            Exit::Signal(libc::SIGSEGV)
        );
        let missing = {
            let mut inv = contained("");
            inv.program = "/nonexistent/agent".into();
            run(&inv).await.exit
        };
        assert!(matches!(missing, Exit::SpawnFailed(_)), "{missing:?}");
    }

    #[tokio::test]
    async fn a_containment_that_cannot_be_set_up_is_the_harnesss_failure_not_the_agents() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // A file cannot be hidden under a tmpfs: the mount fails in the child, before exec.
        let not_a_folder = dir.path().join("file");
        std::fs::write(&not_a_folder, "").unwrap();
        let keep = dir.path().join("case");
        std::fs::create_dir(&keep).unwrap();
        let mut inv = sh("exit 0", Duration::from_secs(20));
        inv.pid_namespace = true;
        inv.unprivileged_root = Some(UnprivilegedRoot::new().unwrap());
        inv.confine = Some(Confine {
            hide: vec![not_a_folder],
            keep,
        });
        let exit = run(&inv).await.exit;
        assert!(
            matches!(&exit, Exit::ContainmentFailed(why) if why.contains("Not a directory")),
            "{exit:?}"
        );
    }

    /// Root only: a caller that asks for a contained agent but gives it no user namespace gets
    /// a containment failure, never an agent run as the host's root.
    #[tokio::test]
    async fn a_contained_agent_is_never_run_as_the_hosts_root() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ran");
        let mut inv = sh(&format!("touch {}", ran.display()), Duration::from_secs(20));
        inv.pid_namespace = true;
        let exit = run(&inv).await.exit;
        assert!(matches!(exit, Exit::ContainmentFailed(_)), "{exit:?}");
        assert!(!ran.exists());
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

    /// As root, agents run as nobody: a program only root can reach (root's own `~/.pyenv`
    /// first on `PATH`) is passed over for one anyone can run.
    #[test]
    fn for_nobody_the_path_entry_anyone_can_run_is_preferred() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let private = dir.path().join("private");
        let public = dir.path().join("public");
        for (folder, mode) in [(&private, 0o700), (&public, 0o755)] {
            std::fs::create_dir(folder).unwrap();
            let program = folder.join("agent");
            std::fs::write(&program, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let path = std::env::join_paths([&private, &public]).unwrap();
        assert_eq!(on_path("agent", &path, false), Some(private.join("agent")));
        assert_eq!(on_path("agent", &path, true), Some(public.join("agent")));
        // Nothing anyone can run: the first one, whose exec then fails saying why.
        let only_private = std::env::join_paths([&private]).unwrap();
        assert_eq!(
            on_path("agent", &only_private, true),
            Some(private.join("agent"))
        );
    }

    #[test]
    fn programs_are_found_beside_wirecheck_then_on_path() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("my-agent");
        std::fs::write(&agent, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(resolve_program("my-agent", dir.path()), Ok(agent.clone()));
        assert!(resolve_program("sh", dir.path()).is_ok());
        assert_eq!(
            resolve_program("no-such-agent-xyz", dir.path()),
            Err(Unresolved::NotFound)
        );
        assert_eq!(
            resolve_program(agent.to_str().unwrap(), Path::new("/")),
            Ok(agent)
        );
    }

    #[test]
    fn a_program_that_is_there_but_cannot_run_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("my-agent");
        std::fs::write(&agent, "#!/bin/sh\n").unwrap();
        let not_executable = Err(Unresolved::NotExecutable {
            path: agent.clone(),
            why: "not executable (no x permission bit; chmod +x it)",
        });
        assert_eq!(resolve_program("my-agent", dir.path()), not_executable);
        assert_eq!(
            resolve_program(agent.to_str().unwrap(), Path::new("/")),
            not_executable
        );
        let folder = dir.path().to_str().unwrap();
        assert!(matches!(
            resolve_program(folder, Path::new("/")),
            Err(Unresolved::NotExecutable {
                why: "a folder",
                ..
            })
        ));
    }
}
