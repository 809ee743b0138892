//! Listeners and connections: accept, read a request (bounded), route it (by listener, or by
//! target authority / Host in proxy mode), classify it, ask the scenario engine, journal it, and
//! answer — either with the axum routers' default documents or with a scripted fault acted out
//! on the raw socket.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt;

use crate::conns::{ConnHandle, ConnTable, Room};
use crate::documents::{
    Documents, JSON_CONTENT_TYPE, SERVER_HEADER, THROTTLED_BODY, XML_CONTENT_TYPE,
};
use crate::endpoint::{self, Service};
use crate::engine::{Decision, Engine};
use crate::http1::{self, Limits, Outgoing, Partial, ReadError, Request};
use crate::inspect::{self, RequestView};
use crate::journal::{Answer, Entry, Journal, body_fields};
use crate::oracle::{self, Finding, ServedIds};
use crate::scenario::{Action, Preset, Reply, Scenario};

/// Which listener accepted a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListenerKind {
    Wireserver,
    Imds,
    HostPlugin,
    Proxy,
}

impl ListenerKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ListenerKind::Wireserver => "wireserver",
            ListenerKind::Imds => "imds",
            ListenerKind::HostPlugin => "hostplugin",
            ListenerKind::Proxy => "proxy",
        }
    }
}

/// Per-request context handed to the axum routers (as an extension).
#[derive(Clone)]
pub(crate) struct RequestCtx {
    pub documents: Arc<Documents>,
    pub ids: ServedIds,
    /// `http://host:port` as the agent addressed the service.
    pub base_url: String,
    pub reprovision_available: bool,
}

/// State shared by every listener of one fake.
pub(crate) struct Shared {
    pub started: Instant,
    pub journal: Mutex<Journal>,
    pub engine: Mutex<EngineSlot>,
    pub limits: Limits,
}

/// The engine plus the documents it serves (shared cheaply with the routers).
pub(crate) struct EngineSlot {
    pub engine: Engine,
    pub documents: Arc<Documents>,
}

impl EngineSlot {
    pub(crate) fn new(scenario: Scenario, now: Instant) -> Self {
        let engine = Engine::new(scenario, now);
        let documents = Arc::new(engine.documents().clone());
        EngineSlot { engine, documents }
    }
}

/// Locks without ever panicking: a panic elsewhere must not take the fake down.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    pub(crate) fn ms(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.started).as_millis()).unwrap_or(u64::MAX)
    }
    fn now_ms(&self) -> u64 {
        self.ms(Instant::now())
    }
    pub(crate) fn load_scenario(&self, scenario: Scenario) {
        *lock(&self.engine) = EngineSlot::new(scenario, Instant::now());
    }
    pub(crate) fn reset(&self) {
        lock(&self.journal).clear();
        let mut slot = lock(&self.engine);
        slot.engine.rewind(Instant::now());
    }
    pub(crate) fn served_ids(&self) -> ServedIds {
        lock(&self.engine).engine.served_ids(Instant::now())
    }
}

