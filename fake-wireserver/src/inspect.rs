//! The request rulebook: what an agent sent that deviates from what the platform accepts or
//! the reference agents send (docs/protocol.md §1, §2), per endpoint. Every request rule lives
//! here; the fake records what it finds in the journal, and the conformance checks
//! `protocol.request` and `protocol.headers` grade these findings (by [`RequestId::graded_by`]
//! and severity: error → fail, warning → non-strict, info → a note) instead of deriving the
//! rules again. The fake never rejects for these unless the platform would (IMDS `Metadata`,
//! `api-version`, duplicate parameters, `X-Forwarded-For`); it records them.

use crate::EndpointId;
use crate::endpoint::*;
use crate::journal::Entry;
use crate::oracle::{Finding, Severity};

/// The IMDS api-versions the fake accepts (the platform's list, `defaults/imds-versions.json`).
/// Parsed once: every IMDS request checks its api-version against this list.
pub fn imds_api_versions() -> &'static [String] {
    static VERSIONS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        let v: serde_json::Value =
            serde_json::from_str(crate::documents::IMDS_VERSIONS_JSON).unwrap_or_default();
        v["apiVersions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    });
    &VERSIONS
}

pub(crate) struct RequestView<'a> {
    pub service: Service,
    pub endpoint: EndpointId,
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a [QueryPair<'a>],
    pub headers: &'a [(String, String)],
    pub http_version: &'a str,
}

impl RequestView<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn query_value(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_ref())
    }
}

/// Why an IMDS request is refused with 400, if it is (checked in the platform's order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ImdsRefusal {
    ForwardedFor,
    MetadataHeader,
    DuplicateQuery(String),
    ApiVersionMissing,
    ApiVersionUnsupported(String),
}

/// Why an IMDS request is refused with 400, if it is: the first of [`imds_refusals`].
pub(crate) fn imds_refusal(view: &RequestView) -> Option<ImdsRefusal> {
    imds_refusals(view).into_iter().next()
}

/// Every reason the platform has to refuse an IMDS request, in the order it checks them.
fn imds_refusals(view: &RequestView) -> Vec<ImdsRefusal> {
    let mut out = Vec::new();
    if view.header("x-forwarded-for").is_some() {
        out.push(ImdsRefusal::ForwardedFor);
    }
    if !view
        .header("metadata")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        out.push(ImdsRefusal::MetadataHeader);
    }
    if let Some(k) = view
        .query
        .iter()
        .enumerate()
        .find(|(i, (k, _))| view.query[..*i].iter().any(|(k2, _)| k2 == k))
        .map(|(_, (k, _))| k)
    {
        out.push(ImdsRefusal::DuplicateQuery(k.to_string()));
    }
    // `/metadata/versions` is the one IMDS path served without an api-version.
    if view.endpoint != EndpointId::ImdsVersions {
        match view.query_value("api-version") {
            None => out.push(ImdsRefusal::ApiVersionMissing),
            Some(v) if !imds_api_versions().iter().any(|s| s == v) => {
                out.push(ImdsRefusal::ApiVersionUnsupported(v.to_owned()))
            }
            Some(_) => {}
        }
    }
    out
}

