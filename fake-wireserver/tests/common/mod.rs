//! Raw-socket helpers shared by the integration tests: send exact bytes, read what comes back
//! (or how the connection ended).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `testdata/vectors` of the workspace.
pub fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/vectors")
}

/// `scenarios/examples` of the workspace.
pub fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/examples")
}

/// A parsed HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// How an exchange ended, as a client sees it.
#[derive(Debug)]
pub enum Outcome {
    /// A complete response.
    Response(Response),
    /// The connection was reset (RST) before a complete response.
    Reset,
    /// EOF with these bytes (possibly none) and no complete response.
    Eof(Vec<u8>),
    /// Nothing complete within the timeout; the bytes received so far.
    TimedOut(Vec<u8>),
}

/// Tries to parse a complete response from `buf`.
pub fn parse_response(buf: &[u8]) -> Option<Response> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut res = httparse::Response::new(&mut headers);
    let Ok(httparse::Status::Complete(n)) = res.parse(buf) else {
        return None;
    };
    let status = res.code?;
    let headers: Vec<(String, String)> = res
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_owned(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    if status == 100 {
        return parse_response(&buf[n..]);
    }
    (buf.len() >= n + len).then(|| Response {
        status,
        headers,
        body: buf[n..n + len].to_vec(),
    })
}

/// Sends `bytes` on a fresh connection and waits (up to `timeout`) for one complete response
/// or for the connection to end.
pub async fn exchange(addr: SocketAddr, bytes: &[u8], timeout: Duration) -> Outcome {
    let mut stream = TcpStream::connect(addr).await.expect("connect to the fake");
    stream.write_all(bytes).await.expect("send request");
    read_outcome(&mut stream, timeout).await
}

/// Reads from `stream` until a complete response, EOF, reset or timeout.
pub async fn read_outcome(stream: &mut TcpStream, timeout: Duration) -> Outcome {
    let mut buf = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(r) = parse_response(&buf) {
            return Outcome::Response(r);
        }
        let mut chunk = [0u8; 8192];
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Err(_) => return Outcome::TimedOut(buf),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => return Outcome::Reset,
            Ok(Err(e)) => panic!("unexpected read error: {e}"),
            Ok(Ok(0)) => return Outcome::Eof(buf),
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A minimal GET with the headers given, `Connection: close`.
pub fn get(target: &str, host: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut s = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n");
    for (k, v) in headers {
        s.push_str(&format!("{k}: {v}\r\n"));
    }
    s.push_str("Connection: close\r\n\r\n");
    s.into_bytes()
}

/// A minimal POST with a body, `Connection: close`.
pub fn post(target: &str, host: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut s = format!("POST {target} HTTP/1.1\r\nHost: {host}\r\n");
    for (k, v) in headers {
        s.push_str(&format!("{k}: {v}\r\n"));
    }
    s.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    s.into_bytes()
}

/// Expects a complete response.
pub fn response(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Response(r) => r,
        other => panic!("expected a complete response, got {other:?}"),
    }
}

/// A goal state GET as cloud-init sends it.
pub fn goalstate_get() -> Vec<u8> {
    get(
        "/machine/?comp=goalstate",
        "168.63.129.16",
        &[
            ("x-ms-agent-name", "WALinuxAgent"),
            ("x-ms-version", "2012-11-30"),
        ],
    )
}

/// The start of a long text, for assertion messages.
pub fn clip(text: &str) -> String {
    text.chars().take(2000).collect()
}
