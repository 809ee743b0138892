//! Running the suite: which (agent, scenario) pairs run, a pre-flight check of the agents'
//! commands, then every pair in parallel (each with its own in-process fake on ephemeral ports
//! and its own case folder), judged by the checks into [`RunResults`].

mod artifacts;
pub mod attach;
pub mod case_root;
pub mod lag;
pub mod retry;
mod scenario_run;
mod slots;
pub mod start_watch;
pub mod timing;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::agent::template::{Placeholder, Values};
use crate::agent::{Action, AgentProfile, Capability, Source};
use crate::catalog::CheckId;
use crate::checks::Judgement;
use crate::diag::FileError;
use crate::disposition::{Disposition, HarnessError, Skip};
use crate::exec;
use crate::scenario::{Protocol, Scenario};
use crate::select::{CaseFilter, Partition};
use wirecheck_results::{
    AgentResults, CaseResult, NotOffered, RunResults, Timeline, UnclaimedFlow, Verdict,
};

pub use attach::in_process::ClosedPort;
pub use case_root::{CASE_ROOT_PREFIX, CASES_FOLDER, CaseRoot};
pub use start_watch::{NeverStarted, StartWatch};
pub use timing::{CASE_LIMIT_SECONDS, CaseTiming};

/// One scenario to run against one agent, with the cases selected for it: its checks', and
/// its snapshot case (`--snapshots`).
#[derive(Debug, Clone)]
pub struct Planned {
    pub profile: Arc<AgentProfile>,
    pub scenario: Arc<Scenario>,
    pub checks: Vec<CheckId>,
    /// Case `<scenario id>.snapshot.transcript` is selected: its transcript is compared when
    /// the pair runs, and it shares the pair's fate when it does not.
    pub snapshot: bool,
}

impl Planned {
    /// The pair's deadline and expected wait, from the scenario and the profile's fixed timing;
    /// `Err` says why it cannot be run in reasonable time.
    pub fn timing(&self) -> Result<CaseTiming, String> {
        timing::case_timing(&self.profile, &self.scenario)
    }
}

/// Every (agent, scenario) pair with at least one selected case, in a stable order: agents
/// as given, scenarios by id. With `snapshots`, each pair's snapshot case is selected by the
/// filter like any case (`--cases '*.snapshot.transcript'` selects only those). A scenario on
/// a flow the agent does not claim, with a guest it does not provision, or without one for an
/// agent that runs only in one, is not offered to it ([`not_offered`]; [`unclaimed_flows`]
/// counts them).
pub fn plan(
    profiles: &[Arc<AgentProfile>],
    scenarios: &[Arc<Scenario>],
    filter: &CaseFilter,
    partition: Option<Partition>,
    snapshots: bool,
) -> Vec<Planned> {
    let mut planned = Vec::new();
    for profile in profiles {
        for (i, scenario) in by_id(scenarios).into_iter().enumerate() {
            if partition.is_some_and(|p| !p.contains(i)) || !offered(profile, scenario) {
                continue;
            }
            if let Some(p) = selected_pair(profile, scenario, filter, snapshots) {
                planned.push(p);
            }
        }
    }
    planned
}

/// For each agent, the flows it does not claim that selected scenarios are on, with how many
/// scenarios and cases were not offered: counted over the whole plan (every partition), so
/// every part of a run says the same.
pub fn unclaimed_flows(
    profiles: &[Arc<AgentProfile>],
    scenarios: &[Arc<Scenario>],
    filter: &CaseFilter,
    snapshots: bool,
) -> Vec<UnclaimedFlow> {
    let mut out: Vec<UnclaimedFlow> = Vec::new();
    for profile in profiles {
        for scenario in by_id(scenarios) {
            let Some(flow) = not_offered(profile, scenario) else {
                continue;
            };
            let Some(p) = selected_pair(profile, scenario, filter, snapshots) else {
                continue;
            };
            let cases = p.checks.len() + usize::from(p.snapshot);
            match out
                .iter_mut()
                .find(|u| u.agent == profile.name && u.flow == flow)
            {
                Some(u) => {
                    u.scenarios += 1;
                    u.cases += cases;
                }
                None => out.push(UnclaimedFlow {
                    agent: profile.name.clone(),
                    flow,
                    scenarios: 1,
                    cases,
                }),
            }
        }
    }
    out
}

/// The scenarios by id: the order partitions and results follow.
fn by_id(scenarios: &[Arc<Scenario>]) -> Vec<&Arc<Scenario>> {
    let mut ordered: Vec<&Arc<Scenario>> = scenarios.iter().collect();
    ordered.sort_by(|a, b| a.id.cmp(&b.id));
    ordered
}

/// Whether the agent claims the scenario's flow: an agent is offered only its own flows.
pub fn offered(profile: &AgentProfile, scenario: &Scenario) -> bool {
    not_offered(profile, scenario).is_none()
}