/// Declares [`RequestId`] from one list: each variant with its dotted id, so the enum,
/// [`RequestId::ALL`] and [`RequestId::as_str`] cannot drift apart.
macro_rules! request_ids {
    ($($(#[doc = $doc:literal])* $variant:ident => $id:literal,)*) => {
        /// Every request finding id the fake mints. Each serializes as its dotted id
        /// ([`RequestId::as_str`]); the checks match these exactly ([`RequestId::parse`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum RequestId {
            $($(#[doc = $doc])* $variant,)*
        }

        impl RequestId {
            /// Every request finding id.
            pub const ALL: &'static [RequestId] = &[$(RequestId::$variant,)*];

            /// The dotted id, as the journal spells it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(RequestId::$variant => $id,)*
                }
            }
        }
    };
}

request_ids! {
    /// `header.missing.host`: an HTTP/1.1 request without `Host`.
    HeaderMissingHost => "header.missing.host",
    /// `header.missing.x-ms-version` on a wireserver XML call.
    HeaderMissingXMsVersion => "header.missing.x-ms-version",
    /// `header.unusual.x-ms-version`: not `2012-11-30`.
    HeaderUnusualXMsVersion => "header.unusual.x-ms-version",
    /// `header.missing.x-ms-agent-name` on a wireserver XML call (informational).
    HeaderMissingXMsAgentName => "header.missing.x-ms-agent-name",
    /// `header.missing.content-type` on a POST endpoint.
    HeaderMissingContentType => "header.missing.content-type",
    /// `header.unusual.content-type`: not the endpoint's media type.
    HeaderUnusualContentType => "header.unusual.content-type",
    /// `header.missing.x-ms-cipher-name` on the certificates GET: the platform is not told how
    /// to encrypt them.
    HeaderMissingXMsCipherName => "header.missing.x-ms-cipher-name",
    /// `header.unusual.x-ms-cipher-name`: neither `AES128_CBC` nor `DES_EDE3_CBC`.
    HeaderUnusualXMsCipherName => "header.unusual.x-ms-cipher-name",
    /// `header.missing.x-ms-guest-agent-name` on the JSON health endpoint (informational).
    HeaderMissingXMsGuestAgentName => "header.missing.x-ms-guest-agent-name",
    /// `header.forbidden.x-forwarded-for`: IMDS refuses it.
    HeaderForbiddenXForwardedFor => "header.forbidden.x-forwarded-for",
    /// `header.missing.metadata`: IMDS refuses it.
    HeaderMissingMetadata => "header.missing.metadata",
    /// `header.unusual.metadata`: not `true` (any case); IMDS refuses it.
    HeaderUnusualMetadata => "header.unusual.metadata",
    /// `header.unexpected.x-ms`: wireserver headers sent to IMDS (informational).
    HeaderUnexpectedXMs => "header.unexpected.x-ms",
    /// `method.unexpected`: not the endpoint's method.
    MethodUnexpected => "method.unexpected",
    /// `path.spelling`: a path spelling the reference agents do not use (warning), or a less
    /// common one they do (info).
    PathSpelling => "path.spelling",
    /// `path.unknown`: not an endpoint of the service.
    PathUnknown => "path.unknown",
    /// `path.imds-on-wireserver`: WALA's IMDS fallback (informational).
    PathImdsOnWireserver => "path.imds-on-wireserver",
    /// `path.admin-on-agent-listener`: the admin API asked on an agent's listener.
    PathAdminOnAgentListener => "path.admin-on-agent-listener",
    /// `query.duplicate`: a query parameter given twice; IMDS refuses it.
    QueryDuplicate => "query.duplicate",
    /// `query.missing.api-version`: IMDS refuses it.
    QueryMissingApiVersion => "query.missing.api-version",
    /// `query.unsupported.api-version`: IMDS refuses it.
    QueryUnsupportedApiVersion => "query.unsupported.api-version",
    /// `config.unknown-type`: a config type the goal state does not name.
    ConfigUnknownType => "config.unknown-type",
    /// `proxy.connect`: a CONNECT tunnel through the proxy.
    ProxyConnect => "proxy.connect",
    /// `proxy.unknown-host`: a proxy request for neither service.
    ProxyUnknownHost => "proxy.unknown-host",
    /// `http.malformed`: not an HTTP/1.x request.
    HttpMalformed => "http.malformed",
    /// `http.head-too-large`: over the head limits.
    HttpHeadTooLarge => "http.head-too-large",
    /// `http.body-too-large`: over the body limit.
    HttpBodyTooLarge => "http.body-too-large",
    /// `http.over-budget`: a body that did not fit beside the unfinished ones.
    HttpOverBudget => "http.over-budget",
    /// `http.incomplete`: the connection closed mid-request.
    HttpIncomplete => "http.incomplete",
}

/// Which conformance check grades a request finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aspect {
    /// `protocol.request`: method, path, query, the request as a whole.
    Request,
    /// `protocol.headers`: the headers each endpoint needs.
    Headers,
}

impl RequestId {
    /// The id a journal finding carries, if it is a request finding (exact match).
    pub fn parse(id: &str) -> Option<RequestId> {
        RequestId::ALL.iter().copied().find(|r| r.as_str() == id)
    }

