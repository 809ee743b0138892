//! Test support: a loopback HTTP server that answers from a per-route script and records every
//! request, plus helpers to run the `provision-report` binary and read what it wrote.
//!
//! Deliberately independent of the reporter's own code: requests are recorded raw, and the
//! helpers parse XML, JSON, encoded reports and KVP records with their own configuration.

#![allow(dead_code)] // each test binary uses a different part

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

pub const VM_ID: &str = "11111111-2222-3333-4444-555555555555";
pub const INCARNATION: &str = "7";
pub const CONTAINER_ID: &str = "c0ffee00-1111-2222-3333-444444444444";
pub const INSTANCE_ID: &str = "11111111222233334444555555555555.vector-vm";

pub const IMDS_DOC: &str = r#"{"compute":{"vmId":"11111111-2222-3333-4444-555555555555","name":"vector-vm"},"extended":{"compute":{"hasCustomData":false,"ppsType":"None"}}}"#;

pub const VERSIONS_DOC: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<Versions>
  <Preferred><Version>2012-11-30</Version></Preferred>
  <Supported><Version>2012-11-30</Version><Version>2010-12-15</Version></Supported>
</Versions>"#;

pub fn goal_state_doc(incarnation: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?>
<GoalState xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema">
  <Version>2010-12-15</Version>
  <Incarnation>{incarnation}</Incarnation>
  <Machine><ExpectedState>Started</ExpectedState></Machine>
  <Container>
    <ContainerId>{CONTAINER_ID}</ContainerId>
    <RoleInstanceList>
      <RoleInstance>
        <InstanceId>{INSTANCE_ID}</InstanceId>
        <State>Started</State>
        <Configuration><ConfigName>MachineRole_IN_0.0.MachineRole.xml</ConfigName></Configuration>
      </RoleInstance>
    </RoleInstanceList>
  </Container>
</GoalState>"#
    )
}

/// The platform's 403 throttling body, from the shared vectors.
pub fn throttled_body() -> String {
    let path = vectors_dir().join("http/platform/throttled-403.json");
    let vector: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    vector["body"].as_str().unwrap().to_owned()
}

pub fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors")
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    Status(u16),
    Body {
        status: u16,
        content_type: &'static str,
        body: String,
    },
    /// Status plus extra headers, no body.
    WithHeaders {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
    },
    /// Any status, headers and body, all owned (hostile answers: huge or odd values).
    Custom {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Read the request, never answer.
    Hang,
}

impl Reply {
    pub fn xml(status: u16, body: impl Into<String>) -> Reply {
        Reply::Body {
            status,
            content_type: "text/xml; charset=utf-8",
            body: body.into(),
        }
    }
    pub fn json(status: u16, body: impl Into<String>) -> Reply {
        Reply::Body {
            status,
            content_type: "application/json; charset=utf-8",
            body: body.into(),
        }
    }
    pub fn throttled() -> Reply {
        Reply::xml(403, throttled_body())
    }
}

struct Route {
    method: Method,
    path: String,
    query: Option<String>,
    replies: VecDeque<Reply>,
    /// Answer once the script is used up.
    last: Reply,
}

/// A request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// Lower-cased names, received order.
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub at: Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn target(&self) -> String {
        match &self.query {
            Some(q) => format!("{} {}?{}", self.method, self.path, q),
            None => format!("{} {}", self.method, self.path),
        }
    }
}

#[derive(Default)]
struct Shared {
    routes: Vec<Route>,
    requests: Vec<Recorded>,
}

