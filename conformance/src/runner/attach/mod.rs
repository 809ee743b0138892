//! How an agent reaches its fake (the profile's `attach`), behind one interface: a
//! [`Session`] runs a scenario's invocations and hands back what the checks judge.
//!
//! * `url` / `proxy` ([`in_process`]): the fake runs in this process on ephemeral loopback
//!   ports; the agent gets loopback URLs, or the real addresses through the fake's proxy. The
//!   fake's listeners and the agent share a private network namespace ([`crate::netns`]): always
//!   for proxy agents, for url agents wherever containment is available (`containment::unavailable`).
//! * `sandbox` ([`sandbox`]): `fake-wireserver sandbox` runs the agent in its own network and
//!   mount namespaces, where the fake answers on 168.63.129.16 and 169.254.169.254 (root).
//!
//! Everything after the session (artifacts, timeline, checks, deviations) is the same for all
//! modes.

mod agent_file;
pub mod in_process;
pub mod sandbox;

use std::path::{Path, PathBuf};
use std::time::Duration;

use fake_wireserver::clock::AgentClock;

use fake_wireserver::journal::Entry;
use wirecheck_oracle::ServedIds;

use super::{CaseTiming, Planned, RunSettings};
use crate::agent::template::{Placeholder, UnsetPolicy, Values};
use crate::agent::{Action, Attach};
use crate::disposition::{CannotArrange, Unavailable};
use crate::exec::{self, Exit, Finished, Invocation};
use crate::observe::RunRecord;
use crate::scenario::Run;

/// Adds `why` to the reasons a session's cases are not judged.
pub(super) fn not_judged_also(unjudgeable: &mut Option<String>, why: String) {
    *unjudgeable = Some(match unjudgeable.take() {
        Some(before) => format!("{before}; {why}"),
        None => why,
    });
}

/// What one scenario's invocations produced.
#[derive(Debug)]
pub struct Session {
    /// Sorted by `seq`.
    pub journal: Vec<Entry>,
    pub served: ServedIds,
    /// The pool file after the run (`None`: there was none).
    pub pool: Option<Vec<u8>>,
    pub runs: Vec<RunRecord>,
    /// The journal's clock: its zero (the fake's start, or just before it) on the runner's
    /// clock, and its speed (agent time).
    pub clock: AgentClock,
    /// Why nothing may be judged from this session although it ran (the journal window
    /// dropped entries): its cases fail with this reason, artifacts kept.
    pub unjudgeable: Option<String>,
    /// In a guest: its stand-ins' record of the calls (`fake_wireserver::guest`).
    pub guest_calls: Vec<fake_wireserver::guest::ToolCall>,
    /// In a guest: the users it has after the run that the host has not (`None`: its
    /// `/etc/passwd` could not be read, or no guest).
    pub guest_users: Option<Vec<String>>,
}

/// Why a session produced nothing to judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// The agent could not be run as its profile says (e.g. its program cannot be started):
    /// the agent's cases fail.
    Agent(String),
    /// wirecheck's own machinery failed (the fake, the sandbox, a temporary file): never a
    /// verdict about the agent; its cases are skipped with this reason.
    Harness(String),
}

/// Where the agent is pointed: the values of `{wireserver_url}`, `{imds_url}`, `{proxy_url}`
/// and `{kvp_pool}`.
#[derive(Debug, Clone)]
pub struct Endpoints {
    pub wireserver_url: String,
    pub imds_url: String,
    pub proxy_url: Option<String>,
    pub kvp_pool: PathBuf,
}

/// Why this scenario cannot be run in the profile's attach mode at all (shown as `skipped`).
/// Depends only on the profile and the scenario, so `wirecheck list` shows it too.
pub fn unsupported(p: &Planned) -> Option<CannotArrange> {
    match p.profile.attach {
        Attach::Url | Attach::Proxy => None,
        Attach::Sandbox => sandbox::unsupported(p),
    }
}

/// Why the attach mode cannot run on this machine (shown as `skipped`): e.g. the sandbox
/// needs root and the `fake-wireserver` binary.
pub fn unavailable(p: &Planned, bin_dir: &Path) -> Option<Unavailable> {
    match p.profile.attach {
        Attach::Url => None,
        Attach::Proxy => crate::containment::unavailable().map(Unavailable::Containment),
        Attach::Sandbox => sandbox::unavailable(bin_dir),
    }
}

/// Runs the scenario's invocations (each killed after the timing's deadline) in `case_dir`,
/// at the timing's agent time.
pub async fn run(
    p: &Planned,
    settings: &RunSettings,
    case_dir: &Path,
    timing: &CaseTiming,
) -> Result<Session, SessionError> {
    match p.profile.attach {
        Attach::Url | Attach::Proxy => in_process::run(p, settings, case_dir, timing).await,
        Attach::Sandbox => sandbox::run(p, settings, case_dir, timing).await,
    }
}

