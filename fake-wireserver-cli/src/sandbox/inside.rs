//! The inner half, running as the first process of the new namespaces: set them up, serve the
//! fake on the platform addresses, run COMMAND, write the artifacts.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};

use super::artifacts::{OutDir, Summary};
use super::{
    EXIT_SANDBOX_FAILED, EXIT_TIMEOUT, IMDS_ADDR, JOURNAL_FILE, NamespaceIds, PlatformHost,
    SandboxArgs, WIRESERVER_ADDR, error,
};
use super::{guest, refused, setup};
use fake_wireserver::contain::userns;
use fake_wireserver::endpoint::HOSTPLUGIN_PORT;
use fake_wireserver::limits::TreeLimits;
use fake_wireserver::sandbox::POOL_COPY_MAX;
use fake_wireserver::{Delivery, Fake, FakeConfig, Scenario};

/// Entries kept in memory for the journal written at the end (a run is finite; the fake's
/// default window is smaller).
const JOURNAL_CAPACITY: usize = 1_000_000;

/// How long COMMAND gets to finish after the sandbox was asked to stop, before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

pub(super) fn run(args: SandboxArgs, host: &str) -> i32 {
    match args.status_fd.map(take_status_fd).transpose() {
        Ok(pipe) => {
            let code = run_and_report(args, host);
            if let Some(mut pipe) = pipe {
                // The outer half reads this, then end of file when this process exits.
                let _ = write!(pipe, "{code}");
            }
            code
        }
        Err(e) => {
            error(format!("{e:#}"));
            EXIT_SANDBOX_FAILED
        }
    }
}

/// Adopts the inherited status pipe and keeps COMMAND from inheriting it further.
fn take_status_fd(fd: i32) -> anyhow::Result<std::fs::File> {
    use std::os::fd::{BorrowedFd, FromRawFd as _, OwnedFd};
    anyhow::ensure!(fd >= 0, "--status-fd {fd}: not a file descriptor");
    // SAFETY: only borrowed for this call; fcntl fails cleanly on a descriptor that is not open.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    rustix::io::fcntl_setfd(borrowed, rustix::io::FdFlags::CLOEXEC)
        .with_context(|| format!("--status-fd {fd}: not an open file descriptor"))?;
    // SAFETY: open (checked above), passed by the outer half for exactly this purpose, and
    // used by nothing else in this process.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn run_and_report(args: SandboxArgs, host: &str) -> i32 {
    // Own thread: the caller may already be inside a tokio runtime, and this one must be the
    // only runtime of that thread.
    let host = host.to_owned();
    let result = std::thread::spawn(move || run_inside(args, host_ids(&host)?))
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the sandbox thread panicked")));
    match result {
        Ok(code) => code,
        Err(e) => {
            error(format!("{e:#}"));
            EXIT_SANDBOX_FAILED
        }
    }
}

fn host_ids(host: &str) -> anyhow::Result<NamespaceIds> {
    NamespaceIds::decode(host)
        .with_context(|| format!("--inside-namespaces {host:?}: expected NET_INODE:MNT_INODE"))
}