/// Accepts connections until `shutdown` flips; dropping the set aborts open connections. At the
/// connection cap a new connection closes the longest-idle one ([`crate::conns`]), or waits
/// for any to end when all are busy.
pub(crate) async fn accept_loop(
    shared: Arc<Shared>,
    kind: ListenerKind,
    listener: TcpListener,
    cap: usize,
    mut shutdown: watch::Receiver<bool>,
) {
    let table = ConnTable::new(cap);
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) if crate::fdlimit::out_of_descriptors(&e) => {
                    // Out of descriptors below the cap (several fakes in one process, or a
                    // low limit): close an idle connection and wait for its socket to go,
                    // rather than retrying until someone else lets go.
                    match table.shed() {
                        Room::Evicted { total, warn } => {
                            if warn {
                                tracing::warn!(
                                    "{}: out of file descriptors ({e}); closed an idle connection to make room ({total} closed so far)",
                                    kind.name()
                                );
                            }
                            let _ = tokio::time::timeout(
                                Duration::from_millis(100),
                                connections.join_next(),
                            )
                            .await;
                        }
                        Room::Free | Room::Full => {
                            tracing::warn!("{} accept: {e}", kind.name());
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                    continue;
                }
                Err(e) => {
                    // Other failures: back off instead of spinning.
                    tracing::warn!("{} accept: {e}", kind.name());
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        loop {
            match table.make_room() {
                Room::Free => break,
                Room::Evicted { total, warn } => {
                    // Logged, not journaled: an idle connection sent no request (the journal
                    // is of requests, and a flood would push real entries out of its window);
                    // one that had sent part of a request journals it as `http.incomplete`.
                    if warn {
                        tracing::warn!(
                            "{}: at its {}-connection limit; closed the connection idle the longest to make room ({total} closed so far)",
                            kind.name(),
                            table.cap()
                        );
                    }
                    break;
                }
                Room::Full => {
                    tokio::select! {
                        _ = connections.join_next() => {}
                        _ = shutdown.changed() => return,
                    }
                }
            }
        }
        let shared = shared.clone();
        let handle = table.register();
        let _ = stream.set_nodelay(true);
        connections.spawn(async move {
            serve_connection(shared, kind, stream, peer, handle).await;
        });
    }
}

/// How a connection goes on after an exchange.
enum Flow {
    KeepAlive,
    Close,
    /// The stream was consumed (reset, hang ended).
    Gone,
}

/// Who is at both ends of a connection (the client string formatted once, not per request).
struct Conn {
    kind: ListenerKind,
    peer: SocketAddr,
    /// `peer` as the journal writes it.
    client: String,
    local: Option<SocketAddr>,
}

async fn serve_connection(
    shared: Arc<Shared>,
    kind: ListenerKind,
    mut stream: TcpStream,
    peer: SocketAddr,
    handle: ConnHandle,
) {
    let conn = Conn {
        kind,
        peer,
        client: peer.to_string(),
        local: stream.local_addr().ok(),
    };
    let mut buf = Vec::new();
    loop {
        handle.idle();
        match http1::read_request(&mut stream, &mut buf, shared.limits, &handle).await {
            Ok(req) => {
                handle.busy();
                let keep_alive = req.keep_alive();
                match exchange(&shared, &conn, &mut stream, req, keep_alive).await {
                    Flow::KeepAlive if keep_alive => continue,
                    Flow::Gone => return,
                    Flow::KeepAlive | Flow::Close => {
                        let _ = stream.shutdown().await;
                        return;
                    }
                }
            }
            Err(ReadError::Idle) => return,
            Err(err) => {
                bad_request(&shared, &conn, &mut stream, err).await;
                return;
            }
        }
    }
}

/// Journals and answers a request that could not be read completely.
async fn bad_request(shared: &Shared, conn: &Conn, stream: &mut TcpStream, err: ReadError) {
    let (status, finding, partial) = match err {
        ReadError::Idle => return,
        ReadError::Malformed { reason, partial } => (
            Some(400),
            Finding::error(
                "http.malformed",
                format!("malformed HTTP request: {reason} (answered 400, closed)"),
            ),
            partial,
        ),
        ReadError::HeadTooLarge { partial } => (
            Some(431),
            Finding::error(
                "http.head-too-large",
                format!(
                    "request head or trailer section over {} bytes or over {} fields (answered 431, closed)",
                    shared.limits.max_head,
                    http1::MAX_HEADERS
                ),
            ),
            partial,
        ),
        ReadError::BodyTooLarge { partial, declared } => (
            Some(413),
            Finding::error(
                "http.body-too-large",
                match declared {
                    Some(n) => format!(
                        "Content-Length {n} over the {} byte limit (answered 413, closed)",
                        shared.limits.max_body
                    ),
                    None => format!(
                        "chunked body over the {} byte limit (answered 413, closed)",
                        shared.limits.max_body
                    ),
                },
            ),
            partial,
        ),
        ReadError::Incomplete { reason, partial } => (
            None,
            Finding::warning(
                "http.incomplete",
                format!("{reason}; connection closed without an answer"),
            ),
            partial,
        ),
    };
    let endpoint = match conn.kind {
        ListenerKind::Wireserver => endpoint::WIRESERVER_UNKNOWN,
        ListenerKind::Imds => endpoint::IMDS_UNKNOWN,
        ListenerKind::HostPlugin => endpoint::HOSTPLUGIN_UNKNOWN,
        ListenerKind::Proxy => endpoint::PROXY_UNKNOWN_HOST,
    };
    let at = Instant::now();
    let mut entry = new_entry(shared, conn, &partial_request(partial, at), endpoint);
    entry.findings.push(finding);
    entry.answer = Answer {
        kind: if status.is_some() { "default" } else { "close" }.into(),
        status,
        step: None,
    };
    let seq = lock(&shared.journal).begin(entry);
    if let Some(status) = status {
        let out = Outgoing::new(status, vec![], Vec::new());
        let _ = stream.write_all(&out.head(true)).await;
        let _ = stream.shutdown().await;
        // Drain briefly so the client reads our answer instead of an RST.
        let mut sink = [0u8; 4096];
        let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
        while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut sink)).await {
            if n == 0 {
                break;
            }
        }
    }
    let done = shared.now_ms();
    lock(&shared.journal).finish(seq, |e| e.done_ms = Some(done));
}

