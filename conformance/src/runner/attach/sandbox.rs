//! `attach = "sandbox"`: for agents that cannot be pointed anywhere (afterburn), each scenario
//! runs as `fake-wireserver sandbox --scenario <the [fake] table> --out <case>/sandbox
//! --timeout <deadline> -- <agent argv>`. Inside its network and mount namespaces the fake
//! answers on the platform's addresses, so the placeholders are `http://168.63.129.16`,
//! `http://169.254.169.254` and `/var/lib/hyperv/.kvp_pool_1`. Afterwards the journal
//! (`journal.jsonl`), the pool copies (`.kvp_pool_N`) and the summary (`sandbox.json`) are read
//! back from `--out`. A scenario's refused wireserver or IMDS (`[agent] wireserver` / `imds` =
//! "closed") is the sandbox's `--refuse`: the address stays, nothing listens on it.
//!
//! The agent runs `--unprivileged`: root of a user namespace of its own, nobody on the host,
//! without capabilities, under the agent system-call filter. Its `{case_dir}` is
//! `/run/wirecheck-case` inside the sandbox, the case folder's `agent/` (handed to nobody, as
//! are its private folders); the case folder itself, with the sandbox's scenario and `--out`,
//! is root's, so the agent cannot rewrite the journal it is judged by.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_wireserver::clock::AgentClock;
use fake_wireserver::documents::Documents;
use fake_wireserver::journal::Entry;
use serde::Deserialize;

use super::agent_file::{POOL_READ_MAX, read_agent_file};
use super::{Endpoints, Session, SessionError, agent_invocation, record};
use crate::agent::{Action, Done, HealthReporting};
use crate::disposition::{CannotArrange, Unavailable};
use crate::exec::{self, Exit, Finished, Invocation};
use crate::observe::{RefusedAttempt, RunRecord, Service};
use crate::runner::{CaseTiming, Planned, RunSettings};
use crate::scenario::Target;
use fake_wireserver::contain::userns;
use fake_wireserver::sandbox::PlatformHost;

/// The sandbox binary (a workspace binary, found next to wirecheck, else on PATH).
const FAKE_BINARY: &str = "fake-wireserver";
/// The pool file agents write inside the sandbox.
const POOL_PATH: &str = "/var/lib/hyperv/.kvp_pool_1";
/// Its copy in `--out`.
const POOL_COPY: &str = ".kvp_pool_1";
/// The agent's own folder in the case folder (nobody's), and where the sandbox binds it: the
/// agent's `{case_dir}`.
const AGENT_FOLDER: &str = "agent";
pub const AGENT_CASE_DIR: &str = "/run/wirecheck-case";
/// Time the sandbox gets beyond the agent's deadline to set up, kill and write its files.
const SANDBOX_GRACE: Duration = Duration::from_secs(15);

/// Seconds the sandbox may take to notice a terminal report (it polls its journal).
const DONE_POLL_SLACK: f64 = 0.5;

/// What `sandbox.json` says about the run (the fields the runner needs).
#[derive(Debug, Deserialize)]
struct Summary {
    exit_status: i32,
    signal: Option<i32>,
    timed_out: bool,
    /// `--stop-after-report` ended the agent (older sandboxes do not write it).
    #[serde(default)]
    stopped_when_done: bool,
    /// Pool files the sandbox refused to copy (a link, not a regular file, over its cap).
    #[serde(default)]
    pools_not_copied: Vec<NotCopied>,
    /// Lines the sandbox wrote to `journal.jsonl` (older sandboxes do not say).
    #[serde(default)]
    journal_entries: Option<usize>,
    /// Requests the sandbox's journal window dropped before it was written (older: none said).
    #[serde(default)]
    journal_evicted: u64,
    /// The hosts the sandbox left unserved (`--refuse`), by name.
    #[serde(default)]
    refused: Vec<String>,
    /// The agent's attempts on a refused host, when each SYN came on the fake's clock, and
    /// how many the sandbox's watch could not keep (older sandboxes do not say).
    #[serde(default)]
    refused_attempts: Vec<SummaryAttempt>,
    #[serde(default)]
    refused_attempts_lost: u64,
    /// The agent's start and exit on the fake's clock (older sandboxes do not say).
    #[serde(default)]
    agent_started_ms: Option<u64>,
    #[serde(default)]
    agent_exited_ms: Option<u64>,
    /// In a guest: the users it has after the run that the host has not (absent: its
    /// `/etc/passwd` could not be read).
    #[serde(default)]
    guest_users: Option<Vec<String>>,
}

