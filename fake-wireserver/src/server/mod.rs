//! Listeners and connections: accept, read a request (bounded, [`http1`]), then the exchange,
//! a pipeline: route it (by listener, or by target authority / Host in proxy mode) and classify
//! it ([`route`]), inspect it, ask the scenario engine ([`decide`]), journal it, and answer
//! ([`respond`]) — with the default documents or with a scripted fault acted out on the raw
//! socket. A health body is parsed by the oracle before it is journaled, off the runtime's
//! worker threads when it is large ([`INLINE_PARSE_MAX`]).

mod respond;
mod route;

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::clock::AgentClock;
use crate::conns::{ConnHandle, ConnTable, Room};
use crate::context::RequestCtx;
use crate::documents::Documents;
use crate::endpoint::{self, EndpointId, Service};
use crate::engine::{Decision, Engine};
use crate::http1::{self, Limits, Outgoing, Partial, ReadError, Request};
use crate::inspect::RequestId;
use crate::journal::{Answer, AnswerKind, Entry, Journal, Listener, body_fields};
use crate::oracle::{self, HealthReport, ServedIds};
use crate::scenario::Scenario;
use crate::sync::lock;

/// State shared by every listener of one fake.
pub(crate) struct Shared {
    /// The journal's clock: agent time from the fake's start ([`crate::clock`]).
    pub clock: AgentClock,
    pub journal: Mutex<Journal>,
    pub engine: Mutex<EngineSlot>,
    pub limits: Limits,
    /// What the request bodies in progress on every listener hold together.
    pub bodies: crate::bodies::BodyBudget,
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

impl Shared {
    /// The journal's milliseconds at the machine's moment `at`.
    pub(crate) fn ms(&self, at: Instant) -> u64 {
        self.clock.ms(at)
    }
    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
    /// Makes entry `seq` final: answered now (`done_ms`, once the answer or fault is on the
    /// wire), with `status` (`None`: no status line was sent).
    fn answered(&self, seq: u64, status: Option<u16>) {
        let done = self.now_ms();
        lock(&self.journal).finish(seq, |e| {
            e.done_ms = Some(done);
            e.answer.status = status;
        });
    }
    pub(crate) fn load_scenario(&self, scenario: Scenario) {
        *lock(&self.engine) = EngineSlot::new(scenario, self.clock.now());
    }
    pub(crate) fn reset(&self) {
        lock(&self.journal).clear();
        let mut slot = lock(&self.engine);
        slot.engine.rewind(self.clock.now());
    }
    pub(crate) fn served_ids(&self) -> ServedIds {
        lock(&self.engine).engine.served_ids(self.clock.now())
    }
}

/// Accepts connections until `shutdown` flips; dropping the set aborts open connections. At the
/// connection cap a new connection closes the longest-idle one ([`crate::conns`]), or waits
/// for any to end when all are busy.
pub(crate) async fn accept_loop(
    shared: Arc<Shared>,
    kind: Listener,
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
                                    kind.as_str()
                                );
                            }
                            let _ = tokio::time::timeout(
                                Duration::from_millis(100),
                                connections.join_next(),
                            )
                            .await;
                        }
                        Room::Free | Room::Full => {
                            tracing::warn!("{} accept: {e}", kind.as_str());
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                    continue;
                }
                Err(e) => {
                    // Other failures: back off instead of spinning.
                    tracing::warn!("{} accept: {e}", kind.as_str());
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
                            kind.as_str(),
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
        // Inherited from the listener's, unless it was bound before the fake asked.
        crate::rx_stamp::enable(&stream);
        connections.spawn(async move {
            serve_connection(shared, kind, stream, peer, handle).await;
        });
    }
}

/// How a connection goes on after an exchange.
enum Flow {
    KeepAlive,
    Close,
    /// A reset: the connection is to be dropped now (its RST leaves then), and entry `seq`
    /// made final once it has (`done_ms` after the fault is on the wire, as for every answer).
    Reset {
        seq: u64,
    },
    /// The stream was consumed (a hang ended, a fault closed it).
    Gone,
}

/// Who is at both ends of a connection (the client string formatted once, not per request).
struct Conn {
    kind: Listener,
    peer: SocketAddr,
    /// `peer` as the journal writes it.
    client: String,
    local: Option<SocketAddr>,
}