fn run_inside(args: SandboxArgs, host: NamespaceIds) -> anyhow::Result<i32> {
    setup::verify_new_namespaces(host)?;
    // Before the private mounts: they could hide the folder or the scenario file.
    let out = OutDir::open(&args.out)?;
    let scenario = args
        .scenario
        .as_deref()
        .map(Scenario::from_file)
        .transpose()?;

    let lo = setup::configure_loopback().context("setting up the loopback interface")?;
    setup::mount_private_run(lo).context("mounting the private /run")?;
    setup::mount_private_shm().context("mounting the private /dev/shm")?;
    let pool_owner = if args.unprivileged || args.guest.is_some() {
        (userns::OUTSIDE_UID, userns::OUTSIDE_GID)
    } else {
        (0, 0)
    };
    setup::mount_private_hyperv(pool_owner).context("mounting the private /var/lib/hyperv")?;
    let guest = args
        .guest
        .as_deref()
        .map(fake_wireserver::guest::Guest::from_file)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--guest {e}"))?;
    // The host's users, before the guest's /etc hides them: what the guest adds is judged.
    let host_passwd = std::fs::read("/etc/passwd").unwrap_or_default();
    if let Some(g) = &guest {
        let exe = std::env::current_exe().context("cannot locate the fake-wireserver binary")?;
        guest::prepare(g, &exe).context("setting up the guest (--guest)")?;
    }
    for bind in &args.binds {
        setup::bind_mount(&bind.source, &bind.target).with_context(|| {
            format!("--bind {}:{}", bind.source.display(), bind.target.display())
        })?;
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let (outcome, journal, evicted, attempts) =
        runtime.block_on(serve_and_run(scenario, &args, lo))?;
    drop(runtime);

    let pools = out.copy_pools(Path::new(setup::HYPERV_DIR), POOL_COPY_MAX)?;
    for left in &pools.not_copied {
        eprintln!(
            "fake-wireserver sandbox: {}/{} {}; not copied to --out",
            setup::HYPERV_DIR,
            left.name,
            left.why
        );
    }
    out.write_journal(JOURNAL_FILE, &journal)?;
    let guest_users = guest
        .as_ref()
        .and_then(|_| guest::users_added(&host_passwd));
    let guest_calls = match guest {
        Some(_) => Some(
            out.copy_guest_calls(&guest::calls_file(), fake_wireserver::guest::CALLS_FILE_MAX)?,
        ),
        None => None,
    };
    let mut refused_hosts = args.refuse.clone();
    refused_hosts.sort();
    refused_hosts.dedup();
    out.write_summary(&Summary {
        command: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        exit_status: outcome.exit_status,
        signal: outcome.signal,
        timed_out: outcome.timed_out,
        stopped_when_done: outcome.stopped_when_done,
        time_scale: args.time_scale.unwrap_or_default().times(),
        agent_started_ms: outcome.started_ms,
        agent_exited_ms: outcome.exited_ms,
        wireserver: format!("{WIRESERVER_ADDR}:80"),
        imds: format!("{IMDS_ADDR}:80"),
        refused: refused_hosts
            .iter()
            .map(|h| h.as_str().to_owned())
            .collect(),
        refused_addresses: refused_hosts
            .iter()
            .flat_map(|h| h.addresses())
            .map(|a| a.to_string())
            .collect(),
        pools: pools.copied,
        pools_not_copied: pools.not_copied,
        journal_entries: journal.len(),
        journal_evicted: evicted,
        refused_attempts: attempts.attempts,
        refused_attempts_lost: attempts.lost,
        guest_calls,
        guest_users,
    })?;
    Ok(outcome.exit_status)
}

struct Outcome {
    exit_status: i32,
    signal: Option<i32>,
    timed_out: bool,
    stopped_when_done: bool,
    /// COMMAND's start and end on the fake's clock (the journal's `at_ms`): what the agent's
    /// timing is judged on, without the sandbox's own set-up and teardown.
    started_ms: Option<u64>,
    exited_ms: Option<u64>,
}

impl Outcome {
    fn from_status(status: ExitStatus, timed_out: bool, stopped_when_done: bool) -> Self {
        use std::os::unix::process::ExitStatusExt as _;
        let signal = status.signal();
        let exit_status = match (timed_out, status.code(), signal) {
            (true, _, _) => EXIT_TIMEOUT,
            (false, Some(code), _) => code,
            (false, None, Some(sig)) => 128 + sig,
            (false, None, None) => EXIT_SANDBOX_FAILED,
        };
        Outcome {
            exit_status,
            signal,
            timed_out,
            stopped_when_done,
            started_ms: None,
            exited_ms: None,
        }
    }
}

/// How often the journal is looked at for a terminal report (`--stop-after-report`).
const DONE_POLL: Duration = Duration::from_millis(200);

/// How often the journal (and the refused-host watch) is looked at for COMMAND's first
/// attempt (`--startup`).
const FIRST_REQUEST_POLL: Duration = Duration::from_millis(10);
/// How long the processes get after SIGTERM once the agent is done, before SIGKILL.
const DONE_KILL_GRACE: Duration = Duration::from_secs(5);

/// True when the journal holds a terminal health report the fake accepted (2xx): Ready, or
/// NotReady with a substatus other than `Provisioning` (the in-progress report).
pub(crate) fn has_terminal_report(journal: &[fake_wireserver::journal::Entry]) -> bool {
    journal.iter().any(|e| {
        let accepted = e.answer.status.is_some_and(|s| (200..300).contains(&s));
        let terminal = e.report.as_ref().is_some_and(|r| r.is_terminal());
        accepted && terminal
    })
}

/// Signals every process of this PID namespace but the sandbox itself (its `/proc` shows only
/// them: `unshare --mount-proc`): COMMAND's whole tree, daemons it forked included.
fn signal_all(sig: rustix::process::Signal) {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, sig);
        }
    }
}

