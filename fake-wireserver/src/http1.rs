//! A small, bounded HTTP/1.1 request reader and response writer on a raw `TcpStream`.
//!
//! The fake reads and writes the wire itself (rather than letting hyper own the connection) so
//! that scripted faults are real socket behaviour and so that malformed input is journaled,
//! not silently answered by a library. Every buffer is bounded: the head (request line and
//! header fields together) by [`Limits::max_head`] and [`MAX_HEADERS`], the body by
//! [`Limits::max_body`], chunk extensions by [`MAX_CHUNK_EXT`], the trailer section like a head;
//! a request head by [`Limits::head_timeout`] once it has begun, its body by
//! [`Limits::read_timeout`] from the end of the head; every read by a deadline. A head, chunk
//! size line or trailer dribbled a byte at a time is not rescanned from its start per byte.
//! Message framing is read strictly (RFC 9112 §6.3): one `Transfer-Encoding: chunked` or one
//! all-digit `Content-Length`, never both; anything else is a malformed request (400, closed).

use std::time::{Duration, Instant};

use axum::body::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::bodies::Held;
use crate::conns::ConnHandle;

/// Bounds for one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_head: usize,
    pub max_body: usize,
    /// Deadline for the first byte of a request (an idle keep-alive connection), and for a
    /// request's body once its head is complete.
    pub read_timeout: Duration,
    /// Deadline for the rest of a request head once its first byte arrived (slowloris: a
    /// client dribbling a head must not hold a connection for the whole `read_timeout`).
    pub head_timeout: Duration,
}

/// A received request.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub method: String,
    pub target: String,
    /// `"HTTP/1.0"` or `"HTTP/1.1"` (httparse accepts no other).
    pub http_version: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the head was complete: when its last bytes arrived, by the kernel's stamp
    /// ([`crate::rx_stamp`]), or when the fake read them.
    pub head_at: Instant,
    /// `head_at` is the kernel's receive time, not the fake's.
    pub received_by_kernel: bool,
}