/// One of `sandbox.json`'s `refused_attempts`.
#[derive(Debug, Deserialize)]
struct SummaryAttempt {
    at_ms: u64,
    /// `wireserver` or `imds` ([`PlatformHost::as_str`]).
    host: String,
    /// `address:port`.
    address: String,
}

impl Summary {
    /// Why the case is not judged when the sandbox's watch lost attempts on a refused host: a
    /// list with gaps would pass a loop for shorter than it was (an agent that floods a
    /// refused host loses its late attempts in the flood).
    fn refused_lost(&self) -> Option<String> {
        (self.refused_attempts_lost > 0).then(|| {
            format!(
                "the sandbox's watch of the refused hosts lost {} of the agent's connection attempts, so its retry loop is not whole and the case is not judged",
                self.refused_attempts_lost
            )
        })
    }

    /// The agent's attempts on refused hosts, by service: the HostGAPlugin's port on the
    /// wireserver's address is the plugin's, not the wireserver's (as in the journal).
    fn refused_attempts(&self) -> Vec<RefusedAttempt> {
        let plugin = format!(
            "{}:{}",
            fake_wireserver::sandbox::WIRESERVER_ADDR,
            fake_wireserver::endpoint::HOSTPLUGIN_PORT
        );
        let service = |a: &SummaryAttempt| match a.host.as_str() {
            _ if a.address == plugin => Service::Other,
            h if h == PlatformHost::Wireserver.as_str() => Service::Wireserver,
            h if h == PlatformHost::Imds.as_str() => Service::Imds,
            _ => Service::Other,
        };
        self.refused_attempts
            .iter()
            .map(|a| RefusedAttempt {
                at_ms: a.at_ms,
                service: service(a),
            })
            .collect()
    }

    /// Whether the journal read back is the whole of what the agent sent. A journal with fewer
    /// lines than the sandbox wrote lost entries on the way (a harness error: nothing read from
    /// it can be trusted); one whose window dropped requests the agent sent is not judged, as
    /// in process (`in_process`: what a check needs may be gone).
    fn journal_whole(&self, read: usize) -> Result<Option<String>, SessionError> {
        if let Some(written) = self.journal_entries
            && written != read
        {
            return Err(SessionError::Harness(format!(
                "the sandbox wrote {written} journal entries but {read} were read back: the journal lost entries, so nothing is judged from it"
            )));
        }
        Ok((self.journal_evicted > 0).then(|| {
            format!(
                "the agent sent more requests than the sandbox's journal keeps; the oldest {} were dropped, so the case is not judged",
                self.journal_evicted
            )
        }))
    }

    /// Why the case is not judged when the sandbox did not copy the agent's pool file.
    fn pool_not_copied(&self) -> Option<String> {
        self.pools_not_copied
            .iter()
            .find(|n| n.name == POOL_COPY)
            .map(|n| {
                format!(
                    "after the agent ran, its pool file {POOL_PATH} {}, so the sandbox did not copy it and the case is not judged",
                    n.why
                )
            })
    }

    /// How the agent ended, as the sandbox saw it; `Err` when it could not be started in the
    /// sandbox (its last output, in `finished`, says why).
    fn agent_exit(&self, finished: &Finished) -> Result<Exit, SessionError> {
        Ok(match *self {
            Summary {
                timed_out: true, ..
            } => Exit::KilledAtDeadline,
            Summary {
                stopped_when_done: true,
                ..
            } => Exit::StoppedWhenDone,
            Summary {
                signal: Some(sig), ..
            } => Exit::Signal(sig),
            Summary {
                exit_status: status @ (126 | 127),
                ..
            } => {
                return Err(SessionError::Agent(format!(
                    "the agent could not be started in the sandbox (exit status {status}): {}",
                    finished.stderr.text().lines().last().unwrap_or_default()
                )));
            }
            Summary { exit_status, .. } => Exit::Code(exit_status),
        })
    }