/// Why the scenario is not offered to the agent, if it is not: a flow it does not claim, a
/// guest to an agent that does not claim `guest`, or no guest to an agent whose profile runs it
/// only in one (`[guest] only`).
pub fn not_offered(profile: &AgentProfile, scenario: &Scenario) -> Option<NotOffered> {
    if !profile.claims(scenario.agent.protocol.capability()) {
        return Some(match scenario.agent.protocol {
            Protocol::Json => NotOffered::Json,
            Protocol::Xml => NotOffered::Xml,
        });
    }
    match (scenario.guest.is_some(), profile.claims(Capability::Guest)) {
        (true, false) => Some(NotOffered::Guest),
        (false, true) if profile.guest.only => Some(NotOffered::WithoutGuest),
        _ => None,
    }
}

/// The pair with the cases `filter` selects of it, if any.
fn selected_pair(
    profile: &Arc<AgentProfile>,
    scenario: &Arc<Scenario>,
    filter: &CaseFilter,
    snapshots: bool,
) -> Option<Planned> {
    let checks: Vec<CheckId> = scenario
        .checks
        .iter()
        .copied()
        .filter(|c| filter.matches(&scenario.case_id(*c)))
        .collect();
    let snapshot = snapshots && filter.matches(&snapshot_case_id(scenario));
    (!checks.is_empty() || snapshot).then(|| Planned {
        profile: Arc::clone(profile),
        scenario: as_offered(profile, scenario),
        checks,
        snapshot,
    })
}

/// The scenario as the agent is offered it: a guest scenario's in-progress runs are the progress
/// an agent may report while it provisions, so one that does not claim in-progress reports
/// (cloud-init) is run on the terminal run alone.
pub fn as_offered(profile: &AgentProfile, scenario: &Arc<Scenario>) -> Arc<Scenario> {
    let progress = |r: &crate::scenario::Run| r.action == Action::InProgress;
    // Only where a terminal run remains: a scenario of progress alone is what it says.
    if scenario.guest.is_none()
        || profile.claims(Capability::InProgress)
        || !scenario.agent.runs.iter().any(progress)
        || scenario.agent.runs.iter().all(progress)
    {
        return Arc::clone(scenario);
    }
    let mut own = Scenario::clone(scenario);
    own.agent.runs.retain(|r| !progress(r));
    Arc::new(own)
}

/// Why a planned pair does not run at all (its cases are skipped, or declared unimplemented,
/// for this): a capability the agent does not claim, a scenario its attach mode cannot
/// arrange, or one that would only end at a fixed budget longer than a case may take.
/// (Whether the attach mode can run on this machine is [`not_run`].)
pub fn skip_reason(p: &Planned) -> Option<Skip> {
    Skip::unclaimed(&p.profile, &p.scenario)
        .or_else(|| attach::unsupported(p).map(Skip::CannotArrange))
        .or_else(|| p.timing().err().map(Skip::TooLong))
}

/// [`skip_reason`], or the attach mode cannot run on this machine ([`attach::unavailable`]).
pub fn not_run(p: &Planned, bin_dir: &Path) -> Option<Skip> {
    skip_reason(p).or_else(|| attach::unavailable(p, bin_dir).map(Skip::Unavailable))
}

/// Checks, before anything runs, that every command a planned scenario needs exists: a
/// missing program is a usage error (exit 2) naming the profile file, line and field.
pub fn preflight(planned: &[Planned], bin_dir: &Path) -> Result<(), FileError> {
    for p in planned {
        if not_run(p, bin_dir).is_some() {
            continue;
        }
        for run in &p.scenario.agent.runs {
            check_command(&p.profile, run.action, bin_dir)?;
        }
    }
    Ok(())
}

fn profile_error(
    profile: &AgentProfile,
    line: Option<usize>,
    field: &str,
    msg: String,
) -> FileError {
    FileError {
        file: match &profile.source {
            Source::File(p) => p.clone(),
            Source::AdHoc => PathBuf::from("--agent-cmd"),
        },
        line,
        column: None,
        field: match profile.source {
            Source::File(_) => Some(field.to_owned()),
            Source::AdHoc => None,
        },
        message: msg,
    }
}

/// Resolves the program of `action`'s command (expanding `{bin_dir}`).
pub fn check_command(
    profile: &AgentProfile,
    action: Action,
    bin_dir: &Path,
) -> Result<PathBuf, FileError> {
    let Some(command) = profile.commands.get(&action) else {
        return Err(profile_error(
            profile,
            None,
            &format!("commands.{action}"),
            format!("missing, but a selected scenario asks the agent for a `{action}` report"),
        ));
    };
    let program = command.template.program();
    let mut values = Values::default();
    values.set(Placeholder::BinDir, bin_dir.display().to_string());
    let Some(name) = values.render(program) else {
        // The program depends on per-case values; it is resolved when the case runs.
        return Ok(PathBuf::from(program.source()));
    };
    exec::resolve_program(&name, bin_dir).map_err(|why| {
        let message = match why {
            exec::Unresolved::NotFound => format!(
                "program {name:?} not found{} (the bundled reporter: cargo build --release --workspace; cloud-init and afterburn: scripts/install-agents.sh)",
                if name.contains('/') {
                    String::new()
                } else {
                    format!(" next to wirecheck ({}) or on PATH", bin_dir.display())
                }
            ),
            exec::Unresolved::NotExecutable { path, why } => {
                format!("program {name:?} cannot be run: {} is {why}", path.display())
            }
        };
        profile_error(profile, command.line, &command.field, message)
    })
}