/// COMMAND's outcome, the journal, how many entries the window dropped before it, and the
/// attempts on refused hosts (on `lo`, interface index `lo`).
async fn serve_and_run(
    scenario: Option<Scenario>,
    args: &SandboxArgs,
    lo: u32,
) -> anyhow::Result<(
    Outcome,
    Vec<fake_wireserver::journal::Entry>,
    u64,
    refused::Attempts,
)> {
    // A refused host gets no listener: its address stays on `lo`, so the kernel refuses the
    // connection (RST), as for a closed loopback port.
    let served =
        |host: PlatformHost, addr: SocketAddr| (!args.refuse.contains(&host)).then_some(addr);
    let mut config = FakeConfig::default()
        .wireserver(served(
            PlatformHost::Wireserver,
            SocketAddr::from((WIRESERVER_ADDR, 80)),
        ))
        .imds(served(
            PlatformHost::Imds,
            SocketAddr::from((IMDS_ADDR, 80)),
        ))
        .hostplugin(served(
            PlatformHost::Wireserver,
            SocketAddr::from((WIRESERVER_ADDR, HOSTPLUGIN_PORT)),
        ))
        // The whole run's journal is written at the end, unanswered requests included.
        .journal_capacity(JOURNAL_CAPACITY)
        .time_scale(args.time_scale.unwrap_or_default());
    if let Some(scenario) = scenario {
        config = config.scenario(scenario);
    }
    let listening: Vec<String> = PlatformHost::ALL
        .into_iter()
        .filter(|h| !args.refuse.contains(h))
        .flat_map(PlatformHost::addresses)
        .map(|a| a.to_string())
        .collect();
    let fake = Fake::start(config)
        .await
        .with_context(|| format!("cannot start the fake on {}", listening.join(", ")))?;

    // Watched from before COMMAND starts until it is gone.
    let watch = match args.refuse.is_empty() {
        true => None,
        false => Some(refused::RefusedWatch::start(
            lo,
            &args.refuse,
            fake.clock(),
        )?),
    };
    let outcome = run_command(args, &fake, watch.as_ref()).await;
    let attempts = watch.map(refused::RefusedWatch::stop).unwrap_or_default();
    let outcome = outcome?;

    let journal = settled_journal(&fake).await;
    let evicted = fake.journal_stats().evicted;
    // No --journal file here (the journal is written from the window at the end).
    fake.shutdown().await?;
    Ok((outcome, journal, evicted, attempts))
}