    /// The sandbox left unserved exactly the hosts it was asked to refuse.
    fn refused_as_asked(&self, refused: &[PlatformHost]) -> Result<(), SessionError> {
        let asked: Vec<&str> = refused.iter().map(|h| h.as_str()).collect();
        if self.refused != asked {
            return Err(SessionError::Harness(format!(
                "the sandbox was asked to refuse {asked:?} but says it refused {:?}",
                self.refused
            )));
        }
        Ok(())
    }
}

/// One entry of `sandbox.json`'s `pools_not_copied`.
#[derive(Debug, Deserialize)]
struct NotCopied {
    name: String,
    why: String,
}

/// The case folder's scratch copy of a private folder (`/var/log` → `<case>/private/var/log`).
fn private_dir(case_dir: &Path, dir: &Path) -> PathBuf {
    let relative: PathBuf = dir.components().skip(1).collect();
    case_dir.join("private").join(relative)
}

/// The platform hosts the scenario wants refused (`[agent] wireserver` / `imds` = "closed"):
/// the sandbox leaves their addresses on its `lo` with nothing listening (`--refuse`), so the
/// agent's connection is refused as a closed loopback port refuses a url agent's.
fn refused_hosts(p: &Planned) -> Vec<PlatformHost> {
    let agent = &p.scenario.agent;
    [
        (agent.wireserver, PlatformHost::Wireserver),
        (agent.imds, PlatformHost::Imds),
    ]
    .into_iter()
    .filter(|(target, _)| *target == Target::Closed)
    .map(|(_, host)| host)
    .collect()
}

/// True when the scenario's runs are in-progress then ready and the agent's in-progress command
/// goes on to Ready by itself: one invocation plays both runs.
fn one_invocation_for_two(p: &Planned) -> bool {
    let actions: Vec<Action> = p.scenario.agent.runs.iter().map(|r| r.action).collect();
    p.profile.in_progress_continues_to_ready && actions == [Action::InProgress, Action::Ready]
}

pub fn unsupported(p: &Planned) -> Option<CannotArrange> {
    let scenario = &*p.scenario;
    // The sandbox's own limit first: only what it could run is the agent's to refuse.
    if scenario.agent.runs.len() > 1 && !one_invocation_for_two(p) {
        return Some(CannotArrange::InvocationsInSandbox(
            scenario.agent.runs.len(),
        ));
    }
    if p.profile.in_progress_continues_to_ready
        && !one_invocation_for_two(p)
        && scenario
            .agent
            .runs
            .iter()
            .any(|r| r.action == Action::InProgress)
    {
        return Some(CannotArrange::InProgressAlwaysGoesOn {
            agent: p.profile.name.clone(),
        });
    }
    None
}

pub fn unavailable(bin_dir: &Path) -> Option<Unavailable> {
    if !rustix::process::geteuid().is_root() {
        return Some(Unavailable::SandboxNeedsRoot);
    }
    if exec::resolve_program(FAKE_BINARY, bin_dir).is_err() {
        return Some(Unavailable::MissingBinary {
            binary: FAKE_BINARY,
            bin_dir: bin_dir.to_path_buf(),
        });
    }
    None
}

