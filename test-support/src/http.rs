//! Raw HTTP/1.1 exchanges with a server under test: exact bytes out, then what came back and how
//! the connection ended. The request is never rewritten (the fake's hostile-input tests depend
//! on sending exactly what they wrote); the response is read as a client would frame it
//! (RFC 9112 §6.3: no body for HEAD, 1xx, 204 and 304; chunked; Content-Length; else until
//! close), bounded by [`MAX_RESPONSE_BYTES`] and a timeout.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// More than any answer of the fake (its largest is a bounded journal window): a server that
/// sends more is broken, and the test says so instead of filling memory.
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// A complete response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The final status code (interim 1xx answers are passed over).
    pub status: u16,
    /// Header fields in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
    /// Every byte received up to the end of this response, as it came (interim answers and
    /// chunk framing included): for tests that assert on the wire text.
    pub raw: Vec<u8>,
}

impl Response {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The response as received, as text (lossy).
    pub fn raw_text(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
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

/// Sends `bytes` on a fresh connection and waits (up to `timeout`) for one complete response
/// or for the connection to end.
pub async fn exchange(addr: SocketAddr, bytes: &[u8], timeout: Duration) -> Outcome {
    let mut stream = send(addr, bytes).await;
    read(&mut stream, timeout, bytes.starts_with(b"HEAD ")).await
}

/// A fresh connection to `addr` with `bytes` written on it.
async fn send(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    stream
        .write_all(bytes)
        .await
        .unwrap_or_else(|e| panic!("sending the request to {addr}: {e}"));
    stream
}

/// [`exchange`] for a test without a runtime (on a runtime of its own; not from inside one).
pub fn exchange_blocking(addr: SocketAddr, bytes: &[u8], timeout: Duration) -> Outcome {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the exchange")
        .block_on(exchange(addr, bytes, timeout))
}

/// Sends `bytes` (a request that asks for `Connection: close`, or HTTP/1.0 without
/// keep-alive) and requires, within `timeout`, one complete response and then the end of the
/// connection with not one byte more: a server that keeps the connection open, or sends more,
/// fails the test.
pub async fn exchange_to_close(addr: SocketAddr, bytes: &[u8], timeout: Duration) -> Response {
    let mut stream = send(addr, bytes).await;
    let deadline = tokio::time::Instant::now() + timeout;
    let (outcome, received) = read_counted(&mut stream, timeout, bytes.starts_with(b"HEAD ")).await;
    let response = response(outcome);
    let mut extra = received - response.raw.len();
    let mut chunk = [0u8; 8192];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Err(_) => panic!(
                "{addr} kept the connection open after its response to a request that asked it \
                 to close"
            ),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Ok(Err(e)) => panic!("unexpected read error after the response: {e}"),
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => extra += n,
        }
    }
    assert_eq!(
        extra, 0,
        "{addr} sent {extra} bytes after its response, before closing"
    );
    response
}

/// One blocking exchange that must end in a complete response and then the close, within
/// 10 s ([`exchange_to_close`]): the response as it came, as text (for tests that assert on
/// the wire text).
pub fn wire_text(addr: SocketAddr, request: &str) -> String {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the exchange")
        .block_on(exchange_to_close(
            addr,
            request.as_bytes(),
            Duration::from_secs(10),
        ))
        .raw_text()
}

/// Reads from `stream` until a complete response (to a request other than HEAD), EOF, reset
/// or timeout: for a test that wrote the request itself.
pub async fn read_outcome(stream: &mut TcpStream, timeout: Duration) -> Outcome {
    read(stream, timeout, false).await
}

async fn read(stream: &mut TcpStream, timeout: Duration, head_request: bool) -> Outcome {
    read_counted(stream, timeout, head_request).await.0
}