impl Request {
    /// This request as far as it came, with `body`: the journal's view of one that broke off.
    fn partial(&self, body: Vec<u8>) -> Partial {
        Partial {
            method: self.method.clone(),
            target: self.target.clone(),
            http_version: self.http_version,
            headers: self.headers.clone(),
            body,
        }
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the client allows the connection to stay open after this exchange. An HTTP/1.0
    /// request with Transfer-Encoding has faulty framing (RFC 9112 §6.1): closed after the
    /// answer, whatever its Connection header says.
    pub(crate) fn keep_alive(&self) -> bool {
        let conn = self.header("connection").map(str::to_ascii_lowercase);
        match self.http_version {
            "HTTP/1.0" if self.header("transfer-encoding").is_some() => false,
            "HTTP/1.0" => conn.is_some_and(|c| c.contains("keep-alive")),
            _ => !conn.is_some_and(|c| c.contains("close")),
        }
    }
}

/// What could be read of a request that could not be completed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Partial {
    pub method: String,
    pub target: String,
    /// Empty when the version could not be read.
    pub http_version: &'static str,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

#[derive(Debug)]
pub(crate) enum ReadError {
    /// EOF or idle timeout before the first byte of a request: nothing to journal.
    Idle,
    /// The bytes are not HTTP/1.x: answer 400 and close.
    Malformed { reason: String, partial: Partial },
    /// Head over the limit: answer 431 and close.
    HeadTooLarge { partial: Partial },
    /// Declared or chunked body over the limit: answer 413 and close.
    BodyTooLarge {
        partial: Partial,
        declared: Option<u64>,
    },
    /// A body that does not fit in the fake's budget for bodies in progress
    /// ([`crate::bodies`]): answer 503 and close.
    OverBudget {
        partial: Partial,
        /// The bytes this body needed reserved.
        wanted: usize,
        /// The bytes the other requests held.
        others: usize,
    },
    /// The client stopped sending (EOF or timeout) inside a request: close.
    Incomplete { reason: String, partial: Partial },
}

/// Header fields in one request head (more → 431), and fields in one trailer section.
pub(crate) const MAX_HEADERS: usize = 128;
/// Bytes of chunk extensions (and padding around chunk sizes) in one chunked body (more → 400);
/// hyper's limit. The chunk data itself is bounded by [`Limits::max_body`].
pub(crate) const MAX_CHUNK_EXT: usize = 16 * 1024;

/// Parses of a request head tried on every read before waiting for line ends.
const EAGER_PARSES: u32 = 8;

/// Bytes handed to the head parser and the line searches on this thread (tests: the work
/// stays linear in the bytes received).
#[cfg(test)]
pub(crate) mod scanned {
    use std::cell::Cell;
    thread_local! {
        static SCANNED: Cell<usize> = const { Cell::new(0) };
    }
    pub(crate) fn add(n: usize) {
        SCANNED.with(|c| c.set(c.get() + n));
    }
    pub(crate) fn take() -> usize {
        SCANNED.with(|c| c.replace(0))
    }
}

/// How the body of a request is delimited (RFC 9112 §6.3).
enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// The framing the headers declare, read strictly: a recipient that accepts ambiguous framing
/// is the half of a request-smuggling pair, and an agent that sends it is wrong.
fn framing(headers: &[(String, String)]) -> Result<Framing, String> {
    let values = |name: &str| -> Vec<&str> {
        headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim_matches([' ', '\t']))
            .collect()
    };
    let te = values("transfer-encoding");
    let cl = values("content-length");
    if !te.is_empty() && !cl.is_empty() {
        return Err("both Transfer-Encoding and Content-Length".into());
    }
    match te.as_slice() {
        [] => {}
        [one] if one.eq_ignore_ascii_case("chunked") => return Ok(Framing::Chunked),
        [one] => {
            return Err(format!(
                "Transfer-Encoding {one:?}: only a single `chunked` coding is accepted"
            ));
        }
        many => {
            return Err(format!(
                "{} Transfer-Encoding headers ({many:?}); one `chunked` is expected",
                many.len()
            ));
        }
    }
    match cl.as_slice() {
        [] => Ok(Framing::None),
        [one] if !one.is_empty() && one.bytes().all(|b| b.is_ascii_digit()) => one
            .parse::<u64>()
            .map(Framing::Length)
            .map_err(|_| format!("Content-Length {one:?} does not fit 64 bits")),
        [one] => Err(format!(
            "invalid Content-Length {one:?}: expected decimal digits only"
        )),
        many => Err(format!(
            "{} Content-Length headers ({many:?}); exactly one is expected",
            many.len()
        )),
    }
}

/// Reads one request: its head ([`read_head`]), then its body as the head frames it
/// ([`read_chunked_body`], [`read_sized_body`]; requests have no read-to-EOF bodies). `buf`
/// carries bytes already received (pipelining) across calls. Every read marks `conn` active; a
/// notice that the listener needs room ends the read like a timeout.
pub(crate) async fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    limits: Limits,
    conn: &ConnHandle,
    held: &mut Held<'_>,
) -> Result<Request, ReadError> {
    let mut req = read_head(stream, buf, limits, conn).await?;
    let framing = match framing(&req.headers) {
        Ok(f) => f,
        Err(reason) => {
            return Err(ReadError::Malformed {
                reason,
                partial: req.partial(Vec::new()),
            });
        }
    };
    let expect_continue = req
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    // The body has time of its own (a slow but progressing body of an allowed size is not cut
    // off by what is left of the head's deadline), bounded like one request.
    let mut body = BodyReader {
        stream,
        buf,
        limits,
        conn,
        deadline: tokio::time::Instant::now() + limits.read_timeout,
        req: &req,
        held,
    };
    let bytes = match framing {
        Framing::None => Vec::new(),
        Framing::Chunked => {
            if expect_continue && body.buf.is_empty() {
                body.send_continue().await;
            }
            read_chunked_body(&mut body).await?
        }
        Framing::Length(len) => read_sized_body(&mut body, len, expect_continue).await?,
    };
    req.body = bytes;
    Ok(req)
}

