//! The [`Fake`] handle: start the listeners in-process, get their URLs, load scenarios, read the
//! journal, declare expectations (verified on drop).

use std::net::SocketAddr;
use std::panic::Location;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::clock::{AgentClock, TimeScale};
use crate::documents::Addresses;
use crate::expect::Expectation;
use crate::http1::Limits;
use crate::journal::Listener;
use crate::journal::{DEFAULT_CAPACITY, DEFAULT_MAX_BYTES, Entry, Journal, JournalStats};
use crate::journal_file::JournalFileError;
use crate::oracle::ServedIds;
use crate::scenario::{Scenario, ScenarioError};
use crate::server::{EngineSlot, Shared, accept_loop};
use crate::sync::lock;

/// Bodies over this many bytes are refused with 413 (default).
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;
/// Default deadline for reading one request, and for an idle keep-alive connection.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// Default deadline for the rest of a request head once its first byte arrived (slowloris).
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Default cap on open connections per agent listener. At the cap, an idle connection (waiting
/// for, or inside, a request) is closed to make room — first one that never sent a byte, then
/// one inside its first request, then a keep-alive one, each the longest silent first;
/// connections whose request is being answered are never closed for room. Lowered to fit the
/// open-file limit (`fdlimit::listener_cap`); the binaries raise that limit first.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// How to run a fake. `FakeConfig::default()`: wireserver and IMDS on ephemeral `127.0.0.1`
/// ports, no proxy, no admin listener, default documents.
#[derive(Debug, Clone)]
pub struct FakeConfig {
    /// `None` = no wireserver listener.
    pub wireserver: Option<SocketAddr>,
    /// `None` = no IMDS listener.
    pub imds: Option<SocketAddr>,
    /// The HostGAPlugin listener (WALA's port 32526; default none).
    pub hostplugin: Option<SocketAddr>,
    /// Proxy mode listener (absolute-form targets routed by host).
    pub proxy: Option<SocketAddr>,
    /// The admin API listener (loopback only; the binary always has one).
    pub admin: Option<SocketAddr>,
    /// The scenario in effect from the start (default: none, the default documents).
    pub scenario: Scenario,
    /// Also write the journal as JSON Lines here (everything, flushed per entry).
    pub journal_file: Option<PathBuf>,
    /// Entries kept in memory (oldest dropped first).
    pub journal_capacity: usize,
    /// Bytes the in-memory window retains at most (oldest dropped first; the newest entry is
    /// always kept). See [`Entry::retained_bytes`].
    pub journal_max_bytes: usize,
    /// Request bodies over this many bytes get 413; see [`DEFAULT_MAX_BODY`].
    pub max_body_bytes: usize,
    /// See [`DEFAULT_READ_TIMEOUT`].
    pub read_timeout: Duration,
    /// See [`DEFAULT_HEAD_TIMEOUT`].
    pub head_timeout: Duration,
    /// Per agent listener; see [`DEFAULT_MAX_CONNECTIONS`].
    pub max_connections: usize,
    /// Folders a scenario posted to the admin API may load `body_file`s from, besides its own
    /// folder (`?origin=PATH`). Empty: only the scenario's own folder, and no files at all for a
    /// scenario posted without an origin.
    pub allow_files: Vec<PathBuf>,
    /// The speed of the fake's clock: scripted times and the journal's in agent time
    /// ([`crate::clock`]); the wall clock by default.
    pub time_scale: TimeScale,
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            wireserver: Some(loopback()),
            imds: Some(loopback()),
            hostplugin: None,
            proxy: None,
            admin: None,
            scenario: Scenario::new(),
            journal_file: None,
            journal_capacity: DEFAULT_CAPACITY,
            journal_max_bytes: DEFAULT_MAX_BYTES,
            max_body_bytes: DEFAULT_MAX_BODY,
            read_timeout: DEFAULT_READ_TIMEOUT,
            head_timeout: DEFAULT_HEAD_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            allow_files: Vec::new(),
            time_scale: TimeScale::WALL,
        }
    }
}