    /// The checks that grade it. `X-Forwarded-For` is both a header and a request the
    /// platform refuses as a whole, so both checks count it.
    pub const fn graded_by(self) -> &'static [Aspect] {
        match self {
            RequestId::HeaderForbiddenXForwardedFor => &[Aspect::Request, Aspect::Headers],
            RequestId::HeaderMissingHost
            | RequestId::HeaderMissingXMsVersion
            | RequestId::HeaderUnusualXMsVersion
            | RequestId::HeaderMissingXMsAgentName
            | RequestId::HeaderMissingContentType
            | RequestId::HeaderUnusualContentType
            | RequestId::HeaderMissingXMsCipherName
            | RequestId::HeaderUnusualXMsCipherName
            | RequestId::HeaderMissingXMsGuestAgentName
            | RequestId::HeaderMissingMetadata
            | RequestId::HeaderUnusualMetadata
            | RequestId::HeaderUnexpectedXMs => &[Aspect::Headers],
            // Listed, not `_`: a new id must be given its check.
            RequestId::MethodUnexpected
            | RequestId::PathSpelling
            | RequestId::PathUnknown
            | RequestId::PathImdsOnWireserver
            | RequestId::PathAdminOnAgentListener
            | RequestId::QueryDuplicate
            | RequestId::QueryMissingApiVersion
            | RequestId::QueryUnsupportedApiVersion
            | RequestId::ConfigUnknownType
            | RequestId::ProxyConnect
            | RequestId::ProxyUnknownHost
            | RequestId::HttpMalformed
            | RequestId::HttpHeadTooLarge
            | RequestId::HttpBodyTooLarge
            | RequestId::HttpOverBudget
            | RequestId::HttpIncomplete => &[Aspect::Request],
        }
    }

    /// A finding of this id means the rulebook did not look at the request's headers and
    /// query: the admin API asked on an agent listener, a request that was not HTTP (or over
    /// the limits), a proxy request for neither service.
    pub const fn stops_the_rulebook(self) -> bool {
        matches!(
            self,
            RequestId::PathAdminOnAgentListener
                | RequestId::ProxyConnect
                | RequestId::ProxyUnknownHost
                | RequestId::HttpMalformed
                | RequestId::HttpHeadTooLarge
                | RequestId::HttpBodyTooLarge
                | RequestId::HttpOverBudget
                | RequestId::HttpIncomplete
        )
    }

    /// The request headers a finding of this id is about (what an excerpt should show).
    pub const fn headers(self) -> &'static [&'static str] {
        match self {
            RequestId::HeaderUnusualXMsVersion => &["x-ms-version"],
            RequestId::HeaderUnusualContentType => &["content-type"],
            RequestId::HeaderUnusualXMsCipherName => &["x-ms-cipher-name"],
            RequestId::HeaderForbiddenXForwardedFor => &["x-forwarded-for"],
            RequestId::HeaderUnusualMetadata => &["metadata"],
            RequestId::HeaderUnexpectedXMs => &["x-ms-version", "x-ms-agent-name"],
            _ => &[],
        }
    }

    fn finding(self, severity: Severity, message: impl Into<String>) -> Finding {
        Finding::new(self.as_str(), severity, message)
    }

    pub(crate) fn error(self, message: impl Into<String>) -> Finding {
        self.finding(Severity::Error, message)
    }

    pub(crate) fn warning(self, message: impl Into<String>) -> Finding {
        self.finding(Severity::Warning, message)
    }

    pub(crate) fn info(self, message: impl Into<String>) -> Finding {
        self.finding(Severity::Info, message)
    }
}

/// What the rulebook says about one endpoint: the rules [`findings`] applies to its requests.
struct Rules {
    /// The method it takes (`None`: not judged).
    method: Option<&'static str>,
    /// A wireserver XML call: `x-ms-version: 2012-11-30` (and `x-ms-agent-name`) expected.
    xml_call: bool,
    /// The media type of its body, and whether another one is an error (else a warning).
    content_type: Option<(&'static str, Severity)>,
    /// The path spellings the reference agents use (`None`: not judged), and the ones among
    /// them that are less common (noted).
    paths: Option<(&'static [&'static str], &'static [&'static str])>,
}

const NONE: Rules = Rules {
    method: None,
    xml_call: false,
    content_type: None,
    paths: None,
};

const MACHINE: &[&str] = &["/machine", "/machine/"];