/// The journal once every answer is final: the fake records an answer after writing it, so
/// COMMAND can read its reply and exit before the entry says what it was. Waits at most
/// [`SETTLE_MAX`] (an answer delayed past COMMAND's end stays pending).
async fn settled_journal(fake: &Fake) -> Vec<fake_wireserver::journal::Entry> {
    let until = tokio::time::Instant::now() + SETTLE_MAX;
    loop {
        let journal = fake.journal();
        let pending = journal
            .iter()
            .any(|e| e.done_ms.is_none() && e.answer.kind.delivery() != Delivery::Never);
        if !pending || tokio::time::Instant::now() >= until {
            return journal;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Longest wait for the journal to settle after COMMAND is done.
const SETTLE_MAX: Duration = Duration::from_secs(3);

async fn run_command(
    args: &SandboxArgs,
    fake: &Fake,
    refused: Option<&refused::RefusedWatch>,
) -> anyhow::Result<Outcome> {
    let (program, rest) = args.command.split_first().context("no COMMAND given")?;
    // Handlers first: as the first process of its PID namespace, the sandbox would otherwise
    // ignore these signals; with them it can pass them on and still write the artifacts.
    let mut signals = Signals::install()?;

    let mut command = tokio::process::Command::new(program);
    command.args(rest);
    // COMMAND's clock runs at the fake's speed (nothing at the wall clock).
    let agent_time = fake_wireserver::clock::agent_env(fake.clock().scale())
        .map_err(|e| anyhow::anyhow!("--time-scale: {e}"))?;
    command.envs(agent_time);
    let tree = match &args.limits {
        Some(limits) => {
            fake_wireserver::limits::cgroup::remove_abandoned();
            let tree = TreeLimits::new(limits, false).context("cannot set up --limits")?;
            tree.join(&mut command).then_rlimits(&mut command);
            Some(tree)
        }
        None => None,
    };
    if args.unprivileged || args.guest.is_some() {
        // A guest's root is nobody on the host too, its users ids of their own, and keeps its
        // capabilities in its own namespace (`contain::lock_down_guest`).
        let guest = args.guest.is_some();
        let root = match guest {
            true => userns::UnprivilegedRoot::new_guest(),
            false => userns::UnprivilegedRoot::new(),
        }
        .context("cannot make COMMAND's user namespace")?;
        // SAFETY: between fork and exec, `enter` and the lock-downs only make system calls.
        unsafe {
            command.pre_exec(move || {
                root.enter()?;
                match guest {
                    true => fake_wireserver::contain::lock_down_guest(),
                    false => fake_wireserver::contain::lock_down(),
                }
            });
        }
    }
    let started_ms = fake.clock_ms();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => return Ok(not_started(program, &e)),
    };
    let ended = supervise(&mut child, args, (fake, refused), &mut signals).await?;
    // Whatever COMMAND left running goes too, before the journal is read and the artifacts
    // are written: nothing of it may touch them afterwards.
    signal_all(rustix::process::Signal::KILL);
    if let Some(tree) = tree {
        for limit in tree.reached() {
            eprintln!("fake-wireserver sandbox: COMMAND reached its {limit} limit (--limits)");
        }
        let _ = tokio::task::spawn_blocking(move || tree.finish()).await;
    }
    Ok(Outcome {
        started_ms: Some(started_ms),
        exited_ms: Some(ended.exited_ms),
        ..Outcome::from_status(ended.status, ended.timed_out, ended.stopped_when_done)
    })
}

/// The outcome of a COMMAND that could not be started, with the shell's exit codes.
fn not_started(program: &std::ffi::OsStr, e: &std::io::Error) -> Outcome {
    let code = if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    error(format!("cannot run {}: {e}", program.to_string_lossy()));
    Outcome {
        exit_status: code,
        signal: None,
        timed_out: false,
        stopped_when_done: false,
        started_ms: None,
        exited_ms: None,
    }
}

/// The signals the sandbox passes on to COMMAND, or only outlives.
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }
}

/// How COMMAND ended, as [`supervise`] saw it.
struct Ended {
    status: ExitStatus,
    /// On the fake's clock.
    exited_ms: u64,
    timed_out: bool,
    stopped_when_done: bool,
}

/// `--timeout`, counted from the first attempt (a request, or a connection to a refused host)
/// when `--startup` gives an allowance before it.
struct Timeout {
    limit: Option<Duration>,
    startup: Option<Duration>,
    spawned: tokio::time::Instant,
    /// --startup: the clock restarts at the first attempt (seen within one `FIRST_REQUEST_POLL`,
    /// so never early).
    clock_started: bool,
    timed_out: bool,
}

impl Timeout {
    fn new(args: &SandboxArgs) -> Self {
        let startup = args.startup.map(Duration::from_secs_f64);
        Timeout {
            limit: args.timeout.map(Duration::from_secs_f64),
            startup,
            spawned: tokio::time::Instant::now(),
            clock_started: startup.is_none(),
            timed_out: false,
        }
    }

    /// The deadline before the clock restarts: the start-up allowance, then the limit.
    fn first_deadline(&self) -> tokio::time::Sleep {
        tokio::time::sleep(
            self.limit
                .map_or(Duration::MAX / 4, |t| t + self.startup.unwrap_or_default()),
        )
    }

    /// One look at the journal for COMMAND's first request (or whether it has `attempted` a
    /// refused host: its first attempt all the same).
    fn poll_first_request(
        &mut self,
        fake: &Fake,
        attempted: bool,
        deadline: Pin<&mut tokio::time::Sleep>,
    ) {
        // The clock starts at the first attempt or at the end of the start-up
        // allowance, whichever comes first.
        let now = tokio::time::Instant::now();
        let stats = fake.journal_stats();
        if now >= self.spawned + self.startup.unwrap_or_default() {
            self.clock_started = true;
        } else if stats.entries > 0 || stats.evicted > 0 || attempted {
            self.clock_started = true;
            deadline.reset(now + self.limit.unwrap_or(Duration::MAX / 4));
        }
    }
}