impl FakeConfig {
    /// Starts with this scenario.
    pub fn scenario(mut self, scenario: Scenario) -> Self {
        self.scenario = scenario;
        self
    }
    /// The wireserver listener (`None` = none; port 0 = ephemeral).
    pub fn wireserver(mut self, addr: Option<SocketAddr>) -> Self {
        self.wireserver = addr;
        self
    }
    /// The IMDS listener (`None` = none; port 0 = ephemeral).
    pub fn imds(mut self, addr: Option<SocketAddr>) -> Self {
        self.imds = addr;
        self
    }
    /// The HostGAPlugin listener (`None` = none, the default; port 0 = ephemeral).
    pub fn hostplugin(mut self, addr: Option<SocketAddr>) -> Self {
        self.hostplugin = addr;
        self
    }
    /// Enables proxy mode on `addr` (port 0 = ephemeral).
    pub fn proxy(mut self, addr: SocketAddr) -> Self {
        self.proxy = Some(addr);
        self
    }
    /// Enables proxy mode on an ephemeral loopback port.
    pub fn with_proxy(self) -> Self {
        self.proxy(loopback())
    }
    /// Enables the admin API on `addr` (loopback; port 0 = ephemeral).
    pub fn admin(mut self, addr: SocketAddr) -> Self {
        self.admin = Some(addr);
        self
    }
    /// Also writes the journal as JSON Lines to `path` (`--journal`).
    pub fn journal_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.journal_file = Some(path.into());
        self
    }
    /// Entries the in-memory window keeps (oldest dropped first).
    pub fn journal_capacity(mut self, n: usize) -> Self {
        self.journal_capacity = n;
        self
    }
    /// Bytes the in-memory window retains at most (oldest dropped first).
    pub fn journal_max_bytes(mut self, n: usize) -> Self {
        self.journal_max_bytes = n;
        self
    }
    /// Request bodies over `n` bytes get 413.
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.max_body_bytes = n;
        self
    }
    /// Deadline for reading one request and for an idle keep-alive connection.
    pub fn read_timeout(mut self, t: Duration) -> Self {
        self.read_timeout = t;
        self
    }
    /// Deadline for the rest of a request head once its first byte arrived.
    pub fn head_timeout(mut self, t: Duration) -> Self {
        self.head_timeout = t;
        self
    }
    /// At least 1.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }
    /// Also allows scenarios posted to the admin API to load files from `dir` (repeatable;
    /// `--allow-files`).
    pub fn allow_files(mut self, dir: impl Into<PathBuf>) -> Self {
        self.allow_files.push(dir.into());
        self
    }
    /// Runs the fake's clock in agent time at `scale` ([`crate::clock`]).
    pub fn time_scale(mut self, scale: TimeScale) -> Self {
        self.time_scale = scale;
        self
    }
}