/// Reads a request head: bounded in bytes ([`Limits::max_head`]) and fields ([`MAX_HEADERS`]),
/// by [`Limits::head_timeout`] once its first non-blank byte came, parsed in linear time.
async fn read_head(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    limits: Limits,
    conn: &ConnHandle,
) -> Result<Request, ReadError> {
    let mut deadline = tokio::time::Instant::now() + limits.read_timeout;
    let mut head_started = false;
    // Bytes of `buf` already looked at for a line end, and parses so far: a head dribbled a
    // byte at a time is parsed again only when a line ends (after the first few reads, which
    // catch garbage early), not once per byte over up to 64 KiB.
    let mut seen = 0usize;
    let mut parses = 0u32;

    let (head_len, req) = loop {
        let fresh = &buf[seen.min(buf.len())..];
        if !head_started && !fresh.iter().all(u8::is_ascii_whitespace) {
            head_started = true;
            deadline = deadline.min(tokio::time::Instant::now() + limits.head_timeout);
        }
        let line_ended = fresh.contains(&b'\n');
        seen = buf.len();
        if !buf.is_empty() && (line_ended || parses < EAGER_PARSES || buf.len() > limits.max_head) {
            parses += 1;
            #[cfg(test)]
            scanned::add(buf.len());
            // Uninitialised slots: no 4 KiB of zeroing per request.
            let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
            let mut parsed = httparse::Request::new(&mut []);
            match parsed.parse_with_uninit_headers(buf, &mut headers) {
                Ok(httparse::Status::Complete(n)) if n > limits.max_head => {
                    return Err(ReadError::HeadTooLarge {
                        partial: partial_of(&buf[..limits.max_head]),
                    });
                }
                Ok(httparse::Status::Complete(n)) => {
                    // The last read's bytes completed the head (or an earlier read's, read
                    // ahead, when no read came since).
                    let received = conn.received();
                    let head_at = received.map_or_else(Instant::now, |at| at.min(Instant::now()));
                    let req = Request {
                        method: parsed.method.unwrap_or_default().to_owned(),
                        target: parsed.path.unwrap_or_default().to_owned(),
                        http_version: http_version(parsed.version.unwrap_or(1)),
                        headers: parsed
                            .headers
                            .iter()
                            .map(|h| {
                                (
                                    h.name.to_owned(),
                                    String::from_utf8_lossy(h.value).into_owned(),
                                )
                            })
                            .collect(),
                        body: Vec::new(),
                        head_at,
                        received_by_kernel: received.is_some(),
                    };
                    break (n, req);
                }
                Ok(httparse::Status::Partial) => {
                    if buf.len() > limits.max_head {
                        return Err(ReadError::HeadTooLarge {
                            partial: partial_of(buf),
                        });
                    }
                }
                Err(httparse::Error::TooManyHeaders) => {
                    return Err(ReadError::HeadTooLarge {
                        partial: partial_of(buf),
                    });
                }
                Err(e) => {
                    return Err(ReadError::Malformed {
                        reason: format!("not an HTTP/1.x request head: {e}"),
                        partial: partial_of(buf),
                    });
                }
            }
        }
        match read_more(stream, buf, deadline, limits.max_head + 1, conn).await {
            Ok(true) => {}
            Ok(false) if buf.iter().all(u8::is_ascii_whitespace) => return Err(ReadError::Idle),
            Ok(false) => {
                return Err(ReadError::Incomplete {
                    reason: "connection closed inside the request head".into(),
                    partial: partial_of(buf),
                });
            }
            Err(timeout_or_io) => {
                if buf.iter().all(u8::is_ascii_whitespace) {
                    return Err(ReadError::Idle);
                }
                return Err(ReadError::Incomplete {
                    reason: format!("request head not complete: {timeout_or_io}"),
                    partial: partial_of(buf),
                });
            }
        }
    };
    buf.drain(..head_len);
    Ok(req)
}