pub async fn run(
    p: &Planned,
    settings: &RunSettings,
    case_dir: &Path,
    timing: &CaseTiming,
) -> Result<Session, SessionError> {
    let scenario = &*p.scenario;
    let two_in_one = one_invocation_for_two(p);
    let run = match scenario.agent.runs.as_slice() {
        [run] => run,
        [first, _] if two_in_one => first,
        _ => {
            let why = unsupported(p).map(|c| c.to_string()).unwrap_or_default();
            return Err(SessionError::Harness(why));
        }
    };
    let SandboxInvocation {
        argv,
        invocation,
        files,
        refused,
    } = sandbox_invocation(p, settings, case_dir, timing, run)?;

    // The fake's clock starts inside the sandbox, a little after this: journal times are never
    // later than the runner's view of the run (see `Observation::run_of`).
    let clock = AgentClock::new(Instant::now(), timing.scale);
    let finished = exec::run(&invocation).await;
    let mut summary = read_summary(&files.out, &finished)?;
    // The agent's pool as the sandbox left it: not copied (and so not judged) when it was
    // not a bounded regular file; the copy itself read back bounded too.
    let mut unjudgeable = summary.pool_not_copied();
    let exit = summary.agent_exit(&finished)?;
    summary.refused_as_asked(&refused)?;
    let journal = read_journal(&files.out.join(fake_wireserver::sandbox::JOURNAL_FILE))?;
    if let Some(why) = summary.refused_lost() {
        super::not_judged_also(&mut unjudgeable, why);
    }
    if let Some(why) = summary.journal_whole(journal.len())? {
        super::not_judged_also(&mut unjudgeable, why);
    }
    let pool = match read_agent_file(&files.out.join(POOL_COPY), POOL_READ_MAX) {
        Ok(pool) => pool,
        Err(why) => {
            unjudgeable.get_or_insert_with(|| {
                format!("the sandbox's copy of the pool file {POOL_COPY} {why}, so the case is not judged")
            });
            None
        }
    };
    let served = Documents::new(&scenario.fake).served_ids(0);
    let mut record = record(run, argv, exit, finished, &clock);
    on_the_fakes_clock(&mut record, &summary);
    record.refused = summary.refused_attempts();
    let runs = if two_in_one {
        split_at_terminal_report(record, &scenario.agent.runs[1], &journal)
    } else {
        vec![record]
    };
    let guest_calls = read_guest_calls(&files.out, &mut unjudgeable);
    let guest_users = summary.guest_users.take();
    Ok(Session {
        journal,
        served,
        pool,
        runs,
        clock,
        unjudgeable,
        guest_calls,
        guest_users,
    })
}

/// The sandbox's command for the agent's `run`, and what is read back after it.
struct SandboxInvocation {
    /// The agent's own argv, as its profile renders it.
    argv: Vec<String>,
    invocation: Invocation,
    files: SandboxFiles,
    /// The hosts the sandbox is asked to refuse.
    refused: Vec<PlatformHost>,
}

/// The sandbox's `--timeout` for a `deadline` of wall seconds: a daemon's end comes
/// `done_grace` after its report (plus the sandbox's poll); one that sends none
/// (`health_report = "none"`) is ended at its deadline, with no report to wait past.
fn sandbox_timeout(profile: &crate::agent::AgentProfile, deadline: f64) -> f64 {
    let reports = profile.health_report != HealthReporting::None;
    deadline
        + if profile.done == Done::TerminalReport && reports {
            profile.done_grace + DONE_POLL_SLACK
        } else {
            0.0
        }
}

/// Prepares the case folder for the sandbox (its scenario file, the agent's folders handed to
/// nobody) and its command line around the agent's own.
fn sandbox_invocation(
    p: &Planned,
    settings: &RunSettings,
    case_dir: &Path,
    timing: &CaseTiming,
    run: &crate::scenario::Run,
) -> Result<SandboxInvocation, SessionError> {
    let scenario = &*p.scenario;
    // Wall seconds from here on: the sandbox's --timeout and the runner's kill. The daemon's
    // grace after its report stays wall time too (the harness's patience, not the agent's).
    let deadline = timing.wall_deadline();
    // The agent's start-up is not the scenario's to wait for: the sandbox starts this clock at
    // the agent's first request or refused attempt (`--startup`), or after `startup` without one.
    let timeout = sandbox_timeout(&p.profile, deadline);
    // The runner's own clock, from spawn: the longest the sandbox may take.
    let deadline = timeout + p.profile.sandbox_startup;
    let fake_binary = exec::resolve_program(FAKE_BINARY, &settings.bin_dir)
        .map_err(|_| SessionError::Harness(format!("{FAKE_BINARY} not found")))?;

    let files = SandboxFiles::in_case(case_dir);
    write_fake_scenario(scenario, case_dir, &files.scenario)?;

    let endpoints = Endpoints {
        wireserver_url: format!("http://{}", fake_wireserver::sandbox::WIRESERVER_ADDR),
        imds_url: format!("http://{}", fake_wireserver::sandbox::IMDS_ADDR),
        proxy_url: None,
        kvp_pool: PathBuf::from(POOL_PATH),
    };
    // The agent is nobody on the host (`--unprivileged`): it cannot reach the case folder
    // (inside this run's folder, root's alone), so its own folder is bound into the sandbox's
    // private /run; the sandbox's files (its scenario, its journal) stay out of its reach.
    hand_over(&files.agent)?;
    let (argv, agent) = agent_invocation(
        p,
        settings,
        run,
        &endpoints,
        Path::new(AGENT_CASE_DIR),
        Duration::from_secs_f64(deadline),
    )?;
    let refused = refused_hosts(p);
    let mut args = sandbox_args(p, timing, case_dir, &files, timeout, &refused)?;
    args.extend(["--".into(), agent.program.display().to_string()]);
    args.extend(agent.args.iter().cloned());
    let invocation = Invocation {
        program: fake_binary,
        args,
        deadline: agent.deadline + SANDBOX_GRACE,
        cwd: case_dir.to_path_buf(),
        limits: None,
        ..agent
    };
    Ok(SandboxInvocation {
        argv,
        invocation,
        files,
        refused,
    })
}

