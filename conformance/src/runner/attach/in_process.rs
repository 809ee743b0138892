//! `attach = "url"` and `"proxy"`: the fake runs in this process on ephemeral loopback ports,
//! and the agent's invocations run one after the other against it.
//!
//! Started by root, a contained agent is root of a user namespace of its own that is nobody on
//! the host (`fake_wireserver::contain::userns`): its case folder, its `tmp/` and its pool
//! file are handed to nobody before it runs.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use fake_wireserver::clock::{AgentClock, TimeScale};
use fake_wireserver::contain::userns::{self, UnprivilegedRoot};
use fake_wireserver::syn_watch::{self, SynWatch};
use fake_wireserver::{Delivery, Fake, FakeConfig, Listeners, serve_on};

use super::agent_file::{POOL_READ_MAX, read_agent_file};
use super::{Endpoints, Session, SessionError, agent_invocation, record};
use crate::agent::Attach;
use crate::exec::{self, Exit};
use crate::netns::NetNs;
use crate::observe::{RefusedAttempt, RunRecord, Service};
use crate::runner::{CaseTiming, Planned, RunSettings};
use crate::scenario::Target;

/// The pool file's name inside the case folder (`{kvp_pool}`).
pub const POOL_FILE: &str = "kvp_pool_1";

/// A loopback port that refuses connections, for "wireserver unreachable" scenarios. The
/// socket stays bound (without listening) while this lives, so no other scenario's fake can
/// be given the same port and answer in its place.
pub struct ClosedPort {
    _socket: tokio::net::TcpSocket,
    pub url: String,
    pub port: u16,
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
            port,
        })
    }
}

pub async fn run(
    p: &Planned,
    settings: &RunSettings,
    case_dir: &Path,
    timing: &CaseTiming,
) -> Result<Session, SessionError> {
    let scenario = &*p.scenario;
    let profile = &*p.profile;
    let pool_path = case_dir.join(POOL_FILE);
    // hv_kvp_daemon creates the pool files; agents append to an existing one.
    std::fs::write(&pool_path, b"")
        .map_err(|e| SessionError::Harness(format!("cannot create the pool file: {e}")))?;

    let config = FakeConfig::default()
        .scenario(scenario.fake.clone())
        .time_scale(timing.scale);
    // The agent's clock at the fake's speed (nothing at the wall clock).
    let agent_time = fake_wireserver::clock::agent_env(timing.scale)
        .map_err(|e| SessionError::Harness(format!("agent time {}: {e}", timing.scale)))?;
    // The agent and the fake's listeners share a private network namespace (crate::netns):
    // always for proxy agents (they are given the real addresses), for url agents wherever
    // containment is available (root, or a user namespace of their own: `containment::unavailable`).
    let proxy = profile.attach == Attach::Proxy;
    let isolate = proxy || crate::containment::unavailable().is_none();
    let (netns, listeners) = if isolate {
        let (ns, listeners) = isolated_listeners(proxy).await?;
        (Some(ns), listeners)
    } else {
        let listeners = Listeners::bind(&config)
            .map_err(|e| SessionError::Harness(format!("the fake could not start: {e}")))?;
        (None, listeners)
    };
    let StartedFake { clock, fake } = start_fake(config, listeners, timing.scale).await?;

    // Held until the agent is done.
    let mut held: Vec<ClosedPort> = Vec::new();
    let endpoints = agent_endpoints(p, &fake, &pool_path, &mut held)?;
    // Attempts on a closed port never reach the fake: watched for (as root, in the agent's
    // namespace) from before its first invocation until its last is gone.
    let watch = match &netns {
        Some(ns) => ClosedPortWatch::start(ns, &held, &endpoints, fake.clock())?,
        None => None,
    };
    let activity = activity(&fake, watch.as_ref());

    // A contained agent may write only its case folder: its temporary files go to `tmp/`
    // there, made once, while the folder is still the harness's alone. What the agent makes of
    // it later (a file, a link, mode 000) is its own doing: a later invocation finds it as it
    // was left, and nothing the harness decides depends on it.
    let tmp = case_dir.join("tmp");
    if netns.is_some() {
        std::fs::create_dir(&tmp)
            .map_err(|e| SessionError::Harness(format!("cannot create {}: {e}", tmp.display())))?;
    }
    // Started by root, the agent is root of a user namespace of its own, nobody on the host:
    // what it must write is handed to nobody.
    let unprivileged_root = match &netns {
        Some(_) if rustix::process::geteuid().is_root() => {
            Some(agent_root(&[case_dir, &pool_path, &tmp]).await?)
        }
        _ => None,
    };
    let mut runs = Vec::new();
    for run in &scenario.agent.runs {
        let (argv, mut invocation) = agent_invocation(
            p,
            settings,
            run,
            &endpoints,
            case_dir,
            wall_deadline(timing),
        )?;
        invocation.env.extend(agent_time.iter().cloned());
        // Its own PID namespace too, where it can be made: root, or inside the user namespace
        // its network namespace came with.
        invocation.pid_namespace = netns.is_some();
        // ... and its own view of the file system: its case folder, not its neighbours' nor
        // the results.
        if netns.is_some()
            && let Some(confine) = confinement(settings, case_dir)
        {
            invocation.confine = Some(confine);
            invocation
                .env
                .push(("TMPDIR".into(), tmp.to_string_lossy().into_owned()));
        }
        invocation.netns = netns.clone();
        invocation.unprivileged_root = unprivileged_root.clone();
        invocation.activity = Some(activity.clone());
        let finished = agent_started(exec::run(&invocation).await)?;
        let exit = finished.exit.clone();
        runs.push(record(run, argv, exit, finished, &clock));
    }

    let lost = watch.and_then(|w| w.stop(&mut runs));
    drop(held);
    drop(activity);
    let mut session = after_the_agent(fake, pool_path, runs, clock).await?;
    if let Some(why) = lost {
        super::not_judged_also(&mut session.unjudgeable, why);
    }
    Ok(session)
}