/// The per-endpoint table (docs/protocol.md §1.1, §2).
fn rules(endpoint: EndpointId) -> Rules {
    let get = Some("GET");
    let post = Some("POST");
    let xml = Some(("text/xml", Severity::Warning));
    match endpoint {
        EndpointId::WireserverVersions => Rules {
            method: get,
            paths: Some((&["/"], &[])),
            ..NONE
        },
        EndpointId::WireserverGoalstate => Rules {
            method: get,
            xml_call: true,
            paths: Some((MACHINE, &["/machine"])),
            ..NONE
        },
        EndpointId::WireserverConfig
        | EndpointId::WireserverConfigHosting
        | EndpointId::WireserverConfigExtensions
        | EndpointId::WireserverCertificates => Rules {
            method: get,
            xml_call: true,
            ..NONE
        },
        EndpointId::WireserverHealthXml => Rules {
            method: post,
            xml_call: true,
            // Every reference agent sends this media type (docs/protocol.md §2); no source says
            // how the platform treats another, so wirecheck takes the strict reading: an error.
            content_type: Some(("text/xml", Severity::Error)),
            paths: Some((MACHINE, &["/machine/"])),
        },
        EndpointId::WireserverTelemetry | EndpointId::WireserverRoleProperties => Rules {
            method: post,
            xml_call: true,
            content_type: xml,
            ..NONE
        },
        EndpointId::WireserverHealthJson => Rules {
            method: post,
            content_type: Some(("application/json", Severity::Error)),
            paths: Some((&["/provisioning/health"], &[])),
            ..NONE
        },
        EndpointId::WireserverHealthService => Rules {
            method: post,
            ..NONE
        },
        EndpointId::ImdsInstance | EndpointId::ImdsVersions | EndpointId::ImdsReprovisiondata => {
            Rules {
                method: get,
                ..NONE
            }
        }
        EndpointId::HostpluginVmsettings
        | EndpointId::HostpluginVersions
        | EndpointId::HostpluginHealth => Rules {
            method: get,
            ..NONE
        },
        EndpointId::HostpluginStatus => Rules {
            method: Some("PUT"),
            ..NONE
        },
        // Listed, not `_`: a new endpoint must be given its rules (or none, on purpose).
        EndpointId::WireserverMetadata
        | EndpointId::WireserverUnknown
        | EndpointId::HostpluginUnknown
        | EndpointId::ImdsUnknown
        | EndpointId::ProxyUnknownHost => NONE,
    }
}

/// True when the rulebook judges the headers of requests to `endpoint` (IMDS's `Metadata`,
/// the wireserver's `x-ms-version`, a body's Content-Type): what `protocol.headers` counts as
/// judged even when a request has no header finding.
pub fn judges_headers(endpoint: EndpointId) -> bool {
    let r = rules(endpoint);
    r.xml_call || r.content_type.is_some() || endpoint.is_imds()
}

/// Whether the rulebook judged this entry's request ([`RequestId::stops_the_rulebook`]): what
/// a check may count as judged, even when no finding says something is wrong.
pub fn inspected(entry: &Entry) -> bool {
    !entry
        .findings
        .iter()
        .filter_map(|f| RequestId::parse(&f.id))
        .any(RequestId::stops_the_rulebook)
}

/// The findings the fake records for a journal entry's request (what its `findings` hold for a
/// request it classified as `entry.endpoint`), e.g. to build a journal by hand.
pub fn request_findings(entry: &Entry) -> Vec<Finding> {
    // `proxy.unknown-host` has no service: routed by host, not classified, what it gets
    // wrong is the route's (`proxy.*`).
    let Some(service) = entry.endpoint.service() else {
        return Vec::new();
    };
    let endpoint = entry.endpoint;
    let target = split_target(&entry.target);
    let query = decode_query(target.query);
    findings(&RequestView {
        service,
        endpoint,
        method: &entry.method,
        path: target.path,
        query: &query,
        headers: &entry.headers,
        http_version: &entry.http_version,
    })
}

/// Findings about one classified request.
pub(crate) fn findings(view: &RequestView) -> Vec<Finding> {
    let mut out = Vec::new();
    if view.http_version == "HTTP/1.1" && view.header("host").is_none() {
        out.push(RequestId::HeaderMissingHost.warning("HTTP/1.1 request without a Host header"));
    }
    let rules = rules(view.endpoint);
    if rules.xml_call {
        xml_call(view, &mut out);
    }
    if let Some(method) = rules.method
        && view.method != method
    {
        out.push(RequestId::MethodUnexpected.error(format!(
            "{} must be {method}, got {}",
            view.endpoint, view.method
        )));
    }
    if let Some((media, wrong)) = rules.content_type {
        content_type(view, media, wrong, &mut out);
    }
    if let Some((accepted, noted)) = rules.paths {
        path_spelling(view, accepted, noted, &mut out);
    }
    match view.service {
        Service::Wireserver => wireserver(view, &mut out),
        Service::Imds => imds(view, &mut out),
        Service::HostPlugin => {
            if view.endpoint == EndpointId::HostpluginUnknown {
                out.push(RequestId::PathUnknown.warning(format!(
                    "{} {}{}: not a HostGAPlugin endpoint the fake serves (answered 404)",
                    view.method,
                    view.path,
                    query_suffix(view.query)
                )));
            }
        }
    }
    out
}

