//! A raw HTTP/1.1 client on blocking sockets: one-off probes (to check that every server sends
//! the same bytes) and request floods (the memory figure), with keep-alive where the server
//! allows it and a fresh connection where it does not (Python's HTTP/1.0 server).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};

/// The IMDS request every figure uses.
pub const IMDS_PATH: &str = "/metadata/instance?api-version=2021-08-01";

/// `GET {path}` with `Metadata: true`, keep-alive.
pub fn imds_request(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: 169.254.169.254\r\nMetadata: true\r\n\r\n").into_bytes()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The server will close the connection after this response.
    pub closes: bool,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One connection that is reopened when the server closes it.
pub struct Client {
    addr: SocketAddr,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    /// Connections opened so far.
    pub connects: usize,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        Client {
            addr,
            stream: None,
            buf: Vec::with_capacity(16 * 1024),
            connects: 0,
        }
    }

    /// Sends `request` and reads one response.
    pub fn send(&mut self, request: &[u8]) -> anyhow::Result<Response> {
        if self.stream.is_none() {
            let stream = TcpStream::connect_timeout(&self.addr, Duration::from_secs(10))
                .with_context(|| format!("connecting to {}", self.addr))?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(Duration::from_secs(30)))?;
            self.stream = Some(stream);
            self.buf.clear();
            self.connects += 1;
        }
        let result = self.exchange(request);
        match &result {
            Ok(r) if !r.closes => {}
            _ => self.stream = None,
        }
        result
    }

    fn exchange(&mut self, request: &[u8]) -> anyhow::Result<Response> {
        let stream = self.stream.as_mut().expect("connected");
        stream.write_all(request).context("writing the request")?;
        let mut chunk = [0u8; 16 * 1024];
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            let n = stream
                .read(&mut chunk)
                .context("reading the response head")?;
            if n == 0 {
                bail!("connection closed before a complete response head");
            }
            self.buf.extend_from_slice(&chunk[..n]);
        };
        let head =
            std::str::from_utf8(&self.buf[..head_end]).context("response head is not UTF-8")?;
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default().to_owned();
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("bad status line {status_line:?}"))?;
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.to_ascii_lowercase())
        };
        let connection = header("connection");
        let closes = match connection.as_deref() {
            Some("close") => true,
            Some("keep-alive") => false,
            _ => version != "HTTP/1.1",
        };
        let body_len: Option<usize> = match header("content-length") {
            Some(v) => Some(v.parse().with_context(|| format!("Content-Length {v:?}"))?),
            None => None,
        };
        self.buf.drain(..head_end);
        let body = match body_len {
            Some(len) => {
                while self.buf.len() < len {
                    let n = stream.read(&mut chunk).context("reading the body")?;
                    if n == 0 {
                        bail!("connection closed inside the body");
                    }
                    self.buf.extend_from_slice(&chunk[..n]);
                }
                self.buf.drain(..len).collect()
            }
            None if closes => {
                stream.read_to_end(&mut self.buf)?;
                std::mem::take(&mut self.buf)
            }
            None => bail!("keep-alive response without Content-Length"),
        };
        Ok(Response {
            status,
            headers,
            body,
            closes,
        })
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One request on a fresh connection.
pub fn fetch(addr: SocketAddr, request: &[u8]) -> anyhow::Result<Response> {
    Client::new(addr).send(request)
}

/// What a flood did.
#[derive(Debug, Clone, PartialEq)]
pub struct Flood {
    pub requests: usize,
    /// Responses other than 200, and requests that failed.
    pub failures: usize,
    pub connects: usize,
    pub elapsed: Duration,
}

/// Sends `total` requests over `connections` concurrent clients (threads), as fast as the
/// server answers. Every response must be a 200 with `expected_body`.
pub fn flood(
    addr: SocketAddr,
    request: &[u8],
    expected_body: &[u8],
    total: usize,
    connections: usize,
) -> Flood {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let request = Arc::new(request.to_vec());
    let expected = Arc::new(expected_body.to_vec());
    let workers: Vec<_> = (0..connections.max(1))
        .map(|_| {
            let next = next.clone();
            let request = request.clone();
            let expected = expected.clone();
            std::thread::spawn(move || {
                let mut client = Client::new(addr);
                let mut failures = 0;
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    match client.send(&request) {
                        Ok(r) if r.status == 200 && r.body == *expected => {}
                        _ => failures += 1,
                    }
                }
                (failures, client.connects)
            })
        })
        .collect();
    let (mut failures, mut connects) = (0, 0);
    for worker in workers {
        let (f, c) = worker.join().expect("flood worker");
        failures += f;
        connects += c;
    }
    Flood {
        requests: total,
        failures,
        connects,
        elapsed: started.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server that answers two keep-alive responses on one connection, then one that closes.
    #[test]
    fn reads_keep_alive_and_closing_responses() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            for body in ["one", "two"] {
                let _ = conn.read(&mut buf).unwrap();
                write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
            }
            let _ = conn.read(&mut buf).unwrap();
            conn.write_all(b"HTTP/1.0 404 Not Found\r\n\r\ngone")
                .unwrap();
        });
        let mut client = Client::new(addr);
        let req = imds_request(IMDS_PATH);
        let a = client.send(&req).unwrap();
        let b = client.send(&req).unwrap();
        let c = client.send(&req).unwrap();
        server.join().unwrap();
        assert_eq!(
            (a.status, a.body.as_slice(), a.closes),
            (200, &b"one"[..], false)
        );
        assert_eq!(b.body, b"two");
        assert_eq!(
            (c.status, c.body.as_slice(), c.closes),
            (404, &b"gone"[..], true)
        );
        assert_eq!(client.connects, 1);
    }
}
