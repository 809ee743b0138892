//! One scenario against one agent: start a fake with the scenario's plan, run the agent's
//! invocations one after the other, collect the journal and the pool file, judge, keep the
//! artifacts.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_wireserver::oracle::kvp::decode_pool;
use fake_wireserver::{Fake, FakeConfig};

use super::{
    Planned, RunSettings, apply_deviation, artifacts, case_title, skip_reason, uniform_cases,
};
use crate::agent::template::{Placeholder, UnsetPolicy, Values};
use crate::agent::{Action, Attach};
use crate::checks::Judgement;
use crate::exec::{self, Exit, Invocation};
use crate::observe::{Observation, RunRecord};
use crate::results::{CaseResult, Verdict};
use crate::scenario::{Run, Target};

/// The pool file's name inside the case folder (`{kvp_pool}`).
pub const POOL_FILE: &str = "kvp_pool_1";

/// Environment variables removed so a user's proxy settings never reroute loopback URLs.
const PROXY_VARS: [&str; 8] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
];

/// A loopback port that refuses connections, for "wireserver unreachable" scenarios. The
/// socket stays bound (without listening) while this lives, so no other scenario's fake can
/// be given the same port and answer in its place.
pub struct ClosedPort {
    _socket: tokio::net::TcpSocket,
    pub url: String,
}

impl ClosedPort {
    pub fn new() -> std::io::Result<ClosedPort> {
        // No SO_REUSEADDR: every other bind to this port fails while it is held.
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let port = socket.local_addr()?.port();
        Ok(ClosedPort {
            _socket: socket,
            url: format!("http://127.0.0.1:{port}"),
        })
    }
}

fn ms_since(t0: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(t0).as_millis() as u64
}

/// Runs the pair and returns one result per selected case.
pub async fn run(p: &Planned, settings: &RunSettings) -> Vec<CaseResult> {
    if let Some(reason) = skip_reason(p) {
        return uniform_cases(p, Verdict::Skipped, &reason);
    }
    match execute(p, settings).await {
        Ok(cases) => cases,
        Err(reason) => uniform_cases(p, Verdict::Fail, &reason),
    }
}

async fn execute(p: &Planned, settings: &RunSettings) -> Result<Vec<CaseResult>, String> {
    let scenario = &*p.scenario;
    let profile = &*p.profile;
    let case_dir = tempfile::Builder::new()
        .prefix("wirecheck-case-")
        .tempdir()
        .map_err(|e| format!("cannot create a case folder: {e}"))?;
    let pool_path = case_dir.path().join(POOL_FILE);
    // hv_kvp_daemon creates the pool files; agents append to an existing one.
    std::fs::write(&pool_path, b"").map_err(|e| format!("cannot create the pool file: {e}"))?;

    let mut config = FakeConfig::default().scenario(scenario.fake.clone());
    if profile.attach == Attach::Proxy {
        config = config.with_proxy();
    }
    // The runner's clock starts just before the fake's, so run times are never earlier than
    // the fake's view of them (see `Observation::run_of`).
    let t0 = Instant::now();
    let fake = Fake::start(config)
        .await
        .map_err(|e| format!("the fake could not start: {e}"))?;

    let closed = |what: &str| {
        ClosedPort::new().map_err(|e| format!("cannot reserve a closed port for {what}: {e}"))
    };
    // Held until the agent is done.
    let mut held: Vec<ClosedPort> = Vec::new();
    let (wireserver_url, imds_url, proxy_url) = match profile.attach {
        Attach::Proxy => (
            format!("http://{}", fake_wireserver::endpoint::WIRESERVER_HOST),
            format!("http://{}", fake_wireserver::endpoint::IMDS_HOST),
            fake.proxy_addr().map(|a| format!("http://{a}")),
        ),
        _ => (fake.wireserver_url(), fake.imds_url(), None),
    };
    let wireserver_url = match scenario.agent.wireserver {
        Target::Fake => wireserver_url,
        Target::Closed => {
            let port = closed("the wireserver")?;
            let url = port.url.clone();
            held.push(port);
            url
        }
    };
    let imds_url = match scenario.agent.imds {
        Target::Fake => imds_url,
        Target::Closed => {
            let port = closed("IMDS")?;
            let url = port.url.clone();
            held.push(port);
            url
        }
    };

    let mut records = Vec::new();
    for run in &scenario.agent.runs {
        let mut values = Values::default();
        values
            .set(Placeholder::WireserverUrl, &wireserver_url)
            .set(Placeholder::ImdsUrl, &imds_url)
            .set_opt(Placeholder::ProxyUrl, proxy_url.clone())
            .set(Placeholder::KvpPool, pool_path.display().to_string())
            .set_opt(Placeholder::VmId, scenario.agent.vm_id.clone())
            .set_opt(Placeholder::Reason, run.reason.clone())
            .set_opt(Placeholder::Description, run.description.clone())
            .set(Placeholder::Protocol, scenario.agent.protocol.as_str())
            .set(Placeholder::Budget, seconds(scenario.agent.budget))
            .set(
                Placeholder::RequestTimeout,
                seconds(scenario.agent.request_timeout),
            )
            .set(
                Placeholder::RetryInterval,
                seconds(scenario.agent.retry_interval),
            )
            .set(Placeholder::BinDir, settings.bin_dir.display().to_string())
            .set(Placeholder::CaseDir, case_dir.path().display().to_string())
            .set(Placeholder::Action, run.action.as_str());
        values.data = run.data.iter().map(|(k, v)| format!("{k}={v}")).collect();
        records.push(invoke(p, settings, run, &values, case_dir.path(), t0).await?);
    }

    drop(held);
    let journal = settled_journal(&fake).await;
    let served = fake.served_ids();
    fake.shutdown().await;
    let pool = std::fs::read(&pool_path).ok();
    let pool_view = decode_pool(pool.as_deref().unwrap_or_default());
    let imds_vm_id = fake_wireserver::documents::effective_imds(&scenario.fake.imds).vm_id;

    let obs = Observation {
        scenario,
        profile,
        journal,
        served,
        imds_vm_id,
        pool,
        pool_view,
        runs: records,
    };
    let timeline = crate::timeline::build(&obs);
    let artifacts_rel = artifacts::relative_dir(&profile.name, &scenario.id);
    let artifacts = match artifacts::write(&settings.out, &artifacts_rel, &obs) {
        Ok(()) => Some(artifacts_rel),
        Err(e) => {
            eprintln!(
                "wirecheck: warning: cannot write the artifacts of {}: {e}",
                scenario.id
            );
            None
        }
    };
    let duration_ms = ms_since(t0, Instant::now());

    Ok(p.checks
        .iter()
        .map(|check| {
            let id = scenario.case_id(check);
            let judgement = match check.needs {
                Some(cap) if !profile.claims(cap) => Judgement::skipped(format!(
                    "agent {} does not claim \"{}\" ({})",
                    profile.name,
                    cap.as_str(),
                    cap.describe()
                )),
                _ => (check.run)(&obs),
            };
            let j = apply_deviation(profile, &id, judgement);
            CaseResult {
                id,
                title: case_title(scenario, check),
                scenario: scenario.name.clone(),
                verdict: j.verdict,
                reason: j.reason,
                evidence: j.evidence,
                duration_ms,
                timeline: timeline.clone(),
                artifacts: artifacts.clone(),
            }
        })
        .collect())
}