/// The SYNs to a case's closed ports, inside the agent's network namespace
/// ([`fake_wireserver::syn_watch`]), with the service each port stands for.
struct ClosedPortWatch {
    watch: SynWatch,
    ports: Vec<(u16, Service)>,
}

impl ClosedPortWatch {
    /// Watching `held`'s ports in `ns`; `None` when there are none, or the namespace can only
    /// be joined by a single-threaded process (made without root): the attempts are then not
    /// seen (an exit is not judged in agent time). As root a watch that cannot be made is the
    /// harness's failure, as in the sandbox.
    fn start(
        ns: &NetNs,
        held: &[ClosedPort],
        endpoints: &Endpoints,
        clock: AgentClock,
    ) -> Result<Option<Self>, SessionError> {
        if held.is_empty() || ns.has_user_namespace() {
            return Ok(None);
        }
        let service = |p: &ClosedPort| {
            if p.url == endpoints.wireserver_url {
                Service::Wireserver
            } else if p.url == endpoints.imds_url {
                Service::Imds
            } else {
                Service::Other
            }
        };
        let ports: Vec<(u16, Service)> = held.iter().map(|p| (p.port, service(p))).collect();
        let watched: Vec<u16> = ports.iter().map(|(port, _)| *port).collect();
        let failed = |e: std::io::Error| {
            SessionError::Harness(format!(
                "cannot watch the closed ports for the agent's attempts (a packet socket in its network namespace): {e}"
            ))
        };
        let socket = ns
            .make_inside(move || {
                syn_watch::syn_socket(0, &[std::net::Ipv4Addr::LOCALHOST], &watched)
            })
            .map_err(failed)?;
        let watch = SynWatch::start(socket, clock).map_err(failed)?;
        Ok(Some(ClosedPortWatch { watch, ports }))
    }

    /// Stops watching and gives each run the attempts made while it ran; why the case cannot
    /// be judged when the watch lost any (a list with gaps would pass a loop for shorter than
    /// it was: an agent that floods a closed port loses its late attempts in the flood).
    fn stop(self, runs: &mut [RunRecord]) -> Option<String> {
        let seen = self.watch.stop();
        if seen.lost > 0 {
            return Some(format!(
                "the runner's watch of the closed ports lost {} of the agent's connection attempts (more than {} in all, or too many at once), so its retry loop is not whole and the case is not judged",
                seen.lost,
                syn_watch::MAX_ATTEMPTS
            ));
        }
        for a in seen.attempts {
            let service = self
                .ports
                .iter()
                .find(|(port, _)| *port == a.to.port())
                .map_or(Service::Other, |(_, s)| *s);
            // The runs came one after the other: an attempt is the first one's not over by
            // then, as a journal entry is (`Observation::run_of`).
            let last = runs.len().saturating_sub(1);
            let i = runs
                .iter()
                .position(|r| a.at_ms <= r.end_ms)
                .unwrap_or(last);
            if let Some(run) = runs.get_mut(i) {
                run.refused.push(RefusedAttempt {
                    at_ms: a.at_ms,
                    service,
                });
            }
        }
        None
    }
}