fn partial_request(p: Partial, at: Instant) -> Request {
    Request {
        method: p.method,
        target: p.target,
        http_version: p.http_version,
        headers: p.headers,
        body: p.body,
        head_at: at,
    }
}

fn new_entry(shared: &Shared, conn: &Conn, req: &Request, endpoint: &str) -> Entry {
    let (body, body_b64, body_len, body_truncated) = body_fields(&req.body);
    Entry {
        seq: 0,
        at_ms: shared.ms(req.head_at),
        done_ms: None,
        listener: conn.kind.name().into(),
        client: conn.client.clone(),
        method: req.method.clone(),
        target: req.target.clone(),
        http_version: req.http_version.to_owned(),
        headers: req.headers.clone(),
        body,
        body_b64,
        body_len,
        body_truncated,
        endpoint: endpoint.into(),
        answer: Answer {
            kind: "default".into(),
            status: None,
            step: None,
        },
        report: None,
        findings: Vec::new(),
        client_closed_ms: None,
    }
}

/// Where a request goes.
enum Route {
    Service(Service),
    /// Proxy mode, a host that is neither service.
    UnknownHost,
}

/// Handles one complete request on the connection.
async fn exchange(
    shared: &Shared,
    conn: &Conn,
    stream: &mut TcpStream,
    req: Request,
    keep_alive: bool,
) -> Flow {
    let kind = conn.kind;
    let parts = endpoint::split_target(&req.target);
    let host_header = req.header("host");
    let mut findings = Vec::new();

    let route = match kind {
        ListenerKind::Wireserver => Route::Service(Service::Wireserver),
        ListenerKind::Imds => Route::Service(Service::Imds),
        ListenerKind::HostPlugin => Route::Service(Service::HostPlugin),
        ListenerKind::Proxy if req.method.eq_ignore_ascii_case("CONNECT") => {
            findings.push(Finding::error(
                "proxy.connect",
                format!(
                    "CONNECT {} through the proxy: tunnels are not served (answered 502)",
                    req.target
                ),
            ));
            Route::UnknownHost
        }
        ListenerKind::Proxy => match parts.authority.or(host_header).map(endpoint::host_of) {
            // The HostGAPlugin is the wireserver address on port 32526.
            Some(endpoint::WIRESERVER_HOST)
                if parts.authority.or(host_header).and_then(endpoint::port_of)
                    == Some(endpoint::HOSTPLUGIN_PORT) =>
            {
                Route::Service(Service::HostPlugin)
            }
            Some(endpoint::WIRESERVER_HOST) => Route::Service(Service::Wireserver),
            Some(endpoint::IMDS_HOST) => Route::Service(Service::Imds),
            other => {
                let host = other.unwrap_or("").to_owned();
                findings.push(Finding::error(
                        "proxy.unknown-host",
                        format!(
                            "proxy request for host {host:?}: neither the wireserver ({}) nor IMDS ({}) (answered 502)",
                            endpoint::WIRESERVER_HOST,
                            endpoint::IMDS_HOST
                        ),
                    ));
                Route::UnknownHost
            }
        },
    };

    let query = endpoint::decode_query(parts.query);
    let admin_path = parts.path.starts_with("/__admin");
    let endpoint_id = match &route {
        Route::Service(Service::Imds) if admin_path => endpoint::IMDS_UNKNOWN,
        Route::Service(Service::Wireserver) if admin_path => endpoint::WIRESERVER_UNKNOWN,
        Route::Service(Service::HostPlugin) if admin_path => endpoint::HOSTPLUGIN_UNKNOWN,
        Route::Service(service) => endpoint::classify(*service, parts.path, &query),
        Route::UnknownHost => endpoint::PROXY_UNKNOWN_HOST,
    };
    if admin_path {
        findings.push(Finding::warning(
            "path.admin-on-agent-listener",
            format!(
                "{} reached the {} listener; the admin API lives on its own loopback listener (answered 404)",
                parts.path,
                kind.name()
            ),
        ));
    } else if let Route::Service(service) = route {
        findings.extend(inspect::findings(&RequestView {
            service,
            endpoint: endpoint_id,
            method: &req.method,
            path: parts.path,
            query: &query,
            headers: &req.headers,
            http_version: req.http_version,
        }));
        if endpoint_id == endpoint::WIRESERVER_CONFIG {
            let t = query
                .iter()
                .find(|(k, _)| k == "type")
                .map(|(_, v)| v.as_ref());
            if !t.is_some_and(|t| t.eq_ignore_ascii_case("sharedConfig")) {
                findings.push(Finding::warning(
                    "config.unknown-type",
                    format!("config type {t:?} is not named in the goal state (answered 404)"),
                ));
            }
        }
    }

    // Decide under the engine lock; nothing below awaits while holding it.
    let now = Instant::now();
    let client_ip: IpAddr = conn.peer.ip();
    // Only the wireserver's documents and reports carry the served ids and base URL.
    let wireserver = matches!(route, Route::Service(Service::Wireserver));
    let (decision, ids, documents, reprovision_available) = {
        let mut slot = lock(&shared.engine);
        let ids = if wireserver {
            slot.engine.served_ids(now)
        } else {
            ServedIds::default()
        };
        let reprovision = slot.engine.reprovision_available(now);
        let decision = if admin_path || matches!(route, Route::UnknownHost) {
            Decision::Default
        } else {
            slot.engine.decide(endpoint_id, client_ip, now)
        };
        (decision, ids, slot.documents.clone(), reprovision)
    };

    let report = if req.method == "POST" {
        match endpoint_id {
            endpoint::WIRESERVER_HEALTH_XML => {
                Some(oracle::health::parse_xml(&req.body, Some(&ids)))
            }
            endpoint::WIRESERVER_HEALTH_JSON => Some(oracle::health::parse_json(&req.body)),
            _ => None,
        }
    } else {
        None
    };

    let mut entry = new_entry(shared, conn, &req, endpoint_id);
    entry.findings = findings;
    entry.report = report;
    entry.answer = match &decision {
        Decision::Default => Answer {
            kind: "default".into(),
            status: None,
            step: None,
        },
        Decision::Throttled => Answer {
            kind: "throttled".into(),
            status: Some(403),
            step: None,
        },
        Decision::Step { step, action } => Answer {
            kind: action.kind().into(),
            status: None,
            step: Some(step.clone()),
        },
    };
    let seq = lock(&shared.journal).begin(entry);

    let service = match route {
        Route::Service(s) => Some(s),
        Route::UnknownHost => None,
    };
    let base_url = if wireserver {
        base_url(host_header.or(parts.authority), conn.local)
    } else {
        String::new()
    };
    let ctx = RequestCtx {
        documents,
        ids,
        base_url,
        reprovision_available,
    };
    let default_answer = || async {
        if admin_path {
            Outgoing::new(404, vec![], Vec::new())
        } else {
            match service {
                Some(s) => route_default(s, &req, &ctx, (parts.query, &query)).await,
                None => Outgoing::new(
                    502,
                    vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
                    "502 Bad Gateway: this proxy only serves the wireserver and IMDS\n",
                ),
            }
        }
    };
    let head_only = req.method.eq_ignore_ascii_case("HEAD");
    let close = !keep_alive;
    let finish = |status: Option<u16>| {
        let done = shared.now_ms();
        lock(&shared.journal).finish(seq, |e| {
            e.done_ms = Some(done);
            e.answer.status = status;
        });
    };

    match decision {
        Decision::Default => {
            let out = default_answer().await;
            let ok = write_response(stream, &out, close, head_only).await;
            finish(Some(out.status));
            if ok { Flow::KeepAlive } else { Flow::Close }
        }
        Decision::Throttled => {
            let out = throttled();
            let ok = write_response(stream, &out, close, head_only).await;
            finish(Some(out.status));
            if ok { Flow::KeepAlive } else { Flow::Close }
        }
        Decision::Step { action, .. } => match action {
            Action::Respond(reply) => {
                let out = render_reply(&reply, service);
                let ok = write_response(stream, &out, close, head_only).await;
                finish(Some(out.status));
                if ok { Flow::KeepAlive } else { Flow::Close }
            }
            Action::Delay { seconds, reply } => {
                tokio::time::sleep(crate::scenario::seconds(seconds)).await;
                let out = match &reply {
                    Some(r) => render_reply(r, service),
                    None => default_answer().await,
                };
                let ok = write_response(stream, &out, close, head_only).await;
                finish(Some(out.status));
                if ok { Flow::KeepAlive } else { Flow::Close }
            }
            Action::Hang => {
                // Never answered (done_ms stays None). Keep reading (and discarding) until the
                // client gives up, which is when the entry is final; if the fake stops first,
                // shutdown writes it as pending.
                let mut sink = [0u8; 4096];
                while let Ok(n) = stream.read(&mut sink).await {
                    if n == 0 {
                        break;
                    }
                }
                let closed = shared.now_ms();
                lock(&shared.journal).finish(seq, |e| e.client_closed_ms = Some(closed));
                Flow::Gone
            }
            Action::Reset => {
                // SO_LINGER 0: close() sends RST instead of FIN.
                let _ = stream.set_zero_linger();
                finish(None);
                Flow::Gone
            }
            Action::Close => {
                let _ = stream.shutdown().await;
                finish(None);
                Flow::Gone
            }
            Action::Malformed { bytes } => {
                let _ = stream.write_all(bytes.as_bytes()).await;
                let _ = stream.flush().await;
                let _ = stream.shutdown().await;
                finish(None);
                Flow::Gone
            }
            Action::Partial { bytes_sent, reply } => {
                let out = match &reply {
                    Some(r) => render_reply(r, service),
                    None => default_answer().await,
                };
                // Always short of the declared length, so the client sees a truncated body.
                let n = bytes_sent.min(out.body.len().saturating_sub(1));
                let _ = stream.write_all(&out.head(true)).await;
                let _ = stream.write_all(&out.body[..n]).await;
                let _ = stream.flush().await;
                let _ = stream.shutdown().await;
                finish(Some(out.status));
                Flow::Gone
            }
            Action::Slow {
                chunk,
                interval,
                reply,
            } => {
                let out = match &reply {
                    Some(r) => render_reply(r, service),
                    None => default_answer().await,
                };
                let mut ok = stream.write_all(&out.head(close)).await.is_ok();
                if !head_only {
                    for piece in out.body.chunks(chunk.max(1)) {
                        if !ok {
                            break;
                        }
                        tokio::time::sleep(crate::scenario::seconds(interval)).await;
                        ok = stream.write_all(piece).await.is_ok() && stream.flush().await.is_ok();
                    }
                }
                finish(Some(out.status));
                if ok { Flow::KeepAlive } else { Flow::Close }
            }
        },
    }
}

