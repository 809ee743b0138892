//! A deliberately small raw HTTP/1.1 exchange over TCP: the request goes out
//! exactly as given (a vector's bytes), the response is read far enough to
//! know it is complete.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Generous: the fake answers at once unless a scenario says otherwise.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub(super) struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `request` to `addr` and reads one response.
pub(super) async fn exchange(addr: SocketAddr, request: &[u8]) -> Result<RawResponse, String> {
    tokio::time::timeout(EXCHANGE_TIMEOUT, async {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect to the fake at {addr}: {e}"))?;
        stream
            .write_all(request)
            .await
            .map_err(|e| format!("send to {addr}: {e}"))?;
        read_response(&mut stream).await
    })
    .await
    .map_err(|_| format!("no complete answer from {addr} within {EXCHANGE_TIMEOUT:?}"))?
}

async fn read_response(stream: &mut TcpStream) -> Result<RawResponse, String> {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(at) = find(&buffer, b"\r\n\r\n") {
            break at;
        }
        if read_more(stream, &mut buffer).await? == 0 {
            return Err(format!(
                "connection closed before a complete response head ({} bytes received)",
                buffer.len()
            ));
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an HTTP status line: {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = buffer[head_end + 4..].to_vec();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    if let Some(length) = header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| format!("bad Content-Length {length:?}"))?;
        while body.len() < length {
            if read_more(stream, &mut body).await? == 0 {
                return Err(format!(
                    "connection closed after {} of {length} body bytes",
                    body.len()
                ));
            }
        }
        body.truncate(length);
    } else if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        body = read_chunked(stream, body).await?;
    } else {
        while read_more(stream, &mut body).await? > 0 {}
    }
    Ok(RawResponse {
        status,
        headers,
        body,
    })
}

async fn read_chunked(stream: &mut TcpStream, mut raw: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    let mut pos = 0;
    loop {
        let line_end = loop {
            if let Some(at) = find(&raw[pos..], b"\r\n") {
                break pos + at;
            }
            if read_more(stream, &mut raw).await? == 0 {
                return Err("connection closed inside a chunk size line".into());
            }
        };
        let size_text = String::from_utf8_lossy(&raw[pos..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        let start = line_end + 2;
        while raw.len() < start + size + 2 {
            if read_more(stream, &mut raw).await? == 0 {
                return Err("connection closed inside a chunk".into());
            }
        }
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&raw[start..start + size]);
        pos = start + size + 2;
    }
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Result<usize, String> {
    let mut chunk = [0u8; 8192];
    let n = stream
        .read(&mut chunk)
        .await
        .map_err(|e| format!("read from the fake: {e}"))?;
    buffer.extend_from_slice(&chunk[..n]);
    Ok(n)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