/// Why a fake could not start.
#[derive(Debug, thiserror::Error)]
pub enum FakeError {
    /// A listener address could not be bound.
    #[error("cannot listen for the {listener} on {addr}: {source}")]
    Bind {
        /// Which listener (`"wireserver"`, `"imds"`, ...).
        listener: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A pre-bound listener could not be used (non-blocking mode, local address).
    #[error("{listener} listener: {source}")]
    Listener {
        /// Which listener.
        listener: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The `--journal` file could not be created.
    #[error("cannot create the journal file {path}: {source}")]
    Journal {
        /// The file asked for.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The admin token could not be generated.
    #[error("cannot generate the admin token from /dev/urandom: {0}")]
    Token(#[source] std::io::Error),
    /// The scenario breaks a rule a scenario file obeys ([`Scenario::validate`]): e.g. a plan
    /// for an endpoint id that does not exist, which would never answer anything.
    #[error("invalid scenario: {0}")]
    Scenario(#[source] crate::scenario::ScenarioError),
    /// [`Fake::start_blocking`] could not build its runtime, or was called inside one.
    #[error("cannot start the fake's runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Already-bound listeners, for callers that must bind in a special place (e.g. inside a network
/// namespace, on `168.63.129.16:80` and `169.254.169.254:80`). See [`serve_on`].
#[derive(Debug, Default)]
pub struct Listeners {
    /// For agents' wireserver requests.
    pub wireserver: Option<std::net::TcpListener>,
    /// For IMDS requests.
    pub imds: Option<std::net::TcpListener>,
    /// For the HostGAPlugin (port 32526).
    pub hostplugin: Option<std::net::TcpListener>,
    /// For proxy mode.
    pub proxy: Option<std::net::TcpListener>,
    /// For the admin API (loopback only).
    pub admin: Option<std::net::TcpListener>,
}

impl Listeners {
    /// Binds the addresses of `config` on the calling thread (its network namespace).
    pub fn bind(config: &FakeConfig) -> Result<Listeners, FakeError> {
        let bind = |listener: &'static str, addr: Option<SocketAddr>| -> Result<_, FakeError> {
            addr.map(|addr| {
                std::net::TcpListener::bind(addr).map_err(|source| FakeError::Bind {
                    listener,
                    addr,
                    source,
                })
            })
            .transpose()
        };
        Ok(Listeners {
            wireserver: bind("wireserver", config.wireserver)?,
            imds: bind("imds", config.imds)?,
            hostplugin: bind("hostplugin", config.hostplugin)?,
            proxy: bind("proxy", config.proxy)?,
            admin: bind("admin", config.admin)?,
        })
    }
}

/// Runs a fake on already-bound listeners (the addresses in `config` are ignored). Must be
/// called inside a tokio runtime; the fake runs until the returned handle is shut down or
/// dropped.
pub async fn serve_on(config: FakeConfig, listeners: Listeners) -> Result<Fake, FakeError> {
    // A scenario built in code skipped the parser: hold it to the same rules before serving.
    config.scenario.validate().map_err(FakeError::Scenario)?;
    let shared = Arc::new(shared_state(&config)?);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    let mut addrs = Addresses {
        wireserver: None,
        imds: None,
        hostplugin: None,
        proxy: None,
        admin: None,
    };
    let agent_listeners = [
        (Listener::Wireserver, listeners.wireserver),
        (Listener::Imds, listeners.imds),
        (Listener::HostPlugin, listeners.hostplugin),
        (Listener::Proxy, listeners.proxy),
    ];
    let count = agent_listeners.iter().filter(|(_, l)| l.is_some()).count();
    let cap = connection_cap(config.max_connections, count);
    for (kind, listener) in agent_listeners {
        let Some(listener) = listener else { continue };
        let (listener, addr) = to_tokio(kind.as_str(), listener)?;
        match kind {
            Listener::Wireserver => addrs.wireserver = Some(addr),
            Listener::Imds => addrs.imds = Some(addr),
            Listener::HostPlugin => addrs.hostplugin = Some(addr),
            Listener::Proxy => addrs.proxy = Some(addr),
        }
        tasks.push(tokio::spawn(accept_loop(
            shared.clone(),
            kind,
            listener,
            cap,
            shutdown_rx.clone(),
        )));
    }
    let mut admin_token = None;
    if let Some(listener) = listeners.admin {
        let admin = serve_admin(&config, &shared, listener, shutdown_rx.clone())?;
        addrs.admin = Some(admin.local);
        admin_token = Some(admin.token);
        tasks.push(admin.task);
    }
    Ok(Fake {
        shared,
        addrs,
        admin_token,
        shutdown: shutdown_tx,
        tasks,
        expectations: Mutex::new(Vec::new()),
        runtime: None,
    })
}

/// What the listeners share: the clock, the journal (its file created here), the scenario
/// engine and the request limits.
fn shared_state(config: &FakeConfig) -> Result<Shared, FakeError> {
    let journal = Journal::new(
        config.journal_capacity,
        config.journal_max_bytes,
        config.journal_file.as_deref(),
    )
    .map_err(|source| FakeError::Journal {
        path: config.journal_file.clone().unwrap_or_default(),
        source,
    })?;
    let clock = AgentClock::new(Instant::now(), config.time_scale);
    Ok(Shared {
        clock,
        journal: Mutex::new(journal),
        engine: Mutex::new(EngineSlot::new(config.scenario.clone(), clock.now())),
        limits: Limits {
            max_head: 64 * 1024,
            max_body: config.max_body_bytes,
            read_timeout: config.read_timeout,
            head_timeout: config.head_timeout,
        },
        bodies: crate::bodies::BodyBudget::new(config.max_body_bytes),
    })
}

/// The cap on open connections of each of `listeners` agent listeners: `max_connections`,
/// lowered to fit the open-file limit (warned about once).
fn connection_cap(max_connections: usize, listeners: usize) -> usize {
    // Descriptors run out before the cap under a low open-file limit: `accept` would fail
    // instead of closing an idle connection (crate::fdlimit).
    let soft = crate::fdlimit::soft_limit();
    let cap = crate::fdlimit::listener_cap(max_connections.max(1), listeners, soft);
    // Once per process: wirecheck starts a fake per case.
    static LOWERED: std::sync::Once = std::sync::Once::new();
    if cap < max_connections {
        LOWERED.call_once(|| {
            tracing::warn!(
                "open-file limit {}: each agent listener holds at most {cap} connections (not {})",
                soft.unwrap_or(0),
                max_connections
            );
        });
    }
    cap
}

/// A pre-bound listener, made non-blocking for tokio, and the address it listens on.
fn to_tokio(
    name: &'static str,
    listener: std::net::TcpListener,
) -> Result<(TcpListener, SocketAddr), FakeError> {
    let listener = listener
        .set_nonblocking(true)
        .and_then(|()| TcpListener::from_std(listener))
        .map_err(|source| FakeError::Listener {
            listener: name,
            source,
        })?;
    // Before any request: its connections' arrivals are the kernel's times (crate::rx_stamp).
    crate::rx_stamp::enable(&listener);
    let addr = listener
        .local_addr()
        .map_err(|source| FakeError::Listener {
            listener: name,
            source,
        })?;
    Ok((listener, addr))
}

/// The admin API, serving until shutdown.
struct AdminServer {
    local: SocketAddr,
    /// The bearer token it asks for.
    token: String,
    task: JoinHandle<()>,
}

/// Starts the admin API on `listener`, with a new token.
fn serve_admin(
    config: &FakeConfig,
    shared: &Arc<Shared>,
    listener: std::net::TcpListener,
    mut shutdown: watch::Receiver<bool>,
) -> Result<AdminServer, FakeError> {
    let (listener, local) = to_tokio("admin", listener)?;
    let token = crate::admin::new_token().map_err(FakeError::Token)?;
    let app = crate::admin::router(crate::admin::AdminState {
        shared: shared.clone(),
        token: token.clone(),
        local,
        allow_files: config.allow_files.clone(),
    });
    // Capped, and silent connections closed, like the agent listeners (crate::conns).
    let listener = crate::conns::AdminListener::new(listener, config.read_timeout);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = shutdown.changed().await;
            })
            .await;
    });
    Ok(AdminServer { local, token, task })
}

/// A running fake wireserver + IMDS. Dropping it stops the listeners and verifies the
/// expectations (panicking with a clear message if one is not met, unless already panicking).
pub struct Fake {
    shared: Arc<Shared>,
    addrs: Addresses,
    admin_token: Option<String>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// Each with the line of the `expect` call that set it, named when it fails.
    expectations: Mutex<Vec<(Expectation, &'static Location<'static>)>>,
    /// The fake's own runtime when started by [`Fake::start_blocking`].
    runtime: Option<tokio::runtime::Runtime>,
}

impl Fake {
    /// Binds the addresses of `config` (ephemeral loopback ports by default) and starts serving.
    /// A scenario that breaks a rule of the file format is refused ([`FakeError::Scenario`]).
    pub async fn start(config: FakeConfig) -> Result<Fake, FakeError> {
        let listeners = Listeners::bind(&config)?;
        serve_on(config, listeners).await
    }