/// Settings of one `wirecheck run`.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The results folder; artifacts go to `<out>/artifacts/<agent>/<scenario id>/`.
    pub out: PathBuf,
    pub jobs: usize,
    /// Where bundled agents are looked for (the wirecheck executable's folder).
    pub bin_dir: PathBuf,
    /// Where the run reports each pair done ([`crate::progress`]); `None`: nowhere.
    pub progress: Option<Arc<dyn crate::progress::RunProgress>>,
    /// Set by [`run`]: raised when wirecheck is interrupted.
    pub stop: Option<exec::Stop>,
    /// Set by [`run`]: the folder every case folder of this run is made in.
    pub case_root: Option<PathBuf>,
    /// Set by [`run`]: the folder holding every run's case folders (hidden, with this run's
    /// case folders and the results folder, from each agent but for its own case folder:
    /// `exec::Confine`).
    pub cases_parent: Option<PathBuf>,
    /// `--snapshots`: where each pair's transcript is compared with its accepted snapshot.
    pub snapshots: Option<SnapshotSettings>,
    /// Whether each agent ever got going (read after the run: [`StartWatch::never_started`]).
    pub starts: StartWatch,
    /// Write each pair's artifacts (`wirecheck prop` keeps only those of the smallest failing
    /// input: hundreds of generated cases share one scenario id).
    pub artifacts: bool,
    /// `--uncontained`: run url and proxy agents even where they cannot be contained (else
    /// such a run refuses to start: [`uncontained`]).
    pub allow_uncontained: bool,
}

/// `--snapshots DIR` and `--snapshots-strict`.
#[derive(Debug, Clone)]
pub struct SnapshotSettings {
    pub dir: PathBuf,
    /// A missing snapshot fails (CI), instead of being `informational` and written as new.
    pub strict: bool,
}

/// Scenarios run at the same time by default: [`JOBS_PER_CORE`] per core of the machine, at
/// most [`MAX_DEFAULT_JOBS`]. Agents mostly wait on protocol timers, so more scenarios than
/// cores run well; their start-ups compete for the CPU, which costs wall time but no verdict
/// (deadlines count from the agent's first attempt, and a machine too loaded to keep time is
/// reported as such, [`lag`]).
pub fn default_jobs() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cores * JOBS_PER_CORE).min(MAX_DEFAULT_JOBS)
}

pub const JOBS_PER_CORE: usize = 8;
pub const MAX_DEFAULT_JOBS: usize = 64;

/// What every run needs before its first pair: the results folder, this run's folder of case
/// folders (hidden from every agent but for its own case folder), containment, a runtime.
struct Prepared {
    settings: RunSettings,
    case_root: CaseRoot,
    uncontained: Option<String>,
    runtime: tokio::runtime::Runtime,
    stop_tx: tokio::sync::watch::Sender<Option<i32>>,
    stop: exec::Stop,
}

fn prepare(settings: &RunSettings, in_process: bool) -> std::io::Result<Prepared> {
    // The results folder exists from the start, so it can be hidden from every agent (one
    // could otherwise make it, and plant links for the writers to follow).
    std::fs::create_dir_all(&settings.out)?;
    // The shared folder, else (someone else made it) one of this user's own, which hides this
    // user's other runs just as well; the shared one is hidden from our agents either way.
    let parent = case_root::shared_cases_folder().or_else(|shared| {
        case_root::own_cases_folder()
            .map_err(|own| std::io::Error::other(format!("{shared}; {own}")))
    });
    let (cases_parent, case_root) = match parent {
        Ok(parent) => {
            // What runs that could not clean up (killed) left there goes first.
            case_root::remove_abandoned(&parent);
            fake_wireserver::limits::cgroup::remove_abandoned();
            let root = CaseRoot::create(&parent)?;
            (parent, root)
        }
        Err(e) => {
            eprintln!(
                "wirecheck: warning: {e}; this run's case folders go to a private temporary folder instead"
            );
            let root = CaseRoot::create(&std::env::temp_dir())?;
            (std::env::temp_dir().join(CASES_FOLDER), root)
        }
    };
    // Only this user (and the agents it runs) may enter: nothing an agent leaves in its case
    // folder (a set-uid copy of a shell, as root) is within another local user's reach.
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(case_root.path(), std::fs::Permissions::from_mode(0o700))?;
    }
    let uncontained =
        uncontained(in_process, settings.allow_uncontained).map_err(std::io::Error::other)?;
    if let Some(why) = &uncontained {
        eprintln!(
            "wirecheck: warning: running agents uncontained (--uncontained): {why}; url agents run in wirecheck's own namespaces, as its user, with only their process group killed, and proxy cases are skipped"
        );
    }
    warn_if_limits_are_weaker();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (stop_tx, stop) = exec::Stop::new();
    let settings = RunSettings {
        out: settings.out.canonicalize()?,
        stop: Some(stop.clone()),
        case_root: Some(case_root.path().to_path_buf()),
        cases_parent: Some(cases_parent),
        ..settings.clone()
    };
    Ok(Prepared {
        settings,
        case_root,
        uncontained,
        runtime,
        stop_tx,
        stop,
    })
}