async fn write_response(
    stream: &mut TcpStream,
    out: &Outgoing,
    close: bool,
    head_only: bool,
) -> bool {
    out.write_to(stream, close, head_only).await.is_ok()
}

/// `http://host:port` as the agent addressed the service (port 80 made explicit, as the
/// platform writes its URLs).
fn base_url(host: Option<&str>, local: Option<SocketAddr>) -> String {
    match host.map(str::trim).filter(|h| !h.is_empty()) {
        Some(h) => {
            let has_port = if let Some(rest) = h.strip_prefix('[') {
                rest.contains("]:")
            } else {
                h.contains(':')
            };
            if has_port {
                format!("http://{h}")
            } else {
                format!("http://{h}:80")
            }
        }
        None => match local {
            Some(addr) => format!("http://{addr}"),
            None => format!("http://{}:80", endpoint::WIRESERVER_HOST),
        },
    }
}

/// The platform's throttling reply (PROTOCOL.md §8.1).
pub(crate) fn throttled() -> Outgoing {
    Outgoing::new(
        403,
        vec![
            ("Content-Type".into(), XML_CONTENT_TYPE.into()),
            ("Server".into(), SERVER_HEADER.into()),
        ],
        THROTTLED_BODY,
    )
}

/// A scripted reply: preset first, then explicit status/headers/body on top.
pub(crate) fn render_reply(reply: &Reply, service: Option<Service>) -> Outgoing {
    let mut out = match reply.preset {
        Some(Preset::Throttled) => throttled(),
        Some(preset) => {
            let status = preset.status();
            let reason = http::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("Error");
            match service {
                Some(Service::Imds) => Outgoing::new(
                    status,
                    vec![("Content-Type".into(), JSON_CONTENT_TYPE.into())],
                    serde_json::json!({ "error": reason }).to_string(),
                ),
                _ => Outgoing::new(
                    status,
                    vec![("Server".into(), SERVER_HEADER.into())],
                    Vec::new(),
                ),
            }
        }
        None => Outgoing::new(200, vec![], Vec::new()),
    };
    if let Some(status) = reply.status {
        out.status = status;
    }
    for (name, value) in &reply.headers {
        out.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        out.headers.push((name.clone(), value.clone()));
    }
    if let Some(body) = &reply.body {
        out.body = body.bytes().to_vec().into();
    }
    out
}