/// What a body reader works with: the connection, its buffered bytes, the body's own deadline
/// and the head (for the journal's partial view of a request that broke off).
struct BodyReader<'a, 'b> {
    stream: &'a mut TcpStream,
    buf: &'a mut Vec<u8>,
    limits: Limits,
    conn: &'a ConnHandle,
    deadline: tokio::time::Instant,
    req: &'a Request,
    /// This request's share of the fake's budget for bodies in progress.
    held: &'a mut Held<'b>,
}

impl BodyReader<'_, '_> {
    /// Reserves `total` body bytes before reading them ([`crate::bodies`]); the error when
    /// they do not fit, with `body`, what was read so far, for the journal.
    fn over_budget(&mut self, total: usize, body: &[u8]) -> Option<ReadError> {
        let others = self.held.grow_to(total).err()?;
        Some(ReadError::OverBudget {
            partial: self.partial(body.to_vec()),
            wanted: total,
            others,
        })
    }

    async fn more(&mut self, max: usize) -> bool {
        matches!(
            read_more(self.stream, self.buf, self.deadline, max, self.conn).await,
            Ok(true)
        )
    }

    async fn send_continue(&mut self) {
        let _ = self
            .stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await;
    }

    fn partial(&self, body: Vec<u8>) -> Partial {
        self.req.partial(body)
    }
}

/// A chunked body: size lines (extensions bounded by [`MAX_CHUNK_EXT`]), data bounded by
/// [`Limits::max_body`], then the trailer section.
async fn read_chunked_body(r: &mut BodyReader<'_, '_>) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    let mut ext_bytes = 0usize;
    loop {
        // Chunk size line, parsed again only once a line end arrived (a dribbled line of
        // padding or extensions is not rescanned per byte).
        let mut seen = 0usize;
        let (size, used) = loop {
            let line_ended = r.buf[seen.min(r.buf.len())..].contains(&b'\n');
            seen = r.buf.len();
            #[cfg(test)]
            if line_ended {
                scanned::add(r.buf.len());
            }
            let parsed = if line_ended {
                httparse::parse_chunk_size(r.buf)
            } else {
                Ok(httparse::Status::Partial)
            };
            match parsed {
                Ok(httparse::Status::Complete((used, size))) => break (size, used),
                Ok(httparse::Status::Partial) => {
                    if r.buf.len() > r.limits.max_head {
                        return Err(ReadError::Malformed {
                            reason: "chunk size line too long".into(),
                            partial: r.partial(body),
                        });
                    }
                }
                Err(_) => {
                    return Err(ReadError::Malformed {
                        reason: "invalid chunk size line".into(),
                        partial: r.partial(body),
                    });
                }
            }
            if !r.more(r.limits.max_head + 1).await {
                return Err(ReadError::Incomplete {
                    reason: "connection closed or timed out inside a chunked body".into(),
                    partial: r.partial(body),
                });
            }
        };
        // Everything on the size line but the hex digits and the line end: extensions.
        let digits = r.buf.iter().take_while(|b| b.is_ascii_hexdigit()).count();
        ext_bytes += used.saturating_sub(digits + 2);
        r.buf.drain(..used);
        if ext_bytes > MAX_CHUNK_EXT {
            return Err(ReadError::Malformed {
                reason: format!("chunk extensions over {MAX_CHUNK_EXT} bytes"),
                partial: r.partial(body),
            });
        }
        if size == 0 {
            break;
        }
        // `body.len() <= max_body` holds here, so the subtraction cannot wrap; a chunk size
        // up to 2^64-1 is compared, never added.
        if size > (r.limits.max_body - body.len()) as u64 {
            return Err(ReadError::BodyTooLarge {
                partial: r.partial(body),
                declared: None,
            });
        }
        if let Some(e) = r.over_budget(body.len() + size as usize, &body) {
            return Err(e);
        }
        let need = size as usize + 2; // data + CRLF
        while r.buf.len() < need {
            let want = need - r.buf.len();
            if !r.more(want).await {
                body.extend_from_slice(&r.buf[..r.buf.len().min(size as usize)]);
                return Err(ReadError::Incomplete {
                    reason: "connection closed or timed out inside a chunk".into(),
                    partial: r.partial(body),
                });
            }
        }
        if &r.buf[size as usize..need] != b"\r\n" {
            return Err(ReadError::Malformed {
                reason: "chunk data not followed by CRLF".into(),
                partial: r.partial(body),
            });
        }
        body.extend_from_slice(&r.buf[..size as usize]);
        r.buf.drain(..need);
    }
    read_trailer(r, body).await
}