/// [`read`], and how many bytes were read (a response may be followed by more).
async fn read_counted(
    stream: &mut TcpStream,
    timeout: Duration,
    head_request: bool,
) -> (Outcome, usize) {
    let mut buf = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    let outcome = loop {
        if let Some(r) = parse_response(&buf, false, head_request) {
            break Outcome::Response(r);
        }
        assert!(
            buf.len() <= MAX_RESPONSE_BYTES,
            "the response passed {MAX_RESPONSE_BYTES} bytes without ending"
        );
        let mut chunk = [0u8; 8192];
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Err(_) => break Outcome::TimedOut(buf.clone()),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => break Outcome::Reset,
            Ok(Err(e)) => panic!("unexpected read error: {e}"),
            Ok(Ok(0)) => {
                break match parse_response(&buf, true, head_request) {
                    Some(r) => Outcome::Response(r),
                    None => Outcome::Eof(buf.clone()),
                };
            }
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    (outcome, buf.len())
}

/// The response at the start of `buf` if it is complete; `closed` says the connection ended
/// after `buf` (what completes a body framed by the close). Malformed framing never completes.
pub fn parse_response(buf: &[u8], closed: bool, head_request: bool) -> Option<Response> {
    let mut at = 0;
    loop {
        let mut fields = [httparse::EMPTY_HEADER; 128];
        let mut res = httparse::Response::new(&mut fields);
        let Ok(httparse::Status::Complete(n)) = res.parse(&buf[at..]) else {
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
        let head_end = at + n;
        // An interim answer (100 Continue): the final one follows.
        if (100..200).contains(&status) && status != 101 {
            at = head_end;
            continue;
        }
        let (body, end) = body(&buf[head_end..], &headers, status, closed, head_request)?;
        return Some(Response {
            status,
            headers,
            body,
            raw: buf[..head_end + end].to_vec(),
        });
    }
}

/// The body after the head and how many bytes it took on the wire.
fn body(
    rest: &[u8],
    headers: &[(String, String)],
    status: u16,
    closed: bool,
    head_request: bool,
) -> Option<(Vec<u8>, usize)> {
    let field = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    };
    if head_request || matches!(status, 101 | 204 | 304) {
        return Some((Vec::new(), 0));
    }
    if let Some(te) = field("transfer-encoding") {
        let chunked = te
            .rsplit(',')
            .next()
            .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        return if chunked {
            dechunk(rest)
        } else {
            closed.then(|| (rest.to_vec(), rest.len()))
        };
    }
    if let Some(len) = field("content-length") {
        // Digits only (`usize::from_str` would take `+5`); conflicting values never complete.
        if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let all_agree = headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .all(|(_, v)| v.trim() == len);
        if !all_agree {
            return None;
        }
        let len: usize = len.parse().ok()?;
        return (rest.len() >= len).then(|| (rest[..len].to_vec(), len));
    }
    closed.then(|| (rest.to_vec(), rest.len()))
}

/// A complete chunked body (chunks, last chunk, trailer section) and its length on the wire.
fn dechunk(rest: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let httparse::Status::Complete((n, size)) = httparse::parse_chunk_size(&rest[at..]).ok()?
        else {
            return None;
        };
        at += n;
        if size == 0 {
            break;
        }
        let size = usize::try_from(size).ok()?;
        let data = rest.get(at..at.checked_add(size)?.checked_add(2)?)?;
        if &data[size..] != b"\r\n" {
            return None;
        }
        body.extend_from_slice(&data[..size]);
        at += size + 2;
    }
    // The trailer section: field lines up to an empty line.
    loop {
        let line_end = rest[at..].windows(2).position(|w| w == b"\r\n")?;
        at += line_end + 2;
        if line_end == 0 {
            return Some((body, at));
        }
    }
}

/// Expects a complete response.
pub fn response(outcome: Outcome) -> Response {
    match outcome {
        Outcome::Response(r) => r,
        other => panic!("expected a complete response, got {other:?}"),
    }
}