/// Every request the fake received, evicted ones included, and every attempt on a closed port
/// the watch saw: the agent's deadline clock starts at the first of them.
fn activity(fake: &std::sync::Arc<Fake>, watch: Option<&ClosedPortWatch>) -> exec::Activity {
    let fake = std::sync::Arc::clone(fake);
    let refused = watch.map(|w| w.watch.seen_counter());
    exec::Activity::new(move || {
        let stats = fake.journal_stats();
        let refused = refused.as_ref().map_or(0, |n| n.load(Ordering::Relaxed));
        stats.entries as u64 + stats.evicted + refused
    })
}

/// The fake's listeners inside a private network namespace of their own, which the agent is
/// to share: wireserver and IMDS, and the proxy for a proxy agent.
async fn isolated_listeners(proxy: bool) -> Result<(NetNs, Listeners), SessionError> {
    // Off the runtime's workers: making a namespace forks and waits.
    let count = if proxy { 3 } else { 2 };
    let (ns, mut bound) =
        tokio::task::spawn_blocking(move || NetNs::with_loopback_listeners(count))
            .await
            .map_err(std::io::Error::other)
            .and_then(|made| made)
            .map_err(|e| {
                SessionError::Harness(format!(
                    "cannot isolate the agent in a network namespace: {e}"
                ))
            })?;
    let mut next = || bound.pop();
    let (proxy_listener, imds, wireserver) = (if proxy { next() } else { None }, next(), next());
    let listeners = Listeners {
        wireserver,
        imds,
        proxy: proxy_listener,
        admin: None,
        ..Listeners::default()
    };
    Ok((ns, listeners))
}

/// The fake, serving, with the journal's clock.
struct StartedFake {
    clock: AgentClock,
    fake: std::sync::Arc<Fake>,
}

async fn start_fake(
    config: FakeConfig,
    listeners: Listeners,
    scale: TimeScale,
) -> Result<StartedFake, SessionError> {
    // The runner's clock starts just before the fake's, so run times are never earlier than
    // the fake's view of them (see `Observation::run_of`).
    let clock = AgentClock::new(Instant::now(), scale);
    let fake = std::sync::Arc::new(
        serve_on(config, listeners)
            .await
            .map_err(|e| SessionError::Harness(format!("the fake could not start: {e}")))?,
    );
    Ok(StartedFake { clock, fake })
}

/// Where the agent is pointed: the fake, or a closed port where the scenario wants one (kept
/// in `held`).
fn agent_endpoints(
    p: &Planned,
    fake: &Fake,
    pool_path: &Path,
    held: &mut Vec<ClosedPort>,
) -> Result<Endpoints, SessionError> {
    let scenario = &*p.scenario;
    // The port is reserved in the runner's namespace; an agent in a namespace of its own has
    // the fake's listeners there, on ports the runner's namespace may hand out again: never
    // one of them, or the closed URL would reach the fake.
    let fakes: Vec<u16> = [fake.wireserver_addr(), fake.imds_addr(), fake.proxy_addr()]
        .into_iter()
        .flatten()
        .map(|a| a.port())
        .collect();
    let mut closed = |what: &str| {
        let port = loop {
            let port = ClosedPort::new().map_err(|e| {
                SessionError::Harness(format!("cannot reserve a closed port for {what}: {e}"))
            })?;
            if !fakes.contains(&port.port) {
                break port;
            }
        };
        let url = port.url.clone();
        held.push(port);
        Ok::<_, SessionError>(url)
    };
    let (wireserver_url, imds_url, proxy_url) = match p.profile.attach {
        Attach::Proxy => (
            format!("http://{}", fake_wireserver::endpoint::WIRESERVER_HOST),
            format!("http://{}", fake_wireserver::endpoint::IMDS_HOST),
            fake.proxy_addr().map(|a| format!("http://{a}")),
        ),
        _ => (fake.wireserver_url(), fake.imds_url(), None),
    };
    let wireserver_url = match scenario.agent.wireserver {
        Target::Fake => wireserver_url,
        Target::Closed => closed("the wireserver")?,
    };
    let imds_url = match scenario.agent.imds {
        Target::Fake => imds_url,
        Target::Closed => closed("IMDS")?,
    };
    Ok(Endpoints {
        wireserver_url,
        imds_url,
        proxy_url,
        kvp_pool: pool_path.to_path_buf(),
    })
}