/// The trailer section after the last chunk: lines until an empty line, bounded like a head
/// (bytes and fields). Returns the body read so far, now complete.
async fn read_trailer(r: &mut BodyReader<'_, '_>, body: Vec<u8>) -> Result<Vec<u8>, ReadError> {
    let mut trailer_bytes = 0usize;
    let mut trailer_fields = 0usize;
    // Bytes of `r.buf` already searched for CRLF (one byte back: a CR may end a read).
    let mut searched = 0usize;
    loop {
        let from = searched.saturating_sub(1);
        #[cfg(test)]
        scanned::add(r.buf.len() - from.min(r.buf.len()));
        let found = r.buf[from.min(r.buf.len())..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|p| p + from);
        searched = r.buf.len();
        if let Some(pos) = found {
            searched = 0;
            let empty = pos == 0;
            r.buf.drain(..pos + 2);
            if empty {
                break;
            }
            trailer_bytes += pos + 2;
            trailer_fields += 1;
            if trailer_bytes > r.limits.max_head || trailer_fields > MAX_HEADERS {
                return Err(ReadError::HeadTooLarge {
                    partial: r.partial(body),
                });
            }
            continue;
        }
        if trailer_bytes + r.buf.len() > r.limits.max_head {
            return Err(ReadError::HeadTooLarge {
                partial: r.partial(body),
            });
        }
        if !r.more(r.limits.max_head + 1).await {
            return Err(ReadError::Incomplete {
                reason: "chunked body trailer not complete".into(),
                partial: r.partial(body),
            });
        }
    }
    Ok(body)
}

/// A body of `Content-Length: len` bytes, bounded by [`Limits::max_body`].
async fn read_sized_body(
    r: &mut BodyReader<'_, '_>,
    len: u64,
    expect_continue: bool,
) -> Result<Vec<u8>, ReadError> {
    if len > r.limits.max_body as u64 {
        return Err(ReadError::BodyTooLarge {
            partial: r.partial(Vec::new()),
            declared: Some(len),
        });
    }
    let len = len as usize;
    if let Some(e) = r.over_budget(len, &[]) {
        return Err(e);
    }
    if expect_continue && r.buf.len() < len {
        r.send_continue().await;
    }
    while r.buf.len() < len {
        let want = len - r.buf.len();
        if !r.more(want).await {
            let got = r.buf.split_off(0);
            return Err(ReadError::Incomplete {
                reason: format!(
                    "connection closed or timed out after {} of {len} body bytes",
                    got.len()
                ),
                partial: r.partial(got),
            });
        }
    }
    Ok(r.buf.drain(..len).collect())
}

/// Reads up to `max` more bytes into `buf`. `Ok(false)` on EOF; `Err` on timeout, eviction or
/// I/O error.
async fn read_more(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    deadline: tokio::time::Instant,
    max: usize,
    conn: &ConnHandle,
) -> Result<bool, String> {
    // At most 8 KiB per read, straight into `buf`'s spare capacity (no zeroed scratch buffer),
    // with the kernel's receive time.
    let want = max.clamp(1, 8192);
    let read = tokio::select! {
        read = tokio::time::timeout_at(deadline, crate::rx_stamp::read(stream, buf, want)) => read,
        () = conn.evicted().notified() => {
            return Err("closed to make room: the listener is at its connection limit".into());
        }
    };
    match read {
        Err(_) => Err("read timed out".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok((0, _))) => Ok(false),
        Ok(Ok((_, received))) => {
            conn.touch(received);
            Ok(true)
        }
    }
}