/// Raw request bytes: the request line, exactly the headers given (Host included), then
/// `Content-Length` and `Connection: close`.
pub fn request<K: AsRef<str>, V: AsRef<str>>(
    method: &str,
    target: &str,
    headers: &[(K, V)],
    body: &str,
) -> Vec<u8> {
    let mut s = format!("{method} {target} HTTP/1.1\r\n");
    for (k, v) in headers {
        s.push_str(&format!("{}: {}\r\n", k.as_ref(), v.as_ref()));
    }
    s.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    s.into_bytes()
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
    let host = [("Host", host)];
    let all: Vec<(&str, &str)> = host.iter().chain(headers).copied().collect();
    request("POST", target, &all, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(wire: &[u8], closed: bool) -> Option<(u16, String, usize)> {
        parse_response(wire, closed, false).map(|r| (r.status, r.text(), r.raw.len()))
    }

    #[test]
    fn a_content_length_that_is_not_digits_or_disagrees_never_completes() {
        for wire in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 4\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\nhello",
        ] {
            assert_eq!(
                parsed(wire, true),
                None,
                "{}",
                String::from_utf8_lossy(wire)
            );
        }
        let agreeing = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(parsed(agreeing, false).map(|p| p.1), Some("hello".into()));
    }

    /// A one-connection server that answers `answer` and then does `then`.
    async fn serve_once(answer: &'static [u8], close: bool) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            s.write_all(answer).await.unwrap();
            if close {
                drop(s);
            } else {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
        });
        addr
    }

    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

    #[tokio::test]
    async fn a_response_then_the_close_is_what_exchange_to_close_wants() {
        let addr = serve_once(ANSWER, true).await;
        let r = exchange_to_close(addr, REQUEST, Duration::from_secs(5)).await;
        assert_eq!((r.status, r.text()), (200, "ok".to_owned()));
    }

    #[tokio::test]
    #[should_panic(expected = "kept the connection open")]
    async fn a_server_that_keeps_the_connection_open_fails_exchange_to_close() {
        let addr = serve_once(ANSWER, false).await;
        exchange_to_close(addr, REQUEST, Duration::from_millis(300)).await;
    }

    #[tokio::test]
    #[should_panic(expected = "sent 4 bytes after its response")]
    async fn bytes_after_the_response_fail_exchange_to_close() {
        let addr = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokMORE", true).await;
        exchange_to_close(addr, REQUEST, Duration::from_secs(5)).await;
    }

    #[test]
    fn a_sized_body_completes_at_its_length_and_not_before() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
        assert_eq!(
            parsed(wire, false),
            Some((200, "hello".into(), wire.len() - 5))
        );
        assert_eq!(parsed(&wire[..wire.len() - 6], false), None);
        // A close inside the declared body is no response.
        assert_eq!(parsed(&wire[..wire.len() - 6], true), None);
    }

    #[test]
    fn a_chunked_body_is_joined_and_ends_after_its_trailers() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                     5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nX-Trailer: y\r\n\r\n";
        assert_eq!(
            parsed(wire, false),
            Some((200, "hello!".into(), wire.len()))
        );
        for cut in 1..20 {
            assert_eq!(parsed(&wire[..wire.len() - cut], false), None, "cut {cut}");
        }
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n";
        assert_eq!(parsed(bad, true), None);
    }

    #[test]
    fn without_a_length_the_body_runs_to_the_close() {
        let wire = b"HTTP/1.1 200 OK\r\n\r\nall of it";
        assert_eq!(parsed(wire, false), None);
        assert_eq!(
            parsed(wire, true),
            Some((200, "all of it".into(), wire.len()))
        );
    }

    #[test]
    fn interim_answers_and_bodiless_statuses() {
        let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(parsed(wire, false), Some((204, String::new(), wire.len())));
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n";
        assert!(parse_response(head, false, true).is_some());
        assert_eq!(parsed(head, false), None);
    }

    #[test]
    fn requests_are_the_bytes_named() {
        assert_eq!(
            post("/p", "h", &[("A", "1")], "xy"),
            b"POST /p HTTP/1.1\r\nHost: h\r\nA: 1\r\nContent-Length: 2\r\nConnection: close\r\n\r\nxy"
        );
        assert_eq!(
            get("/g", "h", &[]),
            b"GET /g HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        );
    }

    #[tokio::test]
    async fn an_exchange_reports_how_the_connection_ended() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let request = b"GET / HTTP/1.1\r\n\r\n";
        let server = tokio::spawn(async move {
            let mut got = [0u8; 18];
            // A byte, then silence.
            let (mut silent, _) = listener.accept().await.unwrap();
            silent.write_all(b"H").await.unwrap();
            // The request read, then a close without a byte.
            let (mut closing, _) = listener.accept().await.unwrap();
            closing.read_exact(&mut got).await.unwrap();
            drop(closing);
            // The request read, then a reset.
            let (mut resetting, _) = listener.accept().await.unwrap();
            resetting.read_exact(&mut got).await.unwrap();
            resetting.set_zero_linger().unwrap();
            drop(resetting);
            // A complete answer with bytes after it.
            let (mut answering, _) = listener.accept().await.unwrap();
            answering.read_exact(&mut got).await.unwrap();
            answering
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokNEXT")
                .await
                .unwrap();
            silent
        });
        let slow = exchange(addr, request, Duration::from_millis(200)).await;
        assert!(
            matches!(&slow, Outcome::TimedOut(b) if b == b"H"),
            "{slow:?}"
        );
        let closed = exchange(addr, request, Duration::from_secs(5)).await;
        assert!(
            matches!(&closed, Outcome::Eof(b) if b.is_empty()),
            "{closed:?}"
        );
        let reset = exchange(addr, request, Duration::from_secs(5)).await;
        assert!(matches!(reset, Outcome::Reset), "{reset:?}");
        let answered = response(exchange(addr, request, Duration::from_secs(5)).await);
        assert_eq!((answered.status, answered.text()), (200, "ok".to_owned()));
        assert_eq!(answered.header("content-length"), Some("2"));
        drop(server.await.unwrap());
    }
}