/// The contained agent's view of the file system: the folders it may not see, and its own
/// case folder; `None` where the runner has no case folders of its own to hide.
fn confinement(settings: &RunSettings, case_dir: &Path) -> Option<exec::Confine> {
    let (Some(cases), Some(root)) = (&settings.cases_parent, &settings.case_root) else {
        return None;
    };
    // The shared folder first: this run's folder may lie inside it.
    let shared = std::env::temp_dir().join(crate::runner::CASES_FOLDER);
    let mut hide = vec![settings.out.clone(), shared.clone()];
    // ... and the accepted snapshots: an agent that could write its own would match it.
    if let Some(snapshots) = &settings.snapshots {
        hide.push(
            snapshots
                .dir
                .canonicalize()
                .unwrap_or_else(|_| snapshots.dir.clone()),
        );
    }
    if cases != &shared {
        hide.push(cases.clone());
    }
    if !root.starts_with(cases) {
        hide.push(root.clone());
    }
    Some(exec::Confine {
        hide,
        keep: case_dir.to_path_buf(),
    })
}

/// The invocation, once it is known to have started: one that could not be contained or
/// started ends the session.
fn agent_started(finished: exec::Finished) -> Result<exec::Finished, SessionError> {
    if let Exit::ContainmentFailed(why) = &finished.exit {
        return Err(SessionError::Harness(format!(
            "the agent could not be contained: {why}"
        )));
    }
    if let Exit::SpawnFailed(why) = &finished.exit {
        return Err(SessionError::Agent(format!(
            "the agent could not be started: {why}"
        )));
    }
    Ok(finished)
}

/// The session once the agent is done: the fake's journal and what it served, then the fake
/// shut down, and the pool file the agent left.
async fn after_the_agent(
    fake: std::sync::Arc<Fake>,
    pool_path: PathBuf,
    runs: Vec<RunRecord>,
    clock: AgentClock,
) -> Result<Session, SessionError> {
    let journal = settled_journal(&fake).await;
    // The window is this case's own; when the agent sent more than it keeps, what a check
    // needs (an early wrong report) may be gone, so nothing is judged from what is left.
    let stats = fake.journal_stats();
    let mut unjudgeable = (stats.evicted > 0).then(|| {
        format!(
            "the agent sent {} requests, more than the {} (or {} bytes) a case's journal keeps; the oldest {} were dropped, so the case is not judged",
            stats.evicted + stats.entries as u64,
            stats.capacity,
            stats.max_bytes,
            stats.evicted
        )
    });
    let served = fake.served_ids();
    match std::sync::Arc::try_unwrap(fake) {
        Ok(fake) => fake
            .shutdown()
            .await
            .map_err(|e| SessionError::Harness(e.to_string()))?,
        Err(_) => return Err(SessionError::Harness("the fake is still in use".into())),
    }
    // The pool file is the agent's: it may have made it anything (a FIFO would block this read
    // for ever, a link to /dev/zero would never end).
    let pool = tokio::task::spawn_blocking(move || read_agent_file(&pool_path, POOL_READ_MAX))
        .await
        .map_err(|e| SessionError::Harness(format!("reading the pool failed: {e}")))?;
    let pool = match pool {
        Ok(pool) => pool,
        Err(why) => {
            let why = format!("its pool file {POOL_FILE} {why}, so the case is not judged");
            unjudgeable = Some(match unjudgeable {
                Some(before) => format!("{before}; {why}"),
                None => format!("after the agent ran, {why}"),
            });
            None
        }
    };
    Ok(Session {
        journal,
        served,
        pool,
        runs,
        clock,
        unjudgeable,
        guest_calls: Vec::new(),
        guest_users: None,
    })
}

/// A user namespace for an agent started by root, with `paths` handed to its host identity.
async fn agent_root(paths: &[&Path]) -> Result<UnprivilegedRoot, SessionError> {
    for path in paths {
        userns::hand_over(path).map_err(|e| SessionError::Harness(e.to_string()))?;
    }
    // Off the runtime's workers: making the namespace forks and waits.
    tokio::task::spawn_blocking(UnprivilegedRoot::new)
        .await
        .map_err(std::io::Error::other)
        .and_then(|made| made)
        .map_err(|e| {
            SessionError::Harness(format!(
                "cannot give the agent a user namespace of its own: {e}"
            ))
        })
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
            .any(|e| e.done_ms.is_none() && e.answer.kind.delivery() != Delivery::Never);
        if !pending || Instant::now() >= until {
            journal.sort_by_key(|e| e.seq);
            return journal;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Longest wait for the journal to settle after the agent is done.
const SETTLE_MAX: Duration = Duration::from_secs(3);

/// Each invocation's deadline on the wall clock.
fn wall_deadline(timing: &CaseTiming) -> Duration {
    Duration::from_secs_f64(timing.wall_deadline())
}