/// Whether a run may start on this machine. `Ok(None)`: its agents are contained.
/// `Ok(Some(why))`: they cannot be, and the user chose to run them anyway (`--uncontained`).
/// `Err`: they cannot be and the user did not choose so: what is missing and how to get it.
/// Only url and proxy agents (`in_process`) are contained by the runner; sandbox agents by
/// `fake-wireserver sandbox --unprivileged`, which fails their cases where it cannot.
pub fn uncontained(in_process: bool, allow: bool) -> Result<Option<String>, String> {
    let Some(why) = in_process.then(crate::containment::unavailable).flatten() else {
        return Ok(None);
    };
    if allow {
        return Ok(Some(why));
    }
    Err(format!(
        "cannot contain the agents on this machine: {why}.\n\
         wirecheck runs url and proxy agents in namespaces of their own (user, network, PID, \
         mount), which needs user namespaces. To allow them: where \
         /proc/sys/user/max_user_namespaces is 0, `sysctl user.max_user_namespaces=15000`; \
         Ubuntu 24.04 refuses them to ordinary users only: run wirecheck as root, or \
         `sysctl kernel.apparmor_restrict_unprivileged_userns=0`; in a container, a seccomp \
         profile that allows unshare and clone with CLONE_NEWUSER (and a /proc that is not \
         masked).\n\
         Or pass --uncontained (WIRECHECK_UNCONTAINED=1) to run them uncontained: results.json, \
         the summary and report.html then say so."
    ))
}

/// Says once, as root, when agents cannot get a cgroup of their own here: an agent run as root
/// is then not held to its process limit (root is exempt from RLIMIT_NPROC), and its memory
/// limit holds per process, not for its whole tree (`fake_wireserver::limits`). Without root,
/// an agent's process limit holds in its user namespace either way.
fn warn_if_limits_are_weaker() {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    if let Some(why) = fake_wireserver::limits::cgroup::available() {
        eprintln!(
            "wirecheck: warning: agents get no cgroup of their own here ({why}): an agent run as root is not held to its profile's processes limit, and its memory limit holds per process"
        );
    }
}

/// Runs every planned pair and collects the results (the caller writes them).
pub fn run(planned: Vec<Planned>, settings: &RunSettings) -> std::io::Result<RunResults> {
    let started_wall = chrono::Utc::now();
    let started = Instant::now();
    let in_process = planned
        .iter()
        .any(|p| p.profile.attach != crate::agent::Attach::Sandbox);
    let Prepared {
        settings,
        case_root,
        uncontained,
        runtime,
        stop_tx,
        stop,
    } = prepare(settings, in_process)?;
    let progress = settings.progress.clone();
    if let Some(progress) = &progress {
        progress.started(planned.len());
    }
    let outcomes = runtime.block_on(async {
        let signals = tokio::spawn(raise_on_signal(stop_tx));
        let (lag, lag_task) = lag::LagWatch::start();
        // Longest first, so the run is not waiting on a long scenario started last. Each
        // pair's timing is worked out once: a debug build took 15 s over the sort's 5,000
        // comparisons of the seven-profile matrix, before any agent started.
        let waits: Vec<f64> = planned
            .iter()
            .map(|p| p.timing().map_or(0.0, |t| t.wall_planned()))
            .collect();
        let mut order: Vec<usize> = (0..planned.len()).collect();
        order.sort_by(|a, b| waits[*b].total_cmp(&waits[*a]));
        let tasks = slots::spawn_in_order(&order, settings.jobs, &stop, |i, stopped| {
            let p = planned[i].clone();
            let settings = settings.clone();
            let progress = progress.clone();
            let lag = lag.clone();
            async move {
                if let Some(sig) = stopped {
                    return skipped_cases(&p, interrupted_reason(sig, false));
                }
                let cases = scenario_run::run(&p, &settings, &lag).await;
                if let Some(progress) = &progress {
                    progress.pair_done(&p.profile.name, &p.scenario.id, &cases);
                }
                cases
            }
        })
        .await;
        let mut outcomes: Vec<Vec<CaseResult>> = vec![Vec::new(); planned.len()];
        for (task, i) in tasks.into_iter().zip(order) {
            outcomes[i] = match task.await {
                Ok(cases) => cases,
                Err(e) => failed_cases(&planned[i], &format!("the scenario task failed: {e}")),
            };
        }
        lag_task.abort();
        signals.abort();
        outcomes
    });
    if let Some(progress) = &progress {
        progress.finished();
    }
    // Every agent's tree is gone (each invocation ends with its PID namespace or process
    // group): only now is anything read back or written.
    drop(runtime);
    drop(case_root);

    let mut agents: Vec<AgentResults> = Vec::new();
    for (p, cases) in planned.iter().zip(outcomes) {
        match agents.iter_mut().find(|a| a.agent == p.profile.name) {
            Some(a) => a.cases.extend(cases),
            None => agents.push(AgentResults {
                agent: p.profile.name.clone(),
                cases,
            }),
        }
    }
    let mut results = crate::build_info::new_results(
        started_wall.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    );
    results.duration_ms = started.elapsed().as_millis() as u64;
    results.interrupted = stop.signal().map(|s| signal_name(s).to_owned());
    results.uncontained = uncontained;
    results.agents = agents;
    Ok(results)
}

