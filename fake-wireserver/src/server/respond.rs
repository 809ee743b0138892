//! The last step of an exchange: the answer, written on the raw socket. A default answer comes
//! from the service's documents (IMDS directly, the others through their axum routers); a
//! scripted fault is acted out by one function per kind, all ending in the same tail
//! ([`Responder::send`] or [`Responder::finish`]), which makes the journal entry final once
//! the answer or fault is on the wire; a reset's is made final by the connection loop, once
//! the RST is out ([`Flow::Reset`]).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::ServiceExt;

use crate::context::RequestCtx;
use crate::documents::{JSON_CONTENT_TYPE, SERVER_HEADER, THROTTLED_BODY, XML_CONTENT_TYPE};
use crate::endpoint::{self, QueryPair, Service, TargetParts};
use crate::engine::Decision;
use crate::http1::{Outgoing, Request};
use crate::scenario::{Action, Preset, Reply};
use crate::sync::lock;

use super::{Flow, Shared};

/// Everything the answer to one request needs, and the journal entry it answers.
pub(super) struct Responder<'a> {
    pub shared: &'a Shared,
    pub stream: &'a mut TcpStream,
    /// The journal entry of this request.
    pub seq: u64,
    pub req: &'a Request,
    pub target: &'a TargetParts<'a>,
    pub query: &'a [QueryPair<'a>],
    pub ctx: RequestCtx,
    /// `None`: the proxy's 502 for an unknown host.
    pub service: Option<Service>,
    pub admin_path: bool,
    /// Close the connection after the answer (the client asked, or HTTP/1.0).
    pub close: bool,
    pub head_only: bool,
}