/// The sandbox's files in the case folder.
struct SandboxFiles {
    /// The [fake] table as a scenario file of its own (`--scenario`).
    scenario: PathBuf,
    /// Where the sandbox writes its journal, the pool copies and its summary (`--out`).
    out: PathBuf,
    /// The agent's own folder, bound in as its `{case_dir}`.
    agent: PathBuf,
}

impl SandboxFiles {
    fn in_case(case_dir: &Path) -> SandboxFiles {
        SandboxFiles {
            scenario: case_dir.join("fake-scenario.toml"),
            out: case_dir.join("sandbox"),
            agent: case_dir.join(AGENT_FOLDER),
        }
    }
}

/// Writes the [fake] table as a scenario file of its own at `path` (the files it loaded copied
/// beside it, where the sandbox may read them), checked by reading it back so a problem is the
/// runner's error, not the sandbox's.
fn write_fake_scenario(
    scenario: &crate::scenario::Scenario,
    case_dir: &Path,
    path: &Path,
) -> Result<(), SessionError> {
    let text = scenario
        .fake
        .to_self_contained_toml(case_dir)
        .map_err(|e| {
            SessionError::Harness(format!(
                "cannot write the [fake] table's files to {}: {e}",
                case_dir.display()
            ))
        })?;
    fake_wireserver::Scenario::from_toml_str(&text, &path.display().to_string()).map_err(|e| {
        SessionError::Harness(format!(
            "cannot write the [fake] table as a scenario file: {e}"
        ))
    })?;
    std::fs::write(path, &text)
        .map_err(|e| SessionError::Harness(format!("cannot write {}: {e}", path.display())))
}

/// Makes `dir` (with its parents) and hands it to the agent's host identity, nobody.
fn hand_over(dir: &Path) -> Result<(), SessionError> {
    std::fs::create_dir_all(dir)
        .and_then(|()| userns::hand_over(dir))
        .map_err(|e| SessionError::Harness(format!("{}: {e}", dir.display())))
}

/// The `fake-wireserver sandbox` arguments before the `--` and the agent's command; the
/// private folders' scratch copies are made and handed over on the way.
fn sandbox_args(
    p: &Planned,
    timing: &CaseTiming,
    case_dir: &Path,
    files: &SandboxFiles,
    timeout: f64,
    refused: &[PlatformHost],
) -> Result<Vec<String>, SessionError> {
    let mut args: Vec<String> = vec!["sandbox".into(), "--unprivileged".into()];
    // A guest's agent is nobody on the host too: root of a guest namespace whose users have
    // ids of their own (`fake_wireserver::guest`).
    if let Some(guest) = &p.scenario.guest {
        let path = case_dir.join(GUEST_FILE);
        write_guest(p, guest, &path)?;
        args.extend(["--guest".into(), path.display().to_string()]);
    }
    args.extend([
        "--bind".into(),
        format!("{}:{AGENT_CASE_DIR}", files.agent.display()),
        "--scenario".into(),
        files.scenario.display().to_string(),
        "--out".into(),
        files.out.display().to_string(),
        "--timeout".into(),
        format!("{timeout}"),
        "--startup".into(),
        format!("{}", p.profile.sandbox_startup),
    ]);
    if !timing.scale.is_wall() {
        args.push("--time-scale".into());
        args.push(timing.scale.times().to_string());
    }
    for host in refused {
        args.push("--refuse".into());
        args.push(host.as_str().into());
    }
    // The agent's limits, on the agent alone (not the sandbox's fake).
    args.push("--limits".into());
    args.push(p.profile.limits.to_string());
    if p.profile.done == Done::TerminalReport {
        args.push("--stop-after-report".into());
        args.push(format!("{}", p.profile.done_grace));
    }
    for dir in &p.profile.sandbox_private_dirs {
        let scratch = private_dir(case_dir, dir);
        hand_over(&scratch)?;
        args.push("--bind".into());
        args.push(format!("{}:{}", scratch.display(), dir.display()));
    }
    Ok(args)
}