// Built once; cloning a Router is cheap (shared state behind an Arc).
static WIRESERVER_ROUTER: std::sync::LazyLock<axum::Router> =
    std::sync::LazyLock::new(crate::wireserver::router);
static IMDS_ROUTER: std::sync::LazyLock<axum::Router> =
    std::sync::LazyLock::new(crate::imds::router);
static HOSTPLUGIN_ROUTER: std::sync::LazyLock<axum::Router> =
    std::sync::LazyLock::new(crate::hostplugin::router);

/// A raw query string and its decoded pairs, as the connection loop already parsed them.
type ParsedQuery<'a> = (Option<&'a str>, &'a [endpoint::QueryPair<'a>]);

/// The default answer: the request goes through the service's axum router.
async fn route_default(
    service: Service,
    req: &Request,
    ctx: &RequestCtx,
    parsed: ParsedQuery<'_>,
) -> Outgoing {
    match service {
        Service::Imds => {
            if http::Method::from_bytes(req.method.as_bytes()).is_err() {
                return Outgoing::new(400, vec![], Vec::new());
            }
            imds_default(req, &origin_form(req), ctx, parsed)
        }
        Service::Wireserver | Service::HostPlugin => via_router(service, req, ctx.clone()).await,
    }
}

/// `path?query` of the request target: the target itself unless it is absolute-form or has
/// an empty path (the common case borrows).
fn origin_form(req: &Request) -> std::borrow::Cow<'_, str> {
    let parts = endpoint::split_target(&req.target);
    if parts.authority.is_none() && !req.target.is_empty() && !req.target.starts_with('?') {
        return std::borrow::Cow::Borrowed(&req.target);
    }
    std::borrow::Cow::Owned(match parts.query {
        Some(q) => format!("{}?{q}", parts.path),
        None => parts.path.to_owned(),
    })
}