fn xml_call(view: &RequestView, out: &mut Vec<Finding>) {
    match view.header("x-ms-version") {
        None => out.push(RequestId::HeaderMissingXMsVersion.warning(format!(
            "{}: no x-ms-version header; every reference agent sends 2012-11-30",
            view.endpoint
        ))),
        Some(v) if v.trim() != "2012-11-30" => {
            out.push(RequestId::HeaderUnusualXMsVersion.warning(format!(
                "{}: x-ms-version {v:?}; every reference agent sends 2012-11-30",
                view.endpoint
            )))
        }
        Some(_) => {}
    }
    if view.header("x-ms-agent-name").is_none() {
        out.push(RequestId::HeaderMissingXMsAgentName.info(format!(
            "{}: no x-ms-agent-name header (informational)",
            view.endpoint
        )));
    }
}

/// Path spelling: `accepted` are the reference agents' spellings; among them, `noted` are the
/// less common ones (docs/protocol.md §1.1: both slash spellings occur, neither is an error).
fn path_spelling(view: &RequestView, accepted: &[&str], noted: &[&str], out: &mut Vec<Finding>) {
    if !accepted.contains(&view.path) {
        out.push(RequestId::PathSpelling.warning(format!(
            "{} path spelled {:?}; reference agents use {}",
            view.endpoint,
            view.path,
            accepted
                .iter()
                .map(|p| format!("{p:?}"))
                .collect::<Vec<_>>()
                .join(" or ")
        )));
        return;
    }
    if !noted.contains(&view.path) {
        return;
    }
    let message = match view.endpoint {
        EndpointId::WireserverGoalstate => {
            "goal state requested as /machine?comp=goalstate (no slash; linuxkit style); cloud-init, afterburn and WALA use /machine/?comp=goalstate"
        }
        _ => {
            "health posted to /machine/?comp=health (afterburn, azure-init <= Aug 2025 style); cloud-init, WALA and linuxkit use /machine?comp=health"
        }
    };
    out.push(RequestId::PathSpelling.info(message));
}

fn wireserver(view: &RequestView, out: &mut Vec<Finding>) {
    match view.endpoint {
        EndpointId::WireserverMetadata => out.push(RequestId::PathImdsOnWireserver.info(format!(
            "{} {}{}: an IMDS request sent to the wireserver (WALA's fallback when 169.254.169.254 is unreachable; answered 404)",
            view.method,
            view.path,
            query_suffix(view.query)
        ))),
        EndpointId::WireserverHealthJson if view.header("x-ms-guest-agent-name").is_none() => {
            out.push(RequestId::HeaderMissingXMsGuestAgentName.info(
                "wireserver.health.json: no x-ms-guest-agent-name header (azure-init sends \"azure-init v<version>\")",
            ))
        }
        EndpointId::WireserverCertificates => certificates_cipher(view, out),
        EndpointId::WireserverConfig => {
            let config_type = view.query_value("type");
            if !config_type.is_some_and(|t| t.eq_ignore_ascii_case("sharedConfig")) {
                out.push(RequestId::ConfigUnknownType.warning(format!(
                    "config type {config_type:?} is not named in the goal state (answered 404)"
                )));
            }
        }
        EndpointId::WireserverUnknown => out.push(RequestId::PathUnknown.warning(format!(
            "{} {}{}: not a wireserver endpoint (answered 404, as the platform does)",
            view.method,
            view.path,
            query_suffix(view.query)
        ))),
        _ => {}
    }
}

/// The ciphers the certificates GET may ask for (docs/protocol.md §2): WALinuxAgent 2.14+ tries
/// `AES128_CBC` first, then `DES_EDE3_CBC`, which every older agent sends. The fake serves no
/// certificates (an empty `<Data>`), so it answers both alike; no source says what the platform
/// does with another value or none, so either is a warning.
pub const CERTIFICATE_CIPHERS: [&str; 2] = ["AES128_CBC", "DES_EDE3_CBC"];

fn certificates_cipher(view: &RequestView, out: &mut Vec<Finding>) {
    match view.header("x-ms-cipher-name") {
        None => out.push(RequestId::HeaderMissingXMsCipherName.warning(
            "wireserver.certificates: no x-ms-cipher-name header; every reference agent names the cipher (AES128_CBC or DES_EDE3_CBC)",
        )),
        Some(c) if !CERTIFICATE_CIPHERS.contains(&c) => {
            out.push(RequestId::HeaderUnusualXMsCipherName.warning(format!(
                "wireserver.certificates: x-ms-cipher-name {:?}; the platform's ciphers are {}",
                crate::text::clip(c, 64),
                CERTIFICATE_CIPHERS.join(" and ")
            )))
        }
        Some(_) => {}
    }
}