    /// [`Fake::start`] for a test without a runtime (a plain `#[test]`): the fake runs on a
    /// runtime of its own (two worker threads), stopped when the handle drops. Inside a tokio
    /// runtime it refuses ([`FakeError::Runtime`]): use [`Fake::start`] there.
    ///
    /// ```
    /// use fake_wireserver::{Fake, FakeConfig};
    /// let fake = Fake::start_blocking(FakeConfig::default())?;
    /// let mut conn = std::net::TcpStream::connect(fake.wireserver_addr().unwrap())?;
    /// # use std::io::{Read, Write};
    /// conn.write_all(b"GET /?comp=versions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    /// let mut answer = String::new();
    /// conn.read_to_string(&mut answer)?;
    /// assert!(answer.starts_with("HTTP/1.1 200 OK"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_blocking(config: FakeConfig) -> Result<Fake, FakeError> {
        // Blocking on a runtime thread would panic inside tokio; say what to do instead.
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(FakeError::Runtime(std::io::Error::other(
                "Fake::start_blocking was called inside a tokio runtime; use Fake::start(config).await there",
            )));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fake-wireserver")
            .enable_all()
            .build()
            .map_err(FakeError::Runtime)?;
        let mut fake = runtime.block_on(Fake::start(config))?;
        fake.runtime = Some(runtime);
        Ok(fake)
    }