/// The default answer through the service's axum router (the wireserver's; IMDS in tests, to
/// show the direct path answers the same).
async fn via_router(service: Service, req: &Request, ctx: RequestCtx) -> Outgoing {
    let uri = origin_form(req);
    let Ok(method) = http::Method::from_bytes(req.method.as_bytes()) else {
        return Outgoing::new(400, vec![], Vec::new());
    };
    let mut builder = http::Request::builder().method(method).uri(uri.as_ref());
    for (name, value) in &req.headers {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            builder = builder.header(n, v);
        }
    }
    let Ok(mut request) = builder.body(axum::body::Body::from(req.body.clone())) else {
        // A target `http::Uri` refuses (e.g. raw spaces or quotes): the platform's IIS says 400.
        return Outgoing::new(400, vec![], Vec::new());
    };
    request.extensions_mut().insert(ctx);
    let router = match service {
        Service::Wireserver => WIRESERVER_ROUTER.clone(),
        Service::Imds => IMDS_ROUTER.clone(),
        Service::HostPlugin => HOSTPLUGIN_ROUTER.clone(),
    };
    let Ok(response) = router.oneshot(request).await;
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, 16 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let headers = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                header_case(k.as_str()),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    Outgoing::new(parts.status.as_u16(), headers, body)
}