/// The body's media type: `text/xml; charset=utf-8` and `text/xml;charset=utf-8` are both
/// `text/xml` (§2). A missing Content-Type is a warning; another media type is `wrong`.
fn content_type(view: &RequestView, media: &str, wrong: Severity, out: &mut Vec<Finding>) {
    match view.header("content-type") {
        None => out.push(RequestId::HeaderMissingContentType.warning(format!(
            "{}: no Content-Type; expected {media}",
            view.endpoint
        ))),
        Some(v) => {
            let got = v
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if got != media {
                out.push(RequestId::HeaderUnusualContentType.finding(
                    wrong,
                    format!("{}: Content-Type {v:?}; expected {media}", view.endpoint),
                ));
            }
        }
    }
}

fn imds(view: &RequestView, out: &mut Vec<Finding>) {
    // Every rule the platform refuses for, not only the first (the answer's reason).
    for refusal in imds_refusals(view) {
        out.push(match refusal {
            ImdsRefusal::ForwardedFor => RequestId::HeaderForbiddenXForwardedFor
                .error("IMDS request with X-Forwarded-For (the platform rejects it)"),
            ImdsRefusal::MetadataHeader => match view.header("metadata") {
                None => RequestId::HeaderMissingMetadata.error(
                    "IMDS request without the Metadata: true header (the platform answers 400)",
                ),
                Some(v) => RequestId::HeaderUnusualMetadata.error(format!(
                    "IMDS request with Metadata: {v:?}; expected \"true\" (the platform answers 400)"
                )),
            },
            ImdsRefusal::DuplicateQuery(_) => RequestId::QueryDuplicate.error(
                "IMDS request with a duplicate query parameter (the platform rejects it)",
            ),
            ImdsRefusal::ApiVersionMissing => RequestId::QueryMissingApiVersion
                .error("IMDS request without api-version (the platform answers 400)"),
            ImdsRefusal::ApiVersionUnsupported(v) => RequestId::QueryUnsupportedApiVersion
                .error(format!(
                    "api-version {v:?} is not one the platform supports (answered 400)"
                )),
        });
    }
    if view.header("x-ms-version").is_some() || view.header("x-ms-agent-name").is_some() {
        out.push(
            RequestId::HeaderUnexpectedXMs
                .info("wireserver x-ms-* headers sent to IMDS (afterburn does this; harmless)"),
        );
    }
    if view.endpoint == EndpointId::ImdsUnknown {
        out.push(RequestId::PathUnknown.warning(format!(
            "{} {}{}: not an IMDS endpoint the fake serves (answered 404)",
            view.method,
            view.path,
            query_suffix(view.query)
        )));
    }
}