/// A scripted loopback server on an ephemeral 127.0.0.1 port.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Server {
    pub fn start() -> Server {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let shared = Arc::new(Mutex::new(Shared::default()));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(handle).with_state(shared.clone());
        runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
        Server {
            addr,
            shared,
            runtime: Some(runtime),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Scripts `target` ("GET /path" or "POST /path?query"): the replies in order, then the
    /// last one for ever.
    pub fn on(&self, target: &str, replies: Vec<Reply>) -> &Server {
        let (method, rest) = target.split_once(' ').unwrap();
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
            None => (rest.to_owned(), None),
        };
        let mut replies: VecDeque<Reply> = replies.into();
        let last = replies.pop_back().expect("at least one reply");
        self.shared.lock().unwrap().routes.push(Route {
            method: method.parse().unwrap(),
            path,
            query,
            replies,
            last,
        });
        self
    }

    /// IMDS answering the instance document.
    pub fn with_imds(&self) -> &Server {
        self.on("GET /metadata/instance", vec![Reply::json(200, IMDS_DOC)])
    }

    /// Versions and goal state for the XML flow, and the health POST answering `health`.
    pub fn with_xml_flow(&self, health: Vec<Reply>) -> &Server {
        self.on("GET /?comp=versions", vec![Reply::xml(200, VERSIONS_DOC)]);
        self.on(
            "GET /machine/?comp=goalstate",
            vec![Reply::xml(200, goal_state_doc(INCARNATION))],
        );
        self.on("POST /machine?comp=health", health)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().unwrap().requests.clone()
    }

    /// Requests to one path (any query).
    pub fn requests_to(&self, method: &str, path: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method && r.path == path)
            .collect()
    }

    pub fn targets(&self) -> Vec<String> {
        self.requests().iter().map(Recorded::target).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn handle(
    State(shared): State<Arc<Mutex<Shared>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = {
        let mut shared = shared.lock().unwrap();
        shared.requests.push(Recorded {
            method: method.to_string(),
            path: uri.path().to_owned(),
            query: uri.query().map(str::to_owned),
            headers: headers
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: String::from_utf8_lossy(&body).into_owned(),
            at: Instant::now(),
        });
        let route = shared.routes.iter_mut().find(|r| {
            r.method == method
                && r.path == uri.path()
                && r.query
                    .as_ref()
                    .is_none_or(|q| Some(q.as_str()) == uri.query())
        });
        match route {
            Some(route) => route
                .replies
                .pop_front()
                .unwrap_or_else(|| route.last.clone()),
            None => Reply::Status(404),
        }
    };
    match reply {
        Reply::Status(status) => StatusCode::from_u16(status).unwrap().into_response(),
        Reply::Body {
            status,
            content_type,
            body,
        } => (
            StatusCode::from_u16(status).unwrap(),
            [("content-type", content_type)],
            body,
        )
            .into_response(),
        Reply::WithHeaders { status, headers } => {
            let mut response = StatusCode::from_u16(status).unwrap().into_response();
            for (name, value) in headers {
                response
                    .headers_mut()
                    .insert(name, axum::http::HeaderValue::from_static(value));
            }
            response
        }
        Reply::Custom {
            status,
            headers,
            body,
        } => {
            let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
            for (name, value) in headers {
                response.headers_mut().append(
                    axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    axum::http::HeaderValue::from_str(&value).unwrap(),
                );
            }
            response
        }
        Reply::Hang => {
            std::future::pending::<()>().await;
            unreachable!()
        }
    }
}

/// Reads one request (head, then a `Content-Length` body) off a raw connection; false when the
/// client went away first.
fn read_request(reader: &mut impl std::io::BufRead) -> bool {
    let mut request_body = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(len) = lower.strip_prefix("content-length:") {
            request_body = len.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0u8; request_body];
    std::io::Read::read_exact(reader, &mut body).is_ok()
}

/// A raw TCP server whose every answer is a status line and headers announcing a body of
/// `content_length` bytes, then that body dribbled one byte per 200 ms.
pub struct DribbleServer {
    addr: SocketAddr,
    connections: Arc<std::sync::atomic::AtomicUsize>,
}

impl DribbleServer {
    pub fn start(status_line: &'static str, content_length: usize) -> DribbleServer {
        use std::io::{BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    if !read_request(&mut reader) {
                        return;
                    }
                    let mut stream = stream;
                    let head = format!(
                        "{status_line}\r\nContent-Type: text/xml; charset=utf-8\r\nContent-Length: {content_length}\r\n\r\n"
                    );
                    if stream.write_all(head.as_bytes()).is_err() {
                        return;
                    }
                    for _ in 0..content_length {
                        std::thread::sleep(Duration::from_millis(200));
                        if stream.write_all(b" ").is_err() {
                            return;
                        }
                    }
                });
            }
        });
        DribbleServer { addr, connections }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A raw TCP server that answers its first `cut` requests with `201 Created` announcing a
/// 100-byte body, sends 10 bytes of it and closes the connection; later ones get a whole 201.
pub struct CutBodyServer {
    addr: SocketAddr,
    requests: Arc<std::sync::atomic::AtomicUsize>,
}