/// The guest's record of its stand-ins' calls, bounded like the sandbox's copy of it. The agent
/// ran as root beside the record: a line that is not a call makes the case unjudgeable, not a
/// verdict.
fn read_guest_calls(
    out: &Path,
    unjudgeable: &mut Option<String>,
) -> Vec<fake_wireserver::guest::ToolCall> {
    let path = out.join(fake_wireserver::guest::GUEST_CALLS_FILE);
    let bytes = match read_agent_file(&path, fake_wireserver::guest::CALLS_FILE_MAX) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Vec::new(),
        Err(why) => {
            unjudgeable.get_or_insert(format!("the guest's call record {why}"));
            return Vec::new();
        }
    };
    let mut calls = Vec::new();
    for (i, line) in bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        match serde_json::from_slice(line) {
            Ok(call) => calls.push(call),
            Err(e) => {
                unjudgeable.get_or_insert(format!(
                    "line {} of the guest's call record is not a call ({e})",
                    i + 1
                ));
                return calls;
            }
        }
    }
    calls
}

/// The guest file in the case folder (`--guest`).
const GUEST_FILE: &str = "guest.toml";

/// Writes the scenario's guest for the sandbox, its VM id the fake's IMDS `vmId` unless the
/// scenario gives its own (a DMI id that differs from IMDS is a guest fault of its own).
fn write_guest(
    p: &Planned,
    guest: &fake_wireserver::guest::Guest,
    path: &Path,
) -> Result<(), SessionError> {
    let mut guest = guest.clone();
    if guest.vm_id.is_none() {
        guest.vm_id = fake_wireserver::documents::effective_imds(&p.scenario.fake.imds).vm_id;
    }
    std::fs::write(path, guest.to_toml())
        .map_err(|e| SessionError::Harness(format!("cannot write {}: {e}", path.display())))
}

/// `sandbox.json` from `out`; without it the sandbox failed, and its last output says why.
fn read_summary(out: &Path, finished: &Finished) -> Result<Summary, SessionError> {
    let failed = |what: String| {
        let stderr = finished.stderr.text();
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        SessionError::Harness(format!(
            "fake-wireserver sandbox failed ({what}); its last output: {}",
            tail.join(" | ")
        ))
    };
    match std::fs::read_to_string(out.join("sandbox.json")) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| failed(format!("{}/sandbox.json: {e}", out.display()))),
        Err(_) => Err(failed(finished.exit.describe())),
    }
}

/// The run's start and end as the sandbox saw the agent's, on the fake's clock (the journal's):
/// the runner's own view also holds the sandbox's set-up (namespaces, mounts, the fake's start)
/// and teardown (the journal and pools written out), which are not the agent's time and under
/// load are hundreds of milliseconds.
fn on_the_fakes_clock(record: &mut RunRecord, summary: &Summary) {
    if let (Some(start), Some(end)) = (summary.agent_started_ms, summary.agent_exited_ms) {
        record.start_ms = start;
        record.end_ms = end.max(start);
        record.clock_ms = record.clock_ms.clamp(start, record.end_ms);
    }
}

/// One invocation that played in-progress then ready, as the two runs the checks judge: the
/// first ends just before the first health report that is not `NotReady/Provisioning`; the
/// second holds that report and everything after. Without such a report the second run is
/// empty (and judged as the missing Ready it is).
fn split_at_terminal_report(
    record: RunRecord,
    second: &crate::scenario::Run,
    journal: &[Entry],
) -> Vec<RunRecord> {
    let terminal_at = journal
        .iter()
        .filter(|e| crate::observe::is_health(e))
        .find(|e| {
            // Any report but the in-progress one ends the first invocation's part.
            e.report.as_ref().is_some_and(|r| !r.is_in_progress())
        })
        .map(|e| e.at_ms);
    let split = terminal_at
        .map(|at| at.saturating_sub(1).max(record.start_ms))
        .unwrap_or(record.end_ms);
    let mut first = record.clone();
    first.end_ms = split;
    first.refused.retain(|a| a.at_ms < split);
    let mut rest = record;
    rest.refused.retain(|a| a.at_ms >= split);
    rest.run = second.clone();
    rest.start_ms = split;
    rest.clock_ms = rest.clock_ms.max(split);
    // One process, one output: it stays with the first run.
    rest.stdout = Default::default();
    rest.stderr = Default::default();
    vec![first, rest]
}