/// Runs pairs made one at a time by the caller (`wirecheck prop`: a generated input becomes
/// an in-memory scenario), each through the same path as [`run`]'s (its own fake, case folder,
/// containment and checks), with one runtime, case root and lag watch for all of them.
pub struct PairRunner {
    prepared: Option<Prepared>,
    lag: lag::LagWatch,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl PairRunner {
    /// `in_process`: some pair will use the url or proxy attach mode (containment is checked).
    pub fn start(settings: &RunSettings, in_process: bool) -> std::io::Result<PairRunner> {
        let mut prepared = prepare(settings, in_process)?;
        let (stop_tx, _) = exec::Stop::new();
        let stop_tx = std::mem::replace(&mut prepared.stop_tx, stop_tx);
        let (lag, tasks) = {
            let _guard = prepared.runtime.enter();
            let signals = tokio::spawn(raise_on_signal(stop_tx));
            let (lag, lag_task) = lag::LagWatch::start();
            (lag, vec![signals, lag_task])
        };
        Ok(PairRunner {
            prepared: Some(prepared),
            lag,
            tasks,
        })
    }

    fn prepared(&self) -> &Prepared {
        self.prepared.as_ref().expect("the runner is not finished")
    }

    /// The settings every pair runs with (the results folder canonicalized).
    pub fn settings(&self) -> &RunSettings {
        &self.prepared().settings
    }

    /// Why url agents run uncontained on this machine, when they do.
    pub fn uncontained(&self) -> Option<&str> {
        self.prepared().uncontained.as_deref()
    }

    /// The signal that interrupted the run, once one did.
    pub fn interrupted(&self) -> Option<i32> {
        self.prepared().stop.signal()
    }

    /// Runs the pairs, at most `jobs` at a time; one result list per pair, in order.
    /// `artifacts`: keep their artifacts (pairs sharing a scenario id overwrite each other's).
    pub fn run_pairs(
        &self,
        pairs: &[Planned],
        jobs: usize,
        artifacts: bool,
    ) -> Vec<Vec<CaseResult>> {
        let prepared = self.prepared();
        let settings = RunSettings {
            artifacts,
            ..prepared.settings.clone()
        };
        prepared.runtime.block_on(async {
            let order: Vec<usize> = (0..pairs.len()).collect();
            let tasks = slots::spawn_in_order(&order, jobs, &prepared.stop, |i, stopped| {
                let p = pairs[i].clone();
                let settings = settings.clone();
                let lag = self.lag.clone();
                async move {
                    if let Some(sig) = stopped {
                        return skipped_cases(&p, interrupted_reason(sig, false));
                    }
                    scenario_run::run(&p, &settings, &lag).await
                }
            })
            .await;
            let mut outcomes = Vec::with_capacity(pairs.len());
            for (task, p) in tasks.into_iter().zip(pairs) {
                outcomes.push(match task.await {
                    Ok(cases) => cases,
                    Err(e) => failed_cases(p, &format!("the scenario task failed: {e}")),
                });
            }
            outcomes
        })
    }

    /// Ends the runtime (every agent's tree is gone after it) and removes the case folders.
    pub fn finish(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some(prepared) = self.prepared.take() {
            drop(prepared.runtime);
            drop(prepared.case_root);
        }
    }
}

impl Drop for PairRunner {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Raises `stop` at the first SIGINT, SIGTERM or SIGHUP (a closed terminal, a CI's cancel):
/// the agents are stopped and the results still written (crate::lifetime).
async fn raise_on_signal(stop: tokio::sync::watch::Sender<Option<i32>>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    let sig = tokio::select! {
        _ = int.recv() => libc::SIGINT,
        _ = term.recv() => libc::SIGTERM,
        _ = hup.recv() => libc::SIGHUP,
    };
    let _ = stop.send(Some(sig));
}

/// The signals that interrupt a run, with their names.
const INTERRUPTIONS: [(i32, &str); 3] = [
    (libc::SIGINT, "SIGINT"),
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGHUP, "SIGHUP"),
];

/// `SIGINT` for 2, `SIGTERM` for 15, `SIGHUP` for 1.
pub fn signal_name(sig: i32) -> &'static str {
    INTERRUPTIONS
        .iter()
        .find(|(n, _)| *n == sig)
        .map_or("a signal", |(_, name)| name)
}

/// The exit status of a run interrupted by `interrupted` (`RunResults::interrupted`): 130 for
/// SIGINT, 143 for SIGTERM, 129 for SIGHUP, as shells report them.
pub fn interrupted_exit_status(interrupted: &str) -> u8 {
    let sig = INTERRUPTIONS
        .iter()
        .find(|(_, name)| *name == interrupted)
        .map_or(libc::SIGINT, |(n, _)| *n);
    128 + sig as u8
}

/// Why a case has no verdict after an interruption.
pub(crate) fn interrupted_reason(sig: i32, while_running: bool) -> Skip {
    Skip::Interrupted {
        signal: signal_name(sig),
        while_running,
    }
}

/// Case title: `<scenario title>: <check title>`.
pub fn case_title(scenario: &Scenario, check: CheckId) -> String {
    format!("{}: {}", scenario.title, check.title())
}

/// `<scenario id>.snapshot.transcript`.
pub fn snapshot_case_id(scenario: &Scenario) -> String {
    format!("{}.{}", scenario.id, crate::snapshot::CHECK_ID)
}

/// The snapshot case's title.
pub fn snapshot_case_title(scenario: &Scenario) -> String {
    format!("{}: snapshot of what the agent emitted", scenario.name)
}

/// A selected case of a pair, as a pair that is not run reports it.
struct Selected {
    id: String,
    title: String,
    /// The capability its check needs (none for the snapshot case).
    needs: Option<crate::agent::Capability>,
}

/// The pair's selected cases: its checks', then its snapshot case.
fn selected(p: &Planned) -> Vec<Selected> {
    let checks = p.checks.iter().map(|c| Selected {
        id: p.scenario.case_id(*c),
        title: case_title(&p.scenario, *c),
        needs: crate::checks::get(*c).needs,
    });
    let snapshot = p.snapshot.then(|| Selected {
        id: snapshot_case_id(&p.scenario),
        title: snapshot_case_title(&p.scenario),
        needs: None,
    });
    checks.chain(snapshot).collect()
}

/// Every selected case of a pair that does not run: skipped for `skip`, or unimplemented
/// where the profile declares so for what the agent does not claim. An interrupted case the
/// agent does not claim (its scenario, or its check) reads as it does in a run that was not
/// interrupted: the interruption did not change its fate.
fn skipped_cases(p: &Planned, skip: Skip) -> Vec<CaseResult> {
    let interrupted = matches!(skip, Skip::Interrupted { .. });
    let unclaimed = Skip::unclaimed(&p.profile, &p.scenario);
    cases_not_run(p, |needs, id| {
        if interrupted {
            let uninterrupted = Disposition::of_case(&p.profile, id, unclaimed.clone(), needs);
            if !matches!(uninterrupted, Disposition::Run { .. }) {
                return uninterrupted;
            }
        }
        Disposition::of_case(&p.profile, id, Some(skip.clone()), None)
    })
}

/// Every selected case of a pair that could not be run because wirecheck's machinery failed.
fn harness_cases(p: &Planned, error: HarnessError) -> Vec<CaseResult> {
    cases_not_run(p, |_, _| Disposition::Harness(error.clone()))
}

fn cases_not_run<'a>(
    p: &'a Planned,
    disposition: impl Fn(Option<crate::agent::Capability>, &str) -> Disposition<'a>,
) -> Vec<CaseResult> {
    selected(p)
        .into_iter()
        .map(|c| {
            let disposition = disposition(c.needs, &c.id);
            let (verdict, reason) = disposition
                .not_run()
                .unwrap_or((Verdict::Skipped, String::new()));
            let mut case = uniform_case(p, c, verdict, reason);
            case.not_judged = disposition.not_judged();
            case
        })
        .collect()
}