/// The journal once every answer is final. The fake records an answer after writing it, so an
/// agent can read its reply and exit first; a delayed answer the agent gave up on finishes
/// later still. Waits at most [`SETTLE_MAX`].
async fn settled_journal(fake: &Fake) -> Vec<fake_wireserver::Entry> {
    let until = Instant::now() + SETTLE_MAX;
    loop {
        let mut journal = fake.journal();
        let pending = journal
            .iter()
            .any(|e| e.done_ms.is_none() && e.answer.kind != "hang");
        if !pending || Instant::now() >= until {
            journal.sort_by_key(|e| e.seq);
            return journal;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Longest wait for the journal to settle after the agent is done.
const SETTLE_MAX: Duration = Duration::from_secs(3);

/// `3` for 3.0, `0.25` for 0.25: how the knobs are passed to agents.
fn seconds(v: f64) -> String {
    format!("{v}")
}

async fn invoke(
    p: &Planned,
    settings: &RunSettings,
    run: &Run,
    values: &Values,
    case_dir: &Path,
    t0: Instant,
) -> Result<RunRecord, String> {
    let profile = &*p.profile;
    let command = profile
        .commands
        .get(&run.action)
        .ok_or_else(|| format!("agent {} has no `{}` command", profile.name, run.action))?;
    let policy = if profile.lenient_placeholders {
        UnsetPolicy::Empty
    } else {
        UnsetPolicy::Error
    };
    let argv = command
        .template
        .expand(values, policy)
        .map_err(|e| format!("{} {}: {e}", profile.source, command.field))?;
    let program = exec::resolve_program(&argv[0], &settings.bin_dir)
        .unwrap_or_else(|| PathBuf::from(&argv[0]));

    let mut env = profile.render_env(values);
    env.extend(case_env(values, run.action));
    let mut env_remove: Vec<String> = PROXY_VARS.iter().map(|s| (*s).to_owned()).collect();
    if profile.attach == Attach::Proxy
        && let Some(proxy) = values.get(Placeholder::ProxyUrl)
    {
        env.push(("http_proxy".into(), proxy.to_owned()));
        env.push(("HTTP_PROXY".into(), proxy.to_owned()));
        env_remove.retain(|k| !k.eq_ignore_ascii_case("http_proxy"));
    }
    let invocation = Invocation {
        program,
        args: argv[1..].to_vec(),
        env,
        env_remove,
        cwd: case_dir.to_path_buf(),
        deadline: Duration::from_secs_f64(p.scenario.agent.deadline),
    };
    let finished = exec::run(&invocation).await;
    if let Exit::SpawnFailed(why) = &finished.exit {
        return Err(format!("the agent could not be started: {why}"));
    }
    Ok(RunRecord {
        run: run.clone(),
        argv,
        start_ms: ms_since(t0, finished.started),
        end_ms: ms_since(t0, finished.ended),
        exit: finished.exit,
        stdout: finished.stdout,
        stderr: finished.stderr,
    })
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