impl CutBodyServer {
    pub fn start(cut: usize) -> CutBodyServer {
        use std::io::{BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let counter = counter.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    loop {
                        if !read_request(&mut reader) {
                            return;
                        }
                        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let mut stream = &stream;
                        if n < cut {
                            let _ = stream.write_all(
                                b"HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n0123456789",
                            );
                            let _ = stream.shutdown(std::net::Shutdown::Both);
                            return;
                        }
                        if stream
                            .write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        CutBodyServer { addr, requests }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The outcome of one `provision-report` run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stderr: String,
    pub elapsed: Duration,
}

/// A scratch directory with a pool path and a sysroot without DMI.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    pub fn pool(&self) -> PathBuf {
        self.dir.path().join("hyperv/.kvp_pool_1")
    }
    pub fn sysroot(&self) -> PathBuf {
        self.dir.path().join("sysroot")
    }
}

/// Runs the binary with a clean environment (no PROVISION_REPORT_* or proxy variables leak
/// in), pointed at `server` for both services, with fast retry settings unless overridden.
pub fn run(server: &Server, scratch: &Scratch, args: &[&str]) -> Run {
    let mut full: Vec<String> = vec![
        "--wireserver".into(),
        server.url(),
        "--imds".into(),
        server.url(),
        "--kvp-pool".into(),
        scratch.pool().display().to_string(),
        "--sysroot".into(),
        scratch.sysroot().display().to_string(),
        "--retry-interval".into(),
        "0.2".into(),
        "--timeout".into(),
        "10".into(),
        "--imds-timeout".into(),
        "2".into(),
    ];
    full.extend(args.iter().map(|a| a.to_string()));
    run_raw(&full, &[])
}

/// Runs the binary with exactly these arguments and environment variables.
pub fn run_raw<S: AsRef<std::ffi::OsStr>>(args: &[S], env: &[(&str, &std::ffi::OsStr)]) -> Run {
    run_raw_with(args, env, |_| {})
}

/// [`run_raw`], with `configure` applied to the command last (resource limits, say).
pub fn run_raw_with<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    env: &[(&str, &std::ffi::OsStr)],
    configure: impl FnOnce(&mut Command),
) -> Run {
    let started = Instant::now();
    let mut command = Command::new(env!("CARGO_BIN_EXE_provision-report"));
    command.env_clear().args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    configure(&mut command);
    let output = command.output().unwrap();
    Run {
        code: output.status.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            panic!(
                "provision-report did not exit: killed by signal {:?}\nstderr:\n{}",
                output.status.signal(),
                String::from_utf8_lossy(&output.stderr)
            )
        }),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// Element texts of an XML document by slash-joined path (first occurrence), unescaped.
pub fn xml_texts(body: &str) -> BTreeMap<String, String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(body);
    let mut path: Vec<String> = Vec::new();
    let mut texts = BTreeMap::new();
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) => path.push(String::from_utf8(e.name().as_ref().to_vec()).unwrap()),
            Event::End(_) => {
                path.pop();
            }
            Event::Text(t) => {
                let text = t.xml_content().unwrap().into_owned();
                let entry = texts.entry(path.join("/")).or_insert_with(String::new);
                entry.push_str(&text);
            }
            Event::GeneralRef(r) => {
                let resolved = match r.as_ref() {
                    b"amp" => "&",
                    b"lt" => "<",
                    b"gt" => ">",
                    b"quot" => "\"",
                    b"apos" => "'",
                    other => panic!("unexpected entity {other:?}"),
                };
                texts
                    .entry(path.join("/"))
                    .or_insert_with(String::new)
                    .push_str(resolved);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    texts.retain(|_, v| !v.trim().is_empty());
    texts
}

/// Parses an encoded report with a CSV reader configured here (delimiter `|`, quote `'`),
/// then splits each field at the first `=`.
pub fn parse_encoded(encoded: &str) -> Vec<(String, String)> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(b'|')
        .quote(b'\'')
        .double_quote(true)
        .has_headers(false)
        .flexible(true)
        .from_reader(encoded.as_bytes());
    let mut records = reader.records();
    let record = records.next().expect("one record").expect("valid CSV");
    assert!(
        records.next().is_none(),
        "exactly one record in {encoded:?}"
    );
    record
        .iter()
        .map(|field| {
            let (k, v) = field.split_once('=').expect("key=value");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

/// The records of a pool file, decoded here: (key, value) up to the first NUL of each field.
pub fn pool_records(path: &Path) -> Vec<(String, String)> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        bytes.len() % 2560,
        0,
        "pool size {} is not whole records",
        bytes.len()
    );
    bytes
        .chunks(2560)
        .map(|record| {
            let field = |b: &[u8]| {
                let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
                assert!(b[end..].iter().all(|&x| x == 0), "NUL padding only");
                String::from_utf8(b[..end].to_vec()).unwrap()
            };
            (field(&record[..512]), field(&record[512..]))
        })
        .collect()
}

/// One NUL-padded 2560-byte record, encoded here.
pub fn raw_record(key: &str, value: &str) -> Vec<u8> {
    let mut record = vec![0u8; 2560];
    record[..key.len()].copy_from_slice(key.as_bytes());
    record[512..512 + value.len()].copy_from_slice(value.as_bytes());
    record
}

pub fn keys(fields: &[(String, String)]) -> Vec<&str> {
    fields.iter().map(|(k, _)| k.as_str()).collect()
}

pub fn value<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