/// What of wirecheck's environment leads to the user's session or holds the CI's secrets: no
/// agent gets it (it inherits the rest, its profile's `env` and the case variables).
pub const PRIVATE_VARS: [&str; 19] = [
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_RUNTIME_URL",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_CACHE_URL",
    "ACTIONS_RESULTS_URL",
    "CI_JOB_TOKEN",
    "SYSTEM_ACCESSTOKEN",
    "CARGO_REGISTRY_TOKEN",
    "NPM_TOKEN",
];

/// Environment variables removed so a user's proxy settings never reroute the agent.
const PROXY_VARS: [&str; 8] = fake_wireserver::proxy::CLIENT_VARIABLES;

/// What of wirecheck's environment changes how an agent's runtime behaves: a debugging aid or
/// setting of its language's runtime, of its loader or of its allocator (and what
/// [`RUNTIME_VAR_PREFIXES`] names: libfaketime's settings, glibc's malloc). No agent gets it,
/// so a verdict never depends on the caller's shell; a profile's `env` and agent time set what
/// they need. Where an agent is found (`PATH`, `PYTHONPATH`, `PYTHONHOME`, `LD_LIBRARY_PATH`)
/// is passed on: without it a user's own agent may not start. Measured: `RUST_BACKTRACE=1` in
/// a developer's shell made afterburn resolve a symbolized backtrace as it exited, 2-5 s of
/// its agent time at x16 where it takes 80-100 ms, and failed its `behaviour.budget`.
pub const RUNTIME_VARS: [&str; 28] = [
    "RUST_BACKTRACE",
    "RUST_LIB_BACKTRACE",
    "RUST_LOG",
    "RUST_MIN_STACK",
    "TOKIO_WORKER_THREADS",
    "PYTHONSTARTUP",
    "PYTHONDEVMODE",
    "PYTHONWARNINGS",
    "PYTHONTRACEMALLOC",
    "PYTHONFAULTHANDLER",
    "PYTHONASYNCIODEBUG",
    "PYTHONMALLOC",
    "PYTHONPROFILEIMPORTTIME",
    "PYTHONVERBOSE",
    "PYTHONDEBUG",
    "PYTHONINSPECT",
    "PYTHONOPTIMIZE",
    "PYTHONUTF8",
    "PYTHONIOENCODING",
    "PYTHONCOERCECLOCALE",
    "PYTHONINTMAXSTRDIGITS",
    "PYTHON_GIL",
    "PYTHON_JIT",
    "GLIBC_TUNABLES",
    "LD_PRELOAD",
    "LD_AUDIT",
    "LD_BIND_NOW",
    "NO_FAKETIME",
];

/// Prefixes of [`RUNTIME_VARS`]' kind: libfaketime reads many `FAKETIME_*` settings (one of
/// them, `FAKETIME_DONT_FAKE_MONOTONIC`, would leave an agent's waits at the wall clock),
/// `DONT_FAKE_MONOTONIC` is its older spelling, glibc's loader reads `LD_DEBUG`,
/// `LD_PROFILE`, `LD_TRACE_LOADED_OBJECTS` (which makes a program list its libraries and exit
/// without running) and its allocator `MALLOC_*`. `LD_LIBRARY_PATH` is passed on.
pub const RUNTIME_VAR_PREFIXES: [&str; 6] = [
    "FAKETIME",
    "DONT_FAKE_MONOTONIC",
    "LD_DEBUG",
    "LD_PROFILE",
    "LD_TRACE_",
    "MALLOC_",
];

/// The variables no agent inherits: the proxy's, the private ones, the runtime's, and each
/// variable of wirecheck's environment that a runtime prefix names.
fn not_inherited() -> Vec<String> {
    let prefixed = std::env::vars_os().filter_map(|(name, _)| {
        let name = name.into_string().ok()?;
        RUNTIME_VAR_PREFIXES
            .iter()
            .any(|p| name.starts_with(p))
            .then_some(name)
    });
    PROXY_VARS
        .iter()
        .chain(&PRIVATE_VARS)
        .chain(&RUNTIME_VARS)
        .map(|s| (*s).to_owned())
        .chain(prefixed)
        .collect()
}