/// `journal.jsonl`: one `fake_wireserver::journal::Entry` per line, sorted by `seq`.
fn read_journal(path: &Path) -> Result<Vec<Entry>, SessionError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        SessionError::Harness(format!(
            "cannot read the sandbox journal {}: {e}",
            path.display()
        ))
    })?;
    let mut journal = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry = Entry::from_json(line).map_err(|e| {
            SessionError::Harness(format!(
                "{}:{}: not a journal entry: {e}",
                path.display(),
                i + 1
            ))
        })?;
        journal.push(entry);
    }
    journal.sort_by_key(|e| e.seq);
    Ok(journal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Captured;

    fn health(seq: u64, at: u64, state: &str, substatus: Option<&str>) -> Entry {
        let details = substatus
            .map(|s| format!("<Details><SubStatus>{s}</SubStatus></Details>"))
            .unwrap_or_default();
        let body = format!(
            "<Health><GoalStateIncarnation>1</GoalStateIncarnation><Container><ContainerId>c</ContainerId><RoleInstanceList><Role><InstanceId>i</InstanceId><Health><State>{state}</State>{details}</Health></Role></RoleInstanceList></Container></Health>"
        );
        let line = serde_json::json!({
            "seq": seq, "at_ms": at, "done_ms": at + 1, "listener": "wireserver",
            "client": "127.0.0.1:1", "method": "POST", "target": "/machine?comp=health",
            "http_version": "HTTP/1.1", "headers": [], "body": body, "body_b64": null,
            "body_len": 0, "body_truncated": false, "endpoint": "wireserver.health.xml",
            "answer": {"kind": "default", "status": 200, "step": null},
            "report": wirecheck_oracle::health::parse_xml(body.as_bytes(), None),
            "findings": [], "client_closed_ms": null
        });
        serde_json::from_value(line).unwrap()
    }

    fn run(action: Action) -> crate::scenario::Run {
        crate::scenario::Run {
            action,
            reason: None,
            data: vec![],
            description: None,
        }
    }

    fn record() -> RunRecord {
        RunRecord {
            run: run(Action::InProgress),
            argv: vec!["a".into()],
            start_ms: 100,
            clock_ms: 100,
            end_ms: 5000,
            exit: Exit::StoppedWhenDone,
            stdout: Captured::default(),
            stderr: Captured::default(),
            pid: None,
            refused: Vec::new(),
        }
    }

    /// A daemon is given its `done_grace` past the deadline for what it does after its report;
    /// one that sends no report has none to wait past (WALinuxAgent 2.16 in cloud-init mode:
    /// 2 s more of watching silence in each of its cases).
    #[test]
    fn only_a_reporting_daemon_gets_its_grace_past_the_deadline() {
        let mut daemon = crate::checks::tests::profile();
        daemon.done = Done::TerminalReport;
        daemon.done_grace = 2.0;
        assert_eq!(sandbox_timeout(&daemon, 7.0), 7.0 + 2.0 + DONE_POLL_SLACK);
        let silent = crate::agent::AgentProfile {
            health_report: HealthReporting::None,
            ..daemon.clone()
        };
        assert_eq!(sandbox_timeout(&silent, 7.0), 7.0);
        let exits = crate::agent::AgentProfile {
            done: Done::Exit,
            ..daemon
        };
        assert_eq!(sandbox_timeout(&exits, 7.0), 7.0);
    }

    /// `sandbox.json`'s refused attempts: the plugin's port is not the wireserver's loop, and a
    /// list the watch lost some of makes the case unjudged (an agent flooding a refused host
    /// would otherwise lose its late attempts in the flood).
    #[test]
    fn refused_attempts_are_read_by_service_and_a_lossy_list_is_not_judged() {
        let summary: Summary = serde_json::from_str(
            r#"{"exit_status": 1, "signal": null, "timed_out": false,
                "refused_attempts": [
                    {"at_ms": 10, "host": "wireserver", "address": "168.63.129.16:80"},
                    {"at_ms": 20, "host": "wireserver", "address": "168.63.129.16:32526"},
                    {"at_ms": 30, "host": "imds", "address": "169.254.169.254:80"}],
                "refused_attempts_lost": 0}"#,
        )
        .unwrap();
        let services: Vec<(u64, Service)> = summary
            .refused_attempts()
            .iter()
            .map(|a| (a.at_ms, a.service))
            .collect();
        assert_eq!(
            services,
            [
                (10, Service::Wireserver),
                (20, Service::Other),
                (30, Service::Imds)
            ]
        );
        assert_eq!(summary.refused_lost(), None);
        let lossy = Summary {
            refused_attempts_lost: 7,
            ..summary
        };
        let why = lossy.refused_lost().unwrap();
        assert!(
            why.contains("lost 7") && why.contains("not judged"),
            "{why}"
        );
    }

    #[test]
    fn the_run_is_timed_on_the_fakes_clock_when_the_sandbox_says_it() {
        let summary = |started, exited| Summary {
            exit_status: 0,
            signal: None,
            timed_out: false,
            stopped_when_done: false,
            pools_not_copied: Vec::new(),
            journal_entries: None,
            journal_evicted: 0,
            refused: Vec::new(),
            refused_attempts: Vec::new(),
            refused_attempts_lost: 0,
            agent_started_ms: started,
            agent_exited_ms: exited,
            guest_users: None,
        };
        // The runner saw 100..5000 (the sandbox's set-up and teardown included); the sandbox
        // saw the agent run 40..4200 on the fake's clock.
        let mut r = record();
        on_the_fakes_clock(&mut r, &summary(Some(40), Some(4200)));
        assert_eq!((r.start_ms, r.clock_ms, r.end_ms), (40, 100, 4200));
        // An older sandbox says nothing: the runner's view stands.
        let mut r = record();
        on_the_fakes_clock(&mut r, &summary(None, None));
        assert_eq!((r.start_ms, r.end_ms), (100, 5000));
    }

    #[test]
    fn a_journal_line_with_an_unknown_name_is_a_harness_error_naming_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let good = serde_json::to_string(&health(1, 10, "Ready", None)).unwrap();
        let bad = serde_json::to_string(&health(2, 20, "Ready", None))
            .unwrap()
            .replace(r#""kind":"default""#, r#""kind":"defualt""#);
        std::fs::write(&path, format!("{good}\n{bad}\n")).unwrap();
        let Err(SessionError::Harness(message)) = read_journal(&path) else {
            panic!("a bad journal line was read");
        };
        assert!(
            message.starts_with(&format!(
                "{}:2: not a journal entry: answer.kind: unknown variant `defualt`, expected one of `respond`,",
                path.display()
            )),
            "{message}"
        );
        std::fs::write(&path, format!("{good}\n")).unwrap();
        let journal = read_journal(&path).unwrap();
        assert_eq!(journal[0].answer.kind, fake_wireserver::AnswerKind::Default);
    }

    #[test]
    fn one_invocation_is_split_before_its_terminal_report() {
        let journal = vec![
            health(1, 2000, "NotReady", Some("Provisioning")),
            health(2, 2500, "Ready", None),
        ];
        let runs = split_at_terminal_report(record(), &run(Action::Ready), &journal);
        assert_eq!(runs.len(), 2);
        assert_eq!((runs[0].start_ms, runs[0].end_ms), (100, 2499));
        assert_eq!((runs[1].start_ms, runs[1].end_ms), (2499, 5000));
        assert_eq!(runs[0].run.action, Action::InProgress);
        assert_eq!(runs[1].run.action, Action::Ready);
        // The in-progress report belongs to the first run, Ready to the second.
        assert!(journal[0].at_ms <= runs[0].end_ms && journal[1].at_ms > runs[0].end_ms);
    }

    #[test]
    fn without_a_terminal_report_the_second_run_is_empty() {
        let journal = vec![health(1, 2000, "NotReady", Some("Provisioning"))];
        let runs = split_at_terminal_report(record(), &run(Action::Ready), &journal);
        assert_eq!(runs[0].end_ms, 5000);
        assert_eq!((runs[1].start_ms, runs[1].end_ms), (5000, 5000));
    }
}