async fn serve_connection(
    shared: Arc<Shared>,
    kind: Listener,
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
        // Given back once this request is answered (the end of this iteration).
        let mut held = shared.bodies.hold();
        match http1::read_request(&mut stream, &mut buf, shared.limits, &handle, &mut held).await {
            Ok(req) => {
                handle.busy();
                let keep_alive = req.keep_alive();
                match exchange(&shared, &conn, &mut stream, req, keep_alive).await {
                    Flow::KeepAlive if keep_alive => continue,
                    Flow::Gone => return,
                    Flow::Reset { seq } => {
                        drop(stream);
                        shared.answered(seq, None);
                        return;
                    }
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
            RequestId::HttpMalformed.error(
                format!("malformed HTTP request: {reason} (answered 400, closed)"),
            ),
            partial,
        ),
        ReadError::HeadTooLarge { partial } => (
            Some(431),
            RequestId::HttpHeadTooLarge.error(
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
            RequestId::HttpBodyTooLarge.error(
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
        ReadError::OverBudget {
            partial,
            wanted,
            others,
        } => (
            Some(503),
            RequestId::HttpOverBudget.error(format!(
                "a body of {wanted} bytes while other requests in progress hold {others}: over the fake's {} byte budget for unfinished bodies (answered 503, closed)",
                shared.bodies.limit()
            )),
            partial,
        ),
        ReadError::Incomplete { reason, partial } => (
            None,
            RequestId::HttpIncomplete.warning(
                format!("{reason}; connection closed without an answer"),
            ),
            partial,
        ),
    };
    let endpoint = match conn.kind {
        Listener::Wireserver => EndpointId::WireserverUnknown,
        Listener::Imds => EndpointId::ImdsUnknown,
        Listener::HostPlugin => EndpointId::HostpluginUnknown,
        Listener::Proxy => EndpointId::ProxyUnknownHost,
    };
    let at = Instant::now();
    let mut entry = new_entry(shared, conn, &partial_request(partial, at), endpoint);
    entry.findings.push(finding);
    entry.answer = Answer {
        kind: if status.is_some() {
            AnswerKind::Default
        } else {
            AnswerKind::Close
        },
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
    shared.answered(seq, status);
}

fn partial_request(p: Partial, at: Instant) -> Request {
    Request {
        method: p.method,
        target: p.target,
        http_version: p.http_version,
        headers: p.headers,
        body: p.body,
        head_at: at,
        received_by_kernel: false,
    }
}

fn new_entry(shared: &Shared, conn: &Conn, req: &Request, endpoint: EndpointId) -> Entry {
    let (body, body_b64, body_len, body_truncated) = body_fields(&req.body);
    Entry {
        seq: 0,
        at_ms: shared.ms(req.head_at),
        received_by_kernel: req.received_by_kernel,
        done_ms: None,
        listener: conn.kind,
        client: conn.client.clone(),
        method: req.method.clone(),
        target: req.target.clone(),
        http_version: req.http_version.to_owned(),
        headers: req.headers.clone(),
        body,
        body_b64,
        body_len,
        body_truncated,
        endpoint,
        answer: Answer {
            kind: AnswerKind::Default,
            status: None,
            step: None,
        },
        report: None,
        findings: Vec::new(),
        client_closed_ms: None,
    }
}

/// Handles one complete request: route → classify → inspect → decide → journal → answer.
async fn exchange(
    shared: &Shared,
    conn: &Conn,
    stream: &mut TcpStream,
    mut req: Request,
    keep_alive: bool,
) -> Flow {
    // The target is split and its query decoded once, here, for every step below.
    let target = endpoint::split_target(&req.target);
    let query = endpoint::decode_query(target.query);
    let mut routed = route::route(conn.kind, &req, &target);
    let endpoint_id = routed.endpoint(target.path, &query);
    let mut findings = std::mem::take(&mut routed.findings);
    findings.extend(route::inspect(
        &routed,
        conn.kind,
        endpoint_id,
        &req,
        &target,
        &query,
    ));
    let decided = decide(shared, &routed, endpoint_id, conn.peer.ip());
    let report = health_report(&req.method, &mut req.body, endpoint_id, &decided.ids).await;

    let mut entry = new_entry(shared, conn, &req, endpoint_id);
    entry.findings = findings;
    entry.report = report;
    entry.answer = answer_of(&decided.decision);
    let seq = lock(&shared.journal).begin(entry);

    let base_url = if decided.wireserver {
        respond::base_url(req.header("host").or(target.authority), conn.local)
    } else {
        String::new()
    };
    let responder = respond::Responder {
        shared,
        stream,
        seq,
        req: &req,
        target: &target,
        query: &query,
        ctx: RequestCtx {
            documents: decided.documents,
            ids: decided.ids,
            base_url,
            reprovision_available: decided.reprovision_available,
        },
        service: routed.service(),
        admin_path: routed.admin_path,
        close: !keep_alive,
        head_only: req.method.eq_ignore_ascii_case("HEAD"),
    };
    responder.act(decided.decision).await
}

/// The engine's decision for one request, and what the answer needs from the same moment.
struct Decided {
    decision: Decision,
    /// The served ids (wireserver requests only: its documents and reports carry them).
    ids: ServedIds,
    documents: Arc<Documents>,
    reprovision_available: bool,
    wireserver: bool,
}

/// Decides under the engine lock; nothing awaits while holding it.
fn decide(
    shared: &Shared,
    routed: &route::Routed,
    endpoint_id: EndpointId,
    client_ip: IpAddr,
) -> Decided {
    // The engine's windows and triggers are scripted times: agent time.
    let now = shared.clock.now();
    let wireserver = routed.service() == Some(Service::Wireserver);
    let mut slot = lock(&shared.engine);
    let ids = if wireserver {
        slot.engine.served_ids(now)
    } else {
        ServedIds::default()
    };
    let reprovision_available = slot.engine.reprovision_available(now);
    let decision = if routed.scripted() {
        slot.engine.decide(endpoint_id, client_ip, now)
    } else {
        Decision::Default
    };
    Decided {
        decision,
        ids,
        documents: slot.documents.clone(),
        reprovision_available,
        wireserver,
    }
}

/// Health bodies up to this size are parsed on the connection's task. The oracle's work is
/// linear (about 0.1 s for a 1 MiB body in a release build), but every fake of a `wirecheck
/// run` shares the runtime's worker threads: larger bodies are parsed on a blocking thread, so
/// an agent sending a stream of them cannot hold those workers from other cases' fakes.
const INLINE_PARSE_MAX: usize = 16 * 1024;

/// The oracle's reading of a health report (a POST to either health endpoint).
async fn health_report(
    method: &str,
    body: &mut Vec<u8>,
    endpoint_id: EndpointId,
    ids: &ServedIds,
) -> Option<HealthReport> {
    if method != "POST" {
        return None;
    }
    let parse: fn(&[u8], &ServedIds) -> HealthReport = match endpoint_id {
        EndpointId::WireserverHealthXml => |body, ids| oracle::health::parse_xml(body, Some(ids)),
        EndpointId::WireserverHealthJson => |body, _| oracle::health::parse_json(body),
        _ => return None,
    };
    if body.len() <= INLINE_PARSE_MAX {
        return Some(parse(body, ids));
    }
    let shared = Arc::new(std::mem::take(body));
    let (theirs, ids) = (Arc::clone(&shared), ids.clone());
    let parsed = tokio::task::spawn_blocking(move || parse(&theirs, &ids)).await;
    // The blocking task's reference is gone once it ended (a panic included).
    *body = Arc::try_unwrap(shared).unwrap_or_else(|shared| shared.to_vec());
    parsed.ok()
}

/// How the journal names a decision (its status comes when the answer is written).
fn answer_of(decision: &Decision) -> Answer {
    match decision {
        Decision::Default => Answer {
            kind: AnswerKind::Default,
            status: None,
            step: None,
        },
        Decision::Throttled => Answer {
            kind: AnswerKind::Throttled,
            status: Some(403),
            step: None,
        },
        Decision::ImdsThrottled => Answer {
            kind: AnswerKind::Throttled,
            status: Some(429),
            step: None,
        },
        Decision::Step { step, action } => Answer {
            kind: action.kind(),
            status: None,
            step: Some(step.clone()),
        },
    }
}