/// IMDS default answers without the axum round trip (the benchmarked hot path): the same
/// checks `route_default` makes (a target `http::Uri` refuses → 400), the same headers the
/// router would see (those `http` accepts), the same handler logic ([`crate::imds::answer`]).
fn imds_default(req: &Request, uri: &str, ctx: &RequestCtx, parsed: ParsedQuery<'_>) -> Outgoing {
    let Ok(uri) = http::Uri::try_from(uri) else {
        return Outgoing::new(400, vec![], Vec::new());
    };
    // The pairs already decoded, unless `http` split the query differently (e.g. at a '#').
    let reparsed;
    let query = if uri.query() == parsed.0 {
        parsed.1
    } else {
        reparsed = endpoint::decode_query(uri.query());
        &reparsed
    };
    let answer = if req.headers.iter().all(|(n, v)| http_accepts_header(n, v)) {
        crate::imds::answer(ctx, &req.method, uri.path(), query, &req.headers)
    } else {
        let kept: Vec<(String, String)> = req
            .headers
            .iter()
            .filter(|(n, v)| http_accepts_header(n, v))
            .cloned()
            .collect();
        crate::imds::answer(ctx, &req.method, uri.path(), query, &kept)
    };
    let mut headers = Vec::with_capacity(2);
    headers.push(("Content-Type".to_owned(), answer.content_type.to_owned()));
    if answer.allow_get {
        headers.push(("Allow".to_owned(), "GET".to_owned()));
    }
    Outgoing::new(answer.status.as_u16(), headers, answer.body)
}

/// Whether `http::HeaderName::from_bytes` and `http::HeaderValue::from_str` accept a header
/// (`route_default` drops the others before the router sees them).
fn http_accepts_header(name: &str, value: &str) -> bool {
    const TCHAR_PUNCT: &[u8] = b"!#$%&'*+-.^_`|~";
    !name.is_empty()
        && name.len() < 1 << 16
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || TCHAR_PUNCT.contains(&b))
        && value.bytes().all(|b| (b >= 32 && b != 127) || b == b'\t')
}