/// Every selected case of a pair failed by one reason that is the agent's (it could not be
/// started, the scenario task failed), each graded by its declared deviation.
fn failed_cases(p: &Planned, reason: &str) -> Vec<CaseResult> {
    selected(p)
        .into_iter()
        .map(|c| {
            let (verdict, reason) = Disposition::grade(
                p.profile.deviation_for(&c.id),
                Verdict::Fail,
                Some(reason.to_owned()),
            );
            uniform_case(p, c, verdict, reason.unwrap_or_default())
        })
        .collect()
}

fn uniform_case(p: &Planned, case: Selected, verdict: Verdict, reason: String) -> CaseResult {
    CaseResult {
        id: case.id,
        title: case.title,
        scenario: p.scenario.name.clone(),
        verdict,
        reason: Some(reason),
        evidence: Vec::new(),
        duration_ms: 0,
        timeline: Timeline::default(),
        artifacts: None,
        not_judged: None,
        attempts: None,
    }
}

/// A judgement graded by the deviation the profile declares for the case, if any
/// ([`Disposition::grade`]).
pub fn apply_deviation(profile: &AgentProfile, case_id: &str, j: Judgement) -> Judgement {
    let (verdict, reason) = Disposition::grade(profile.deviation_for(case_id), j.verdict, j.reason);
    Judgement {
        // A declared deviation that turned the verdict into another one has judged the case.
        stalled: j.stalled && verdict == Verdict::Informational,
        verdict,
        reason,
        evidence: j.evidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(id: &str) -> Arc<Scenario> {
        let text = format!(
            "id = \"{id}\"\ntitle = \"t\"\nchecks = [\"report.state\", \"behaviour.exit\"]\n[agent]\naction = \"ready\"\n"
        );
        Arc::new(
            Scenario::from_toml_str(&text, Path::new("t.toml"))
                .unwrap()
                .remove(0),
        )
    }

    fn profile() -> Arc<AgentProfile> {
        Arc::new(AgentProfile::ad_hoc("true", &[], std::path::Path::new(".")).unwrap())
    }

    /// A guest scenario's in-progress run is progress the agent may report: one that claims no
    /// in-progress reports (cloud-init) is offered the terminal run alone, one that does both
    /// runs; a scenario without a guest keeps its runs and needs the capability.
    #[test]
    fn a_guests_progress_run_is_offered_only_to_agents_that_report_progress() {
        let guest = |extra: &str| {
            let text = format!(
                "id = \"g\"\ntitle = \"t\"\nchecks = [\"report.state\"]\n[agent]\nprotocol = \"xml\"\n[[agent.run]]\naction = \"in-progress\"\n[[agent.run]]\naction = \"ready\"\n{extra}"
            );
            Arc::new(
                Scenario::from_toml_str(&text, Path::new("g.toml"))
                    .unwrap()
                    .remove(0),
            )
        };
        let with_guest = guest("[guest]\novf_env = \"<x/>\"\n");
        let without = guest("");
        let agent = |caps: &str| {
            let text = format!(
                "name = \"a\"\ndescription = \"a\"\nattach = \"sandbox\"\ncapabilities = [{caps}]\n[commands]\nready = [\"true\"]\nin-progress = [\"true\"]\n"
            );
            AgentProfile::from_toml_str(&text, Path::new("a.toml")).unwrap()
        };
        let silent = agent("\"xml\", \"guest\"");
        let talkative = agent("\"xml\", \"guest\", \"in-progress\"");
        let actions = |s: &Scenario| s.agent.runs.iter().map(|r| r.action).collect::<Vec<_>>();
        assert_eq!(actions(&as_offered(&silent, &with_guest)), [Action::Ready]);
        assert_eq!(
            actions(&as_offered(&talkative, &with_guest)),
            [Action::InProgress, Action::Ready]
        );
        assert!(
            !with_guest
                .required_capabilities()
                .contains(&Capability::InProgress)
        );
        assert_eq!(
            actions(&as_offered(&silent, &without)),
            [Action::InProgress, Action::Ready]
        );
        assert!(
            without
                .required_capabilities()
                .contains(&Capability::InProgress)
        );
        // Progress alone stays what it is, and needs the capability.
        let text = "id = \"p\"\ntitle = \"t\"\nchecks = [\"report.state\"]\n[agent]\nprotocol = \"xml\"\naction = \"in-progress\"\n[guest]\novf_env = \"<x/>\"\n";
        let progress = Arc::new(
            Scenario::from_toml_str(text, Path::new("p.toml"))
                .unwrap()
                .remove(0),
        );
        assert_eq!(
            actions(&as_offered(&silent, &progress)),
            [Action::InProgress]
        );
        assert!(
            progress
                .required_capabilities()
                .contains(&Capability::InProgress)
        );
    }

    fn ids(planned: &[Planned]) -> Vec<String> {
        planned.iter().map(|p| p.scenario.id.clone()).collect()
    }

    #[test]
    fn partitions_split_scenarios_deterministically_and_completely() {
        let scenarios: Vec<Arc<Scenario>> = ["e", "a", "d", "b", "c"].map(scenario).into();
        let all = plan(
            &[profile()],
            &scenarios,
            &CaseFilter::default(),
            None,
            false,
        );
        assert_eq!(ids(&all), ["a", "b", "c", "d", "e"]);
        let one = plan(
            &[profile()],
            &scenarios,
            &CaseFilter::default(),
            Some("1/2".parse().unwrap()),
            false,
        );
        let two = plan(
            &[profile()],
            &scenarios,
            &CaseFilter::default(),
            Some("2/2".parse().unwrap()),
            false,
        );
        assert_eq!(ids(&one), ["a", "c", "e"]);
        assert_eq!(ids(&two), ["b", "d"]);
    }

    #[test]
    fn case_filters_select_checks_and_drop_empty_scenarios() {
        let scenarios = vec![scenario("a"), scenario("b")];
        let filter = CaseFilter::new(&["a.*".into()], &["*.behaviour.exit".into()]).unwrap();
        let planned = plan(&[profile()], &scenarios, &filter, None, false);
        assert_eq!(ids(&planned), ["a"]);
        assert_eq!(
            planned[0]
                .checks
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>(),
            ["report.state"]
        );
    }

    #[test]
    fn an_interrupted_pair_the_agent_does_not_claim_keeps_its_declared_deviation() {
        let text = "name = \"d\"\ndescription = \"d\"\ncapabilities = [\"json\"]\n\
                    [commands]\nready = [\"true\"]\n\
                    [reactions]\nretryable = [503]\ntransport_errors = \"retry\"\nstatus_403 = \"fatal\"\n\
                    [[deviation]]\ncases = \"f.*\"\nverdict = \"unimplemented\"\nreason = \"no failures\"\n";
        let profile = Arc::new(AgentProfile::from_toml_str(text, Path::new("d.toml")).unwrap());
        let failure = Arc::new(
            Scenario::from_toml_str(
                "id = \"f\"\ntitle = \"t\"\nchecks = [\"report.state\"]\n[agent]\naction = \"failure\"\nreason = \"r\"\n",
                Path::new("f.toml"),
            )
            .unwrap()
            .remove(0),
        );
        let planned = plan(&[profile], &[failure], &CaseFilter::default(), None, false);
        let interrupted = skipped_cases(&planned[0], interrupted_reason(libc::SIGINT, false));
        let uninterrupted = skipped_cases(&planned[0], skip_reason(&planned[0]).unwrap());
        assert_eq!(interrupted.len(), 1);
        assert_eq!(interrupted[0].verdict, Verdict::Unimplemented);
        assert_eq!(interrupted[0].reason, uninterrupted[0].reason);
        assert_eq!(
            interrupted[0].reason.as_deref(),
            Some(
                "known deviation (f.*): no failures; agent d does not claim \"failure\" (failure reports)"
            )
        );
    }

    #[test]
    fn an_interrupted_case_whose_check_the_agent_does_not_claim_keeps_its_deviation() {
        let text = "name = \"d\"\ndescription = \"d\"\ncapabilities = [\"json\"]\n\
                    [commands]\nready = [\"true\"]\n\
                    [reactions]\nretryable = [503]\ntransport_errors = \"retry\"\nstatus_403 = \"fatal\"\n\
                    [[deviation]]\ncases = \"*.kvp.*\"\nverdict = \"unimplemented\"\nreason = \"no kvp\"\n";
        let profile = Arc::new(AgentProfile::from_toml_str(text, Path::new("d.toml")).unwrap());
        let s = Arc::new(
            Scenario::from_toml_str(
                "id = \"k\"\ntitle = \"t\"\nchecks = [\"kvp.report\", \"report.state\"]\n[agent]\naction = \"ready\"\nprotocol = \"json\"\n",
                Path::new("k.toml"),
            )
            .unwrap()
            .remove(0),
        );
        let planned = plan(&[profile], &[s], &CaseFilter::default(), None, false);
        let cases = skipped_cases(&planned[0], interrupted_reason(libc::SIGINT, false));
        let got: Vec<(&str, Verdict, Option<wirecheck_results::NotJudged>)> = cases
            .iter()
            .map(|c| (c.id.as_str(), c.verdict, c.not_judged))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "k.report.state",
                    Verdict::Skipped,
                    Some(wirecheck_results::NotJudged::Interrupted)
                ),
                ("k.kvp.report", Verdict::Unimplemented, None),
            ]
        );
        assert_eq!(
            cases[1].reason.as_deref(),
            Some(
                "known deviation (*.kvp.*): no kvp; agent d does not claim \"kvp\" (the KVP PROVISIONING_REPORT)"
            )
        );
    }

    #[test]
    fn deviations_soften_failures_and_mark_unimplemented() {
        let text = r#"name = "d"
description = "d"
capabilities = ["json"]
[commands]
ready = ["true"]
[reactions]
retryable = [503]
transport_errors = "retry"
status_403 = "fatal"
[[deviation]]
cases = "x.*"
verdict = "non-strict"
reason = "known"
[[deviation]]
cases = "y.*"
verdict = "unimplemented"
reason = "never"
"#;
        let p = AgentProfile::from_toml_str(text, Path::new("d.toml")).unwrap();
        let fail = Judgement::fail("bad", vec![]);
        let softened = apply_deviation(&p, "x.report.state", fail.clone());
        assert_eq!(softened.verdict, Verdict::NonStrict);
        assert_eq!(
            softened.reason.as_deref(),
            Some("known deviation (x.*): known; observed: bad")
        );
        let pass = Judgement {
            verdict: Verdict::Pass,
            reason: None,
            evidence: vec![],
            stalled: false,
        };
        assert_eq!(
            apply_deviation(&p, "x.report.state", pass.clone()).verdict,
            Verdict::Pass
        );
        assert_eq!(
            apply_deviation(&p, "y.report.state", pass).verdict,
            Verdict::Unimplemented
        );
        assert_eq!(
            apply_deviation(&p, "z.report.state", fail).verdict,
            Verdict::Fail
        );
        // A timing the stalls left uncertain stays a stall under a non-strict deviation: the
        // case runs again, and its verdict never depends on the machine's load (graded
        // non-strict at once, it would fail a --strict run that a calm machine passes).
        let uncertain = Judgement {
            verdict: Verdict::Informational,
            reason: Some("not judged, the machine was too loaded to judge timing: late?".into()),
            evidence: vec![],
            stalled: true,
        };
        assert_eq!(
            apply_deviation(&p, "x.behaviour.budget", uncertain.clone()),
            uncertain
        );
    }
}