/// --stop-after-report: poll for the terminal report, then wait the grace period, then stop.
struct StopWhenDone {
    /// The grace period, in seconds; `None` without --stop-after-report.
    after: Option<f64>,
    done_at: Option<tokio::time::Instant>,
    stopped: bool,
}

impl StopWhenDone {
    /// One look at the journal for the terminal report, or at the clock for the end of the
    /// grace period.
    fn poll(&mut self, fake: &Fake, done_kill: Pin<&mut tokio::time::Sleep>) {
        let now = tokio::time::Instant::now();
        match self.done_at {
            None if has_terminal_report(&fake.journal()) => {
                let grace = Duration::from_secs_f64(self.after.unwrap_or(0.0));
                self.done_at = Some(now + grace);
            }
            Some(at) if now >= at => {
                self.stopped = true;
                signal_all(rustix::process::Signal::TERM);
                done_kill.reset(now + DONE_KILL_GRACE);
            }
            _ => {}
        }
    }
}

/// Waits for COMMAND to exit: passes on the sandbox's SIGTERM, and stops COMMAND on
/// `--timeout` or once done (`--stop-after-report`).
async fn supervise(
    child: &mut tokio::process::Child,
    args: &SandboxArgs,
    (fake, refused): (&Fake, Option<&refused::RefusedWatch>),
    signals: &mut Signals,
) -> anyhow::Result<Ended> {
    let pid = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32));
    let pass_on = |sig: rustix::process::Signal| {
        if let Some(pid) = pid {
            // The child may just have exited; nothing to do then.
            let _ = rustix::process::kill_process(pid, sig);
        }
    };

    let mut timeout = Timeout::new(args);
    let deadline = timeout.first_deadline();
    tokio::pin!(deadline);
    let mut first_request = tokio::time::interval(FIRST_REQUEST_POLL);
    let mut stopping = false;
    let grace = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(grace);
    let mut poll = tokio::time::interval(DONE_POLL);
    let mut done = StopWhenDone {
        after: args.stop_after_report,
        done_at: None,
        stopped: false,
    };
    let done_kill = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(done_kill);

    let (status, exited_ms) = loop {
        tokio::select! {
            status = child.wait() => break (status.context("cannot wait for COMMAND")?, fake.clock_ms()),
            () = &mut deadline, if timeout.limit.is_some() && !timeout.timed_out => {
                error(format!(
                    "COMMAND still running after --timeout {}s; killing it",
                    timeout.limit.unwrap_or_default().as_secs_f64()
                ));
                timeout.timed_out = true;
                let _ = child.start_kill();
            }
            _ = first_request.tick(), if !timeout.clock_started && !timeout.timed_out => {
                let attempted = refused.is_some_and(|w| w.seen() > 0);
                timeout.poll_first_request(fake, attempted, deadline.as_mut());
            }
            Some(()) = signals.terminate.recv() => {
                pass_on(rustix::process::Signal::TERM);
                if !stopping {
                    stopping = true;
                    grace.as_mut().reset(tokio::time::Instant::now() + STOP_GRACE);
                }
            }
            // A terminal sends these to the whole foreground process group, COMMAND included:
            // only make sure the sandbox outlives COMMAND.
            Some(()) = signals.interrupt.recv() => {}
            Some(()) = signals.hangup.recv() => {}
            () = &mut grace, if stopping => {
                error("COMMAND did not stop after SIGTERM; killing it");
                let _ = child.start_kill();
            }
            _ = poll.tick(), if done.after.is_some() && !done.stopped && !timeout.timed_out => {
                done.poll(fake, done_kill.as_mut());
            }
            () = &mut done_kill, if done.stopped => {
                error("COMMAND did not stop after SIGTERM once done; killing it");
                signal_all(rustix::process::Signal::KILL);
                let _ = child.start_kill();
            }
        }
    };
    Ok(Ended {
        status,
        exited_ms,
        timed_out: timeout.timed_out,
        stopped_when_done: done.stopped,
    })
}