/// `content-type` → `Content-Type` (IIS capitalises; some clients log headers as sent).
fn header_case(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_uses_the_agent_host() {
        assert_eq!(
            base_url(Some("168.63.129.16"), None),
            "http://168.63.129.16:80"
        );
        assert_eq!(
            base_url(Some("127.0.0.1:8080"), None),
            "http://127.0.0.1:8080"
        );
        let local: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(base_url(None, Some(local)), "http://127.0.0.1:9");
    }

    /// The direct IMDS path answers byte for byte what the axum router answers.
    #[tokio::test]
    async fn imds_direct_answers_equal_the_router() {
        let mut scenario = Scenario::default();
        scenario.imds.name = Some("direct-vm".into());
        let ctx = RequestCtx {
            documents: Arc::new(Documents::new(&scenario)),
            ids: Documents::new(&scenario).served_ids(0),
            base_url: "http://169.254.169.254:80".into(),
            reprovision_available: false,
        };
        let md = ("Metadata".to_owned(), "true".to_owned());
        type Headers = Vec<(String, String)>;
        let cases: Vec<(&str, &str, Headers)> = vec![
            (
                "GET",
                "/metadata/instance?api-version=2021-08-01",
                vec![md.clone()],
            ),
            (
                "GET",
                "/metadata/instance/?api-version=2021-08-01&extended=true",
                vec![md.clone()],
            ),
            (
                "GET",
                "/metadata/instance?api-version=2021-08-01&format=JSON",
                vec![md.clone()],
            ),
            (
                "GET",
                "http://169.254.169.254/metadata/instance/compute?api-version=2021-08-01",
                vec![md.clone()],
            ),
            (
                "GET",
                "/metadata/instance/compute/name?api-version=2021-08-01",
                vec![md.clone()],
            ),
            (
                "GET",
                "/metadata/instance/compute/name?api-version=2021-08-01&format=text",
                vec![md.clone()],
            ),
            (
                "GET",
                "/metadata/instance/compute?api-version=2021-08-01&format=text",
                vec![md.clone()],
            ),
            (
                "GET",
                "/metadata/instance/nope?api-version=2021-08-01",
                vec![md.clone()],
            ),
            (
                "GET",
                "/metadata/instance?api-version=2021-08-01&format=xml",
                vec![md.clone()],
            ),
            ("GET", "/metadata/instance?api-version=2021-08-01", vec![]),
            (
                "GET",
                "/metadata/instance?api-version=2021-08-01",
                vec![("metadata".into(), " TRUE ".into())],
            ),
            (
                "GET",
                "/metadata/instance?api-version=1999-01-01",
                vec![md.clone()],
            ),
            ("GET", "/metadata/instance", vec![md.clone()]),
            (
                "GET",
                "/metadata/instance?api-version=2021-08-01&api-version=2021-08-01",
                vec![md.clone()],
            ),
            (
                "GET",
                "/metadata/instance?api-version=2021-08-01",
                vec![md.clone(), ("X-Forwarded-For".into(), "1.2.3.4".into())],
            ),
            // A header `http` refuses is invisible to the router, and so to the direct path.
            (
                "GET",
                "/metadata/instance?api-version=2021-08-01",
                vec![md.clone(), ("X-Forwarded-For".into(), "bad\u{1}".into())],
            ),
            (
                "POST",
                "/metadata/instance?api-version=2021-08-01",
                vec![md.clone()],
            ),
            (
                "get",
                "/metadata/instance?api-version=2021-08-01",
                vec![md.clone()],
            ),
            ("GET", "/metadata/versions", vec![md.clone()]),
            (
                "GET",
                "/metadata/reprovisiondata?api-version=2019-06-01",
                vec![md.clone()],
            ),
            (
                "GET",
                "/metadata/elsewhere?api-version=2021-08-01",
                vec![md.clone()],
            ),
            (
                "GET",
                "/metadata/instance?api-version=2021-08-01&q=a%20b",
                vec![md.clone()],
            ),
            // `http` ends the query at '#'; the connection loop's split does not.
            (
                "GET",
                "/metadata/instance?api-version=2021-08-01#x",
                vec![md.clone()],
            ),
        ];
        for (method, target, headers) in cases {
            let req = Request {
                method: method.into(),
                target: target.into(),
                http_version: "HTTP/1.1",
                headers,
                body: Vec::new(),
                head_at: Instant::now(),
            };
            let parts = endpoint::split_target(&req.target);
            let query = endpoint::decode_query(parts.query);
            let direct = route_default(Service::Imds, &req, &ctx, (parts.query, &query)).await;
            let routed = via_router(Service::Imds, &req, ctx.clone()).await;
            // What goes on the wire (the router's own Content-Length is replaced by `head`).
            let wire = |out: &Outgoing| {
                let head = String::from_utf8(out.head(false)).unwrap();
                let head: String = head
                    .split_inclusive("\r\n")
                    .filter(|l| !l.starts_with("Date: "))
                    .collect();
                (head, String::from_utf8_lossy(&out.body).into_owned())
            };
            assert_eq!(wire(&direct), wire(&routed), "{method} {target}");
        }
    }

    #[test]
    fn header_validity_matches_the_http_crate() {
        let cases = [
            ("Metadata", "true"),
            ("X-Forwarded-For", "1.2.3.4"),
            ("bad name", "x"),
            ("", "x"),
            ("x", "tab\there"),
            ("x", "ctl\u{1}"),
            ("x", "del\u{7f}"),
            ("x", "caf\u{e9}"),
            ("a:b", "x"),
            ("x", ""),
        ];
        for (name, value) in cases {
            let http = http::HeaderName::from_bytes(name.as_bytes()).is_ok()
                && http::HeaderValue::from_str(value).is_ok();
            assert_eq!(
                http_accepts_header(name, value),
                http,
                "{name:?}: {value:?}"
            );
        }
    }

    #[test]
    fn throttled_reply_is_the_platform_body() {
        let out = throttled();
        let head = String::from_utf8(out.head(false)).unwrap();
        assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"));
        assert!(head.contains("Content-Type: text/xml; charset=utf-8\r\n"));
        assert!(head.contains("Server: Microsoft-IIS/10.0\r\n"));
        assert!(head.contains(&format!("Content-Length: {}\r\n", THROTTLED_BODY.len())));
    }
}