fn query_suffix(query: &[QueryPair]) -> String {
    if query.is_empty() {
        String::new()
    } else {
        let parts: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("?{}", parts.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view_findings(
        service: Service,
        endpoint: EndpointId,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
    ) -> Vec<Finding> {
        let parts = split_target(target);
        let query = decode_query(parts.query);
        let headers: Vec<(String, String)> = std::iter::once(("Host", "h"))
            .chain(headers.iter().copied())
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        findings(&RequestView {
            service,
            endpoint,
            method,
            path: parts.path,
            query: &query,
            headers: &headers,
            http_version: "HTTP/1.1",
        })
    }

    #[test]
    fn ids_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &id in RequestId::ALL {
            assert_eq!(RequestId::parse(id.as_str()), Some(id));
            assert!(seen.insert(id.as_str()), "{id:?} twice");
            assert!(!id.graded_by().is_empty(), "{id:?} graded by no check");
        }
        assert_eq!(RequestId::parse("header.missing"), None);
        assert_eq!(RequestId::parse("header.missing.metadata.x"), None);
    }

    /// Every id of the rulebook is minted by some request (the ids the connection path mints
    /// for what is not a classified request, `http.*`, `proxy.*` and the admin path, are
    /// produced by `tests/hostile_input.rs`, `smoke.rs` and `admin_journal.rs`), so a check
    /// grading an id cannot go blind after a rename here.
    #[test]
    fn every_rulebook_id_is_minted_with_the_severity_the_checks_grade() {
        use Service::*;
        use Severity::*;
        let md = ("Metadata", "true");
        let xv = ("x-ms-version", "2012-11-30");
        let cases: &[(RequestId, Severity, Vec<Finding>)] = &[
            (
                RequestId::HeaderMissingHost,
                Warning,
                findings(&RequestView {
                    service: Wireserver,
                    endpoint: EndpointId::WireserverVersions,
                    method: "GET",
                    path: "/",
                    query: &[],
                    headers: &[],
                    http_version: "HTTP/1.1",
                }),
            ),
            (
                RequestId::HeaderMissingXMsVersion,
                Warning,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverGoalstate,
                    "GET",
                    "/machine/?comp=goalstate",
                    &[],
                ),
            ),
            (
                RequestId::HeaderUnusualXMsVersion,
                Warning,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverGoalstate,
                    "GET",
                    "/machine/?comp=goalstate",
                    &[("x-ms-version", "1")],
                ),
            ),
            (
                RequestId::HeaderMissingXMsAgentName,
                Info,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverGoalstate,
                    "GET",
                    "/machine/?comp=goalstate",
                    &[xv],
                ),
            ),
            (
                RequestId::HeaderMissingContentType,
                Warning,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverHealthXml,
                    "POST",
                    "/machine?comp=health",
                    &[xv],
                ),
            ),
            (
                RequestId::HeaderUnusualContentType,
                Error,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverHealthJson,
                    "POST",
                    "/provisioning/health",
                    &[("Content-Type", "text/plain")],
                ),
            ),
            (
                RequestId::HeaderUnusualContentType,
                Warning,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverTelemetry,
                    "POST",
                    "/machine?comp=telemetrydata",
                    &[xv, ("Content-Type", "text/plain")],
                ),
            ),
            (
                RequestId::HeaderMissingXMsCipherName,
                Warning,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverCertificates,
                    "GET",
                    "/machine/?comp=certificates&incarnation=1",
                    &[xv, ("x-ms-agent-name", "a")],
                ),
            ),
            (
                RequestId::HeaderUnusualXMsCipherName,
                Warning,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverCertificates,
                    "GET",
                    "/machine/?comp=certificates&incarnation=1",
                    &[xv, ("x-ms-agent-name", "a"), ("x-ms-cipher-name", "RC4")],
                ),
            ),
            (
                RequestId::HeaderMissingXMsGuestAgentName,
                Info,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverHealthJson,
                    "POST",
                    "/provisioning/health",
                    &[("Content-Type", "application/json")],
                ),
            ),
            (
                RequestId::HeaderForbiddenXForwardedFor,
                Error,
                view_findings(
                    Imds,
                    EndpointId::ImdsInstance,
                    "GET",
                    "/metadata/instance?api-version=2021-08-01",
                    &[md, ("X-Forwarded-For", "x")],
                ),
            ),
            (
                RequestId::HeaderMissingMetadata,
                Error,
                view_findings(
                    Imds,
                    EndpointId::ImdsInstance,
                    "GET",
                    "/metadata/instance?api-version=2021-08-01",
                    &[],
                ),
            ),
            (
                RequestId::HeaderUnusualMetadata,
                Error,
                view_findings(
                    Imds,
                    EndpointId::ImdsInstance,
                    "GET",
                    "/metadata/instance?api-version=2021-08-01",
                    &[("Metadata", "yes")],
                ),
            ),
            (
                RequestId::HeaderUnexpectedXMs,
                Info,
                view_findings(
                    Imds,
                    EndpointId::ImdsInstance,
                    "GET",
                    "/metadata/instance?api-version=2021-08-01",
                    &[md, xv],
                ),
            ),
            (
                RequestId::MethodUnexpected,
                Error,
                view_findings(
                    HostPlugin,
                    EndpointId::HostpluginStatus,
                    "GET",
                    "/status",
                    &[],
                ),
            ),
            (
                RequestId::PathSpelling,
                Warning,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverGoalstate,
                    "GET",
                    "/?comp=goalstate",
                    &[xv],
                ),
            ),
            (
                RequestId::PathSpelling,
                Info,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverHealthXml,
                    "POST",
                    "/machine/?comp=health",
                    &[xv, ("Content-Type", "text/xml")],
                ),
            ),
            (
                RequestId::PathUnknown,
                Warning,
                view_findings(
                    Imds,
                    EndpointId::ImdsUnknown,
                    "GET",
                    "/metadata/x?api-version=2021-08-01",
                    &[md],
                ),
            ),
            (
                RequestId::PathImdsOnWireserver,
                Info,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverMetadata,
                    "GET",
                    "/metadata/instance",
                    &[],
                ),
            ),
            (
                RequestId::QueryDuplicate,
                Error,
                view_findings(
                    Imds,
                    EndpointId::ImdsInstance,
                    "GET",
                    "/metadata/instance?api-version=2021-08-01&x=1&x=2",
                    &[md],
                ),
            ),
            (
                RequestId::QueryMissingApiVersion,
                Error,
                view_findings(
                    Imds,
                    EndpointId::ImdsInstance,
                    "GET",
                    "/metadata/instance",
                    &[md],
                ),
            ),
            (
                RequestId::QueryUnsupportedApiVersion,
                Error,
                view_findings(
                    Imds,
                    EndpointId::ImdsInstance,
                    "GET",
                    "/metadata/instance?api-version=1",
                    &[md],
                ),
            ),
            (
                RequestId::ConfigUnknownType,
                Warning,
                view_findings(
                    Wireserver,
                    EndpointId::WireserverConfig,
                    "GET",
                    "/machine/?comp=config&type=x",
                    &[xv],
                ),
            ),
        ];
        for (id, severity, found) in cases {
            assert!(
                found
                    .iter()
                    .any(|f| f.id == id.as_str() && f.severity == *severity),
                "{id:?} ({severity:?}) not in {found:?}"
            );
        }
        let minted: std::collections::HashSet<RequestId> = cases.iter().map(|c| c.0).collect();
        let elsewhere = [
            RequestId::PathAdminOnAgentListener,
            RequestId::ProxyConnect,
            RequestId::ProxyUnknownHost,
            RequestId::HttpMalformed,
            RequestId::HttpHeadTooLarge,
            RequestId::HttpBodyTooLarge,
            RequestId::HttpOverBudget,
            RequestId::HttpIncomplete,
        ];
        for &id in RequestId::ALL {
            assert!(
                minted.contains(&id) || elsewhere.contains(&id),
                "{id:?} is minted by no request here"
            );
        }
    }

    /// Every reason the platform refuses for is recorded, the answer takes the first.
    #[test]
    fn every_imds_refusal_is_recorded_and_the_first_answers() {
        let target = "/metadata/instance?x=1&x=2";
        let found = view_findings(
            Service::Imds,
            EndpointId::ImdsInstance,
            "GET",
            target,
            &[("X-Forwarded-For", "x")],
        );
        let ids: Vec<&str> = found.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "header.forbidden.x-forwarded-for",
                "header.missing.metadata",
                "query.duplicate",
                "query.missing.api-version"
            ]
        );
        let parts = split_target(target);
        let query = decode_query(parts.query);
        let headers = vec![("X-Forwarded-For".to_owned(), "x".to_owned())];
        let view = RequestView {
            service: Service::Imds,
            endpoint: EndpointId::ImdsInstance,
            method: "GET",
            path: parts.path,
            query: &query,
            headers: &headers,
            http_version: "HTTP/1.1",
        };
        assert_eq!(imds_refusal(&view), Some(ImdsRefusal::ForwardedFor));
    }

    #[test]
    fn both_platform_ciphers_are_taken_on_the_certificates_get() {
        // WALinuxAgent 2.14+ asks AES128_CBC first (goal_state.py:600), every older agent
        // DES_EDE3_CBC (2.7.3 wire.py:1425, cloud-init's helpers/azure.py).
        for cipher in CERTIFICATE_CIPHERS {
            let found = view_findings(
                Service::Wireserver,
                EndpointId::WireserverCertificates,
                "GET",
                "/machine/?comp=certificates&incarnation=1",
                &[
                    ("x-ms-version", "2012-11-30"),
                    ("x-ms-agent-name", "a"),
                    ("x-ms-cipher-name", cipher),
                ],
            );
            assert!(
                !found.iter().any(|f| f.id.contains("cipher")),
                "{cipher}: {found:?}"
            );
        }
    }

    #[test]
    fn header_rules_apply_where_the_table_says() {
        for (endpoint, judged) in [
            (EndpointId::ImdsInstance, true),
            (EndpointId::ImdsUnknown, true),
            (EndpointId::WireserverGoalstate, true),
            (EndpointId::WireserverCertificates, true),
            (EndpointId::WireserverHealthJson, true),
            (EndpointId::WireserverVersions, false),
            (EndpointId::WireserverUnknown, false),
            (EndpointId::HostpluginVmsettings, false),
        ] {
            assert_eq!(judges_headers(endpoint), judged, "{endpoint}");
        }
    }
}