/// Best-effort view of an unparsable head, for the journal.
fn partial_of(buf: &[u8]) -> Partial {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    let _ = parsed.parse(buf);
    let mut p = Partial {
        method: parsed.method.unwrap_or_default().to_owned(),
        target: parsed.path.unwrap_or_default().to_owned(),
        http_version: parsed.version.map_or("", http_version),
        headers: Vec::new(),
        body: Vec::new(),
    };
    if p.method.is_empty() {
        // Keep what arrived (bounded) so the journal shows the garbage.
        p.body = buf[..buf.len().min(crate::journal::BODY_KEEP_BYTES)].to_vec();
    }
    p
}

/// httparse's minor version as the request line spelled it.
fn http_version(minor: u8) -> &'static str {
    if minor == 0 { "HTTP/1.0" } else { "HTTP/1.1" }
}

/// A response to write.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// Shared bytes: cached documents are answered without a copy.
    pub body: Bytes,
}

impl Outgoing {
    pub(crate) fn new(status: u16, headers: Vec<(String, String)>, body: impl Into<Bytes>) -> Self {
        Outgoing {
            status,
            headers,
            body: body.into(),
        }
    }

    /// Status line and headers; `Content-Length` is always the full body length, `Date` is
    /// added, `Connection: close` when the connection ends after this answer.
    pub(crate) fn head(&self, close: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.head_capacity());
        self.write_head(&mut out, close);
        out
    }

    /// Writes head and body with vectored writes (one `writev` unless the socket buffer is
    /// full): no copy of the body, and the head never leaves in a segment of its own.
    pub(crate) async fn write_to(
        &self,
        stream: &mut TcpStream,
        close: bool,
        head_only: bool,
    ) -> std::io::Result<()> {
        let head = self.head(close);
        let body = if head_only { &[][..] } else { &self.body[..] };
        write_all_vectored(stream, &head, body).await
    }

    fn head_capacity(&self) -> usize {
        let headers: usize = self
            .headers
            .iter()
            .map(|(n, v)| n.len() + v.len() + 4)
            .sum();
        // Status line, Date, Content-Length and Connection lines fit in 128 bytes.
        128 + headers
    }

    fn write_head(&self, out: &mut Vec<u8>, close: bool) {
        use std::io::Write as _;
        let reason = http::StatusCode::from_u16(self.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Unknown");
        // Writes into a Vec cannot fail.
        let _ = write!(out, "HTTP/1.1 {} {reason}\r\n", self.status);
        for (name, value) in &self.headers {
            if name.eq_ignore_ascii_case("content-length")
                || name.eq_ignore_ascii_case("transfer-encoding")
                || name.eq_ignore_ascii_case("connection")
                || name.eq_ignore_ascii_case("date")
            {
                continue;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"Date: ");
        with_http_date(|date| out.extend_from_slice(date.as_bytes()));
        let _ = write!(out, "\r\nContent-Length: {}\r\n", self.body.len());
        if close {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// `write_all` for two slices with `writev`.
async fn write_all_vectored(
    stream: &mut TcpStream,
    mut first: &[u8],
    mut second: &[u8],
) -> std::io::Result<()> {
    while !first.is_empty() || !second.is_empty() {
        let slices = [std::io::IoSlice::new(first), std::io::IoSlice::new(second)];
        let n = stream.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let from_first = n.min(first.len());
        first = &first[from_first..];
        second = &second[n - from_first..];
    }
    Ok(())
}

/// The current time as an HTTP date, formatted at most once per second per thread.
fn with_http_date<R>(f: impl FnOnce(&str) -> R) -> R {
    use std::cell::RefCell;
    thread_local! {
        static CACHE: RefCell<(i64, String)> = const { RefCell::new((i64::MIN, String::new())) };
    }
    let now = chrono::Utc::now();
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.0 != now.timestamp() {
            *cache = (
                now.timestamp(),
                now.format("%a, %d %b %Y %H:%M:%S GMT").to_string(),
            );
        }
        f(&cache.1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// What `write_to` puts on a real socket.
    async fn written(out: &Outgoing, close: bool, head_only: bool) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        // Read while writing: a body larger than the socket buffers needs a reader.
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            got
        });
        out.write_to(&mut server, close, head_only).await.unwrap();
        drop(server);
        String::from_utf8(reader.await.unwrap()).unwrap()
    }

    /// Bytes scanned to read `head` then `tail`, the tail sent a byte at a time (each its own
    /// read: the client yields after every byte on this one-thread runtime).
    async fn scanned_reading_dribbled(head: &[u8], tail: Vec<u8>) -> (usize, usize) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        client.set_nodelay(true).unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        client.write_all(head).await.unwrap();
        let sent = head.len() + tail.len();
        let writer = tokio::spawn(async move {
            for byte in tail {
                client.write_all(&[byte]).await.unwrap();
                tokio::task::yield_now().await;
            }
            client
        });
        let table = crate::conns::ConnTable::new(4);
        let conn = table.register();
        let limits = Limits {
            max_head: 64 * 1024,
            max_body: 1024 * 1024,
            read_timeout: Duration::from_secs(20),
            head_timeout: Duration::from_secs(20),
        };
        scanned::take();
        let mut buf = Vec::new();
        let budget = crate::bodies::BodyBudget::new(limits.max_body);
        let req = read_request(&mut server, &mut buf, limits, &conn, &mut budget.hold()).await;
        assert!(req.is_ok(), "{req:?}");
        let _client = writer.await.unwrap();
        (scanned::take(), sent)
    }

    /// Issue 13 review: a head or trailer dribbled a byte at a time is not rescanned from its
    /// start on every read (quadratic CPU, up to 64 KiB per request).
    #[tokio::test(flavor = "current_thread")]
    async fn a_dribbled_head_or_trailer_costs_linear_work() {
        let pad = "a".repeat(4000);
        let head = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Pad: {pad}\r\n\r\n");
        let (scanned, sent) = scanned_reading_dribbled(b"", head.into_bytes()).await;
        assert!(
            scanned < 8 * sent,
            "head: {scanned} bytes scanned for {sent}"
        );

        let head = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
        let tail = format!("1\r\nz\r\n0\r\nX-Pad: {pad}\r\n\r\n");
        let (scanned, sent) = scanned_reading_dribbled(head, tail.into_bytes()).await;
        assert!(
            scanned < 8 * sent,
            "trailer: {scanned} bytes scanned for {sent}"
        );

        let tail = format!("1;{pad}\r\nz\r\n0\r\n\r\n");
        let (scanned, sent) = scanned_reading_dribbled(head, tail.into_bytes()).await;
        assert!(
            scanned < 8 * sent,
            "chunk size line: {scanned} bytes scanned for {sent}"
        );
    }

    #[tokio::test]
    async fn head_and_body_are_written_together() {
        let out = Outgoing::new(
            200,
            vec![
                ("Content-Type".into(), "application/json".into()),
                ("content-length".into(), "999".into()),
                ("Connection".into(), "keep-alive".into()),
            ],
            "{}",
        );
        let bytes = written(&out, true, false).await;
        let (head, body) = bytes.split_once("\r\n\r\n").unwrap();
        assert_eq!(body, "{}");
        let lines: Vec<&str> = head.lines().collect();
        assert_eq!(lines[0], "HTTP/1.1 200 OK");
        assert_eq!(lines[1], "Content-Type: application/json");
        let date = lines[2].strip_prefix("Date: ").unwrap();
        assert!(chrono::DateTime::parse_from_rfc2822(&date.replace("GMT", "+0000")).is_ok());
        assert_eq!(&lines[3..], ["Content-Length: 2", "Connection: close"]);
        let head_only = written(&out, false, true).await;
        assert!(head_only.ends_with("Content-Length: 2\r\n\r\n"));
        // A body larger than the socket buffer takes several writes; nothing is lost.
        let big = Outgoing::new(200, vec![], vec![b'z'; 4 << 20]);
        let bytes = written(&big, true, false).await;
        assert_eq!(bytes.split_once("\r\n\r\n").unwrap().1.len(), 4 << 20);
    }
}