/// The placeholder values of one invocation.
fn values(
    p: &Planned,
    settings: &RunSettings,
    run: &Run,
    endpoints: &Endpoints,
    case_dir: &Path,
) -> Values {
    let agent = &p.scenario.agent;
    let mut values = Values::default();
    values
        .set(Placeholder::WireserverUrl, &endpoints.wireserver_url)
        .set(Placeholder::ImdsUrl, &endpoints.imds_url)
        .set_opt(Placeholder::ProxyUrl, endpoints.proxy_url.clone())
        .set(
            Placeholder::KvpPool,
            endpoints.kvp_pool.display().to_string(),
        )
        .set_opt(Placeholder::VmId, agent.vm_id.clone())
        .set_opt(Placeholder::Reason, run.reason.clone())
        .set_opt(Placeholder::Description, run.description.clone())
        .set(Placeholder::Protocol, agent.protocol.as_str())
        .set(Placeholder::Budget, seconds(agent.budget))
        .set(Placeholder::RequestTimeout, seconds(agent.request_timeout))
        .set(Placeholder::RetryInterval, seconds(agent.retry_interval))
        .set(Placeholder::BinDir, settings.bin_dir.display().to_string())
        .set(Placeholder::CaseDir, case_dir.display().to_string())
        .set(Placeholder::Action, run.action.as_str());
    values.data = run.data.iter().map(|(k, v)| format!("{k}={v}")).collect();
    values
}

/// `3` for 3.0, `0.25` for 0.25: how the knobs are passed to agents.
fn seconds(v: f64) -> String {
    format!("{v}")
}

/// The agent's own command for `run` (argv as the profile renders it) and how to start it.
fn agent_invocation(
    p: &Planned,
    settings: &RunSettings,
    run: &Run,
    endpoints: &Endpoints,
    case_dir: &Path,
    deadline: Duration,
) -> Result<(Vec<String>, Invocation), SessionError> {
    let profile = &*p.profile;
    let values = values(p, settings, run, endpoints, case_dir);
    let command = profile.commands.get(&run.action).ok_or_else(|| {
        SessionError::Agent(format!(
            "agent {} has no `{}` command",
            profile.name, run.action
        ))
    })?;
    let policy = if profile.lenient_placeholders {
        UnsetPolicy::Empty
    } else {
        UnsetPolicy::Error
    };
    let argv = command
        .template
        .expand(&values, policy)
        .map_err(|e| SessionError::Agent(format!("{} {}: {e}", profile.source, command.field)))?;
    let program = exec::resolve_program(&argv[0], &settings.bin_dir)
        .unwrap_or_else(|_| PathBuf::from(&argv[0]));

    let mut env = profile.render_env(&values);
    env.extend(case_env(&values, run.action));
    let mut env_remove = not_inherited();
    // Only the proxy attach mode gives a proxy; every other agent gets none.
    if let Some(proxy) = &endpoints.proxy_url {
        env.push(("http_proxy".into(), proxy.clone()));
        env.push(("HTTP_PROXY".into(), proxy.clone()));
        env_remove.retain(|k| !k.eq_ignore_ascii_case("http_proxy"));
    }
    let invocation = Invocation {
        program,
        args: argv[1..].to_vec(),
        env,
        env_remove,
        cwd: case_dir.to_path_buf(),
        deadline,
        activity: None,
        netns: None,
        pid_namespace: false,
        stop: settings.stop.clone(),
        confine: None,
        unprivileged_root: None,
        limits: Some(profile.limits),
    };
    Ok((argv, invocation))
}

/// `WIRECHECK_CASE_*`: every value also as an environment variable, for wrapper scripts and
/// ad-hoc agents (`{data}` as newline-separated `KEY=VALUE` lines).
fn case_env(values: &Values, action: Action) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Placeholder::ALL
        .iter()
        .filter(|p| **p != Placeholder::Data)
        .filter_map(|p| {
            values.get(*p).map(|v| {
                (
                    format!("WIRECHECK_CASE_{}", p.name().to_ascii_uppercase()),
                    v.to_owned(),
                )
            })
        })
        .collect();
    env.push(("WIRECHECK_CASE_DATA".into(), values.data.join("\n")));
    env.push(("WIRECHECK_CASE_ACTION".into(), action.as_str().to_owned()));
    env.sort();
    env.dedup();
    env
}

/// A finished invocation as the checks see it, on the journal's `clock`.
fn record(
    run: &Run,
    argv: Vec<String>,
    exit: Exit,
    finished: Finished,
    clock: &AgentClock,
) -> RunRecord {
    RunRecord {
        run: run.clone(),
        argv,
        start_ms: clock.ms(finished.started),
        clock_ms: clock.ms(finished.clock_started),
        end_ms: clock.ms(finished.ended),
        exit,
        stdout: finished.stdout,
        stderr: finished.stderr,
        pid: finished.pid,
        refused: Vec::new(),
    }
}