    /// `http://127.0.0.1:PORT`. Panics if the wireserver listener is disabled.
    pub fn wireserver_url(&self) -> String {
        format!(
            "http://{}",
            self.addrs
                .wireserver
                .expect("this fake has no wireserver listener (FakeConfig::wireserver(None))")
        )
    }

    /// `http://127.0.0.1:PORT` (agents append `/metadata/...`). Panics if IMDS is disabled.
    pub fn imds_url(&self) -> String {
        format!(
            "http://{}",
            self.addrs
                .imds
                .expect("this fake has no IMDS listener (FakeConfig::imds(None))")
        )
    }

    /// The wireserver listener's address, when it runs.
    pub fn wireserver_addr(&self) -> Option<SocketAddr> {
        self.addrs.wireserver
    }
    /// The IMDS listener's address, when it runs.
    pub fn imds_addr(&self) -> Option<SocketAddr> {
        self.addrs.imds
    }
    /// The HostGAPlugin listener, when configured.
    pub fn hostplugin_addr(&self) -> Option<SocketAddr> {
        self.addrs.hostplugin
    }
    /// The proxy listener, when proxy mode is configured.
    pub fn proxy_addr(&self) -> Option<SocketAddr> {
        self.addrs.proxy
    }
    /// The admin API's address, when it runs ([`FakeConfig::admin`]).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.addrs.admin
    }
    /// Milliseconds on the journal's clock (agent time since the fake started): what an
    /// entry's `at_ms` would say now. The sandbox stamps its agent's start and exit with it, so
    /// they compare with the journal's times without a second clock.
    pub fn clock_ms(&self) -> u64 {
        self.shared.clock.now_ms()
    }

    /// The journal's clock: its origin and speed.
    pub fn clock(&self) -> AgentClock {
        self.shared.clock
    }

    /// The admin API's token (`Authorization: Bearer TOKEN` on every admin request), generated
    /// at start; `None` without an admin listener.
    pub fn admin_token(&self) -> Option<&str> {
        self.admin_token.as_deref()
    }
    /// All listener addresses (the binary's ready line).
    pub fn addresses(&self) -> &Addresses {
        &self.addrs
    }

    /// The in-memory journal window, oldest first.
    pub fn journal(&self) -> Vec<Entry> {
        lock(&self.shared.journal).snapshot()
    }

    /// The in-memory window's size and bounds (entries, retained bytes, evictions).
    pub fn journal_stats(&self) -> JournalStats {
        lock(&self.shared.journal).stats()
    }

    /// Why the `--journal` file ([`FakeConfig::journal_file`]) misses entries, once a write to
    /// it failed (a full disk, a file size limit): the first error, the first `seq` missing and
    /// how many are. `None` while it has every entry, and without a file.
    pub fn journal_file_error(&self) -> Option<JournalFileError> {
        lock(&self.shared.journal).file_error()
    }

    /// Replaces the scenario (plans start from their first step; triggers count from now).
    /// A scenario that breaks a rule of the file format ([`Scenario::validate`]) is refused and
    /// the one in effect stays.
    pub fn load_scenario(&self, scenario: Scenario) -> Result<(), ScenarioError> {
        scenario.validate()?;
        self.shared.load_scenario(scenario);
        Ok(())
    }

    /// Empties the journal window and rewinds the scenario.
    pub fn reset(&self) {
        self.shared.reset();
    }

    /// The scenario in effect.
    pub fn scenario(&self) -> Scenario {
        lock(&self.shared.engine).engine.scenario().clone()
    }

    /// The goal state ids in effect now (after any incarnation bumps).
    pub fn served_ids(&self) -> ServedIds {
        self.shared.served_ids()
    }

    /// Adds an expectation, verified when the fake is dropped (or by [`Fake::verify`]). A
    /// failure names the file and line of this call.
    #[track_caller]
    pub fn expect(&self, expectation: Expectation) {
        lock(&self.expectations).push((expectation, Location::caller()));
    }

    /// Checks every expectation now; the error lists each one not met, prefixed with the
    /// `file:line:column` of the [`Fake::expect`] call that set it.
    pub fn verify(&self) -> Result<(), String> {
        let journal = self.journal();
        let failures: Vec<String> = lock(&self.expectations)
            .iter()
            .filter_map(|(e, at)| {
                e.check(&journal)
                    .err()
                    .map(|message| format!("{at}: {message}"))
            })
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "fake-wireserver: {} expectation(s) not met:\n{}",
                failures.len(),
                failures.join("\n")
            ))
        }
    }

    /// Stops the listeners and waits for them (open connections are closed). Requests whose
    /// answer was still pending go to the `--journal` file as they stand (`done_ms` null).
    /// `Err` when that file misses entries because a write to it failed (a full disk): the
    /// journal is incomplete, whatever else went well.
    pub async fn shutdown(mut self) -> Result<(), JournalFileError> {
        let _ = self.shutdown.send(true);
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
        let mut journal = lock(&self.shared.journal);
        journal.flush_pending();
        journal.file_error().map_or(Ok(()), Err)
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        for task in &self.tasks {
            task.abort();
        }
        // The aborted tasks end with the runtime's threads (the socket loops are gone
        // before the expectations are judged).
        if let Some(runtime) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Blocking inside a runtime would panic; its threads end on their own.
                runtime.shutdown_background();
            } else {
                runtime.shutdown_timeout(Duration::from_secs(5));
            }
        }
        lock(&self.shared.journal).flush_pending();
        if std::thread::panicking() {
            return;
        }
        let expectations = std::mem::take(&mut *lock(&self.expectations));
        if expectations.is_empty() {
            return;
        }
        *lock(&self.expectations) = expectations;
        if let Err(message) = self.verify() {
            panic!("{message}");
        }
    }
}