impl Responder<'_> {
    /// Answers as `decision` says.
    pub async fn act(mut self, decision: Decision) -> Flow {
        match decision {
            Decision::Default => {
                let out = self.default_answer().await;
                self.send(out).await
            }
            Decision::Throttled => self.send(throttled()).await,
            Decision::ImdsThrottled => self.send(imds_throttled()).await,
            Decision::Step { action, .. } => match action {
                Action::Respond(reply) => {
                    let out = render_reply(&reply, self.service);
                    self.send(out).await
                }
                Action::Delay { seconds, reply } => self.delay(seconds, reply.as_ref()).await,
                Action::Hang => self.hang().await,
                Action::Reset => self.reset(),
                Action::Close => self.close_now().await,
                Action::Malformed { bytes } => self.malformed(bytes.as_bytes()).await,
                Action::Partial { bytes_sent, reply } => {
                    self.partial(bytes_sent, reply.as_ref()).await
                }
                Action::Slow {
                    chunk,
                    interval,
                    reply,
                } => self.slow(chunk, interval, reply.as_ref()).await,
            },
        }
    }

    /// The shared tail: write `out`, make the entry final with its status.
    async fn send(&mut self, out: Outgoing) -> Flow {
        let ok = write_response(self.stream, &out, self.close, self.head_only).await;
        self.finish(Some(out.status));
        if ok { Flow::KeepAlive } else { Flow::Close }
    }

    /// Makes the journal entry final: answered now, with `status` (`None`: no answer sent).
    fn finish(&self, status: Option<u16>) {
        self.shared.answered(self.seq, status);
    }

    /// The scripted reply, or the default answer when the step gives none.
    async fn reply_or_default(&self, reply: Option<&Reply>) -> Outgoing {
        match reply {
            Some(r) => render_reply(r, self.service),
            None => self.default_answer().await,
        }
    }

    async fn default_answer(&self) -> Outgoing {
        if self.admin_path {
            return Outgoing::new(404, vec![], Vec::new());
        }
        match self.service {
            Some(s) => route_default(s, self.req, self.target, self.query, &self.ctx).await,
            None => Outgoing::new(
                502,
                vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
                "502 Bad Gateway: this proxy only serves the wireserver and IMDS\n",
            ),
        }
    }

    async fn delay(&mut self, seconds: f64, reply: Option<&Reply>) -> Flow {
        self.shared
            .clock
            .sleep(crate::scenario::seconds(seconds))
            .await;
        let out = self.reply_or_default(reply).await;
        self.send(out).await
    }

    /// Never answered (done_ms stays None). Keeps reading (and discarding) until the client
    /// gives up, which is when the entry is final; if the fake stops first, shutdown writes it
    /// as pending.
    async fn hang(self) -> Flow {
        let mut sink = [0u8; 4096];
        while let Ok(n) = self.stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
        let closed = self.shared.now_ms();
        lock(&self.shared.journal).finish(self.seq, |e| e.client_closed_ms = Some(closed));
        Flow::Gone
    }

    fn reset(self) -> Flow {
        // A disconnect (connect to AF_UNSPEC) sends the RST now, even while a process being
        // spawned beside holds a copy of the descriptor (a close would wait for that copy);
        // SO_LINGER 0 makes the close one too, should the disconnect fail. The connection
        // loop then drops it and makes the entry final.
        let _ = self.stream.set_zero_linger();
        let _ = rustix::net::connect_unspec(&*self.stream);
        Flow::Reset { seq: self.seq }
    }

    async fn close_now(self) -> Flow {
        let _ = self.stream.shutdown().await;
        self.finish(None);
        Flow::Gone
    }

    async fn malformed(self, bytes: &[u8]) -> Flow {
        let _ = self.stream.write_all(bytes).await;
        let _ = self.stream.flush().await;
        let _ = self.stream.shutdown().await;
        self.finish(None);
        Flow::Gone
    }

    async fn partial(self, bytes_sent: usize, reply: Option<&Reply>) -> Flow {
        let out = self.reply_or_default(reply).await;
        // Always short of the declared length, so the client sees a truncated body.
        let n = bytes_sent.min(out.body.len().saturating_sub(1));
        let _ = self.stream.write_all(&out.head(true)).await;
        let _ = self.stream.write_all(&out.body[..n]).await;
        let _ = self.stream.flush().await;
        let _ = self.stream.shutdown().await;
        self.finish(Some(out.status));
        Flow::Gone
    }

    async fn slow(self, chunk: usize, interval: f64, reply: Option<&Reply>) -> Flow {
        let out = self.reply_or_default(reply).await;
        let mut ok = self.stream.write_all(&out.head(self.close)).await.is_ok();
        if !self.head_only {
            for piece in out.body.chunks(chunk.max(1)) {
                if !ok {
                    break;
                }
                self.shared
                    .clock
                    .sleep(crate::scenario::seconds(interval))
                    .await;
                ok =
                    self.stream.write_all(piece).await.is_ok() && self.stream.flush().await.is_ok();
            }
        }
        self.finish(Some(out.status));
        if ok { Flow::KeepAlive } else { Flow::Close }
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
pub(super) fn base_url(host: Option<&str>, local: Option<SocketAddr>) -> String {
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

/// The platform's throttling reply (docs/protocol.md §8.1).
fn throttled() -> Outgoing {
    Outgoing::new(
        403,
        vec![
            ("Content-Type".into(), XML_CONTENT_TYPE.into()),
            ("Server".into(), SERVER_HEADER.into()),
        ],
        THROTTLED_BODY,
    )
}

/// IMDS's answer beyond its per-VM limit (docs/protocol.md §1.2): 429 with a JSON `error`, the
/// shape of IMDS's other error bodies; the platform's exact text is not documented, so the
/// message restates the documented limit. No `Retry-After`: none is documented.
fn imds_throttled() -> Outgoing {
    Outgoing::new(
        429,
        vec![("Content-Type".into(), JSON_CONTENT_TYPE.into())],
        crate::imds::TOO_MANY_REQUESTS_BODY,
    )
}

/// A scripted reply: preset first, then explicit status/headers/body on top.
fn render_reply(reply: &Reply, service: Option<Service>) -> Outgoing {
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

/// The default answer: the request goes through the service's axum router.
/// `target` and `query` are the request's, as the exchange split and decoded them (once).
async fn route_default(
    service: Service,
    req: &Request,
    target: &TargetParts<'_>,
    query: &[QueryPair<'_>],
    ctx: &RequestCtx,
) -> Outgoing {
    match service {
        Service::Imds => {
            if http::Method::from_bytes(req.method.as_bytes()).is_err() {
                return Outgoing::new(400, vec![], Vec::new());
            }
            imds_default(req, &origin_form(req, target), target.query, query, ctx)
        }
        Service::Wireserver | Service::HostPlugin => {
            via_router(service, req, target, ctx.clone()).await
        }
    }
}

/// `path?query` of the request target: the target itself unless it is absolute-form or has
/// an empty path (the common case borrows).
fn origin_form<'a>(req: &'a Request, parts: &TargetParts<'_>) -> std::borrow::Cow<'a, str> {
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
async fn via_router(
    service: Service,
    req: &Request,
    target: &TargetParts<'_>,
    ctx: RequestCtx,
) -> Outgoing {
    let uri = origin_form(req, target);
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
fn imds_default(
    req: &Request,
    uri: &str,
    raw_query: Option<&str>,
    decoded: &[QueryPair<'_>],
    ctx: &RequestCtx,
) -> Outgoing {
    let Ok(uri) = http::Uri::try_from(uri) else {
        return Outgoing::new(400, vec![], Vec::new());
    };
    // The pairs already decoded, unless `http` split the query differently (e.g. at a '#').
    let reparsed;
    let query = if uri.query() == raw_query {
        decoded
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
    use crate::documents::Documents;
    use crate::scenario::Scenario;
    use std::sync::Arc;
    use std::time::Instant;

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
                received_by_kernel: false,
            };
            let parts = endpoint::split_target(&req.target);
            let query = endpoint::decode_query(parts.query);
            let direct = route_default(Service::Imds, &req, &parts, &query, &ctx).await;
            let routed = via_router(Service::Imds, &req, &parts, ctx.clone()).await;
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
