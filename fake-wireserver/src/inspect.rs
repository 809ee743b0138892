//! Request-level findings: what an agent sent that deviates from what the reference agents send
//! (docs/protocol.md §1, §2). The fake never rejects for these unless the platform would (IMDS
//! `Metadata`, `api-version`, duplicate parameters, `X-Forwarded-For`); it records them.

use crate::endpoint::*;
use crate::oracle::Finding;

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
    pub endpoint: &'static str,
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

pub(crate) fn imds_refusal(view: &RequestView) -> Option<ImdsRefusal> {
    if view.header("x-forwarded-for").is_some() {
        return Some(ImdsRefusal::ForwardedFor);
    }
    if !view
        .header("metadata")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return Some(ImdsRefusal::MetadataHeader);
    }
    for (i, (k, _)) in view.query.iter().enumerate() {
        if view.query[..i].iter().any(|(k2, _)| k2 == k) {
            return Some(ImdsRefusal::DuplicateQuery(k.to_string()));
        }
    }
    if view.endpoint == IMDS_VERSIONS {
        return None;
    }
    match view.query_value("api-version") {
        None => Some(ImdsRefusal::ApiVersionMissing),
        Some(v) if !imds_api_versions().iter().any(|s| s == v) => {
            Some(ImdsRefusal::ApiVersionUnsupported(v.to_owned()))
        }
        Some(_) => None,
    }
}

/// Findings about one classified request.
pub(crate) fn findings(view: &RequestView) -> Vec<Finding> {
    let mut out = Vec::new();
    if view.http_version == "HTTP/1.1" && view.header("host").is_none() {
        out.push(Finding::warning(
            "header.missing.host",
            "HTTP/1.1 request without a Host header",
        ));
    }
    match view.service {
        Service::Wireserver => wireserver(view, &mut out),
        Service::Imds => imds(view, &mut out),
        Service::HostPlugin => hostplugin(view, &mut out),
    }
    out
}

fn hostplugin(view: &RequestView, out: &mut Vec<Finding>) {
    match view.endpoint {
        HOSTPLUGIN_VMSETTINGS | HOSTPLUGIN_VERSIONS | HOSTPLUGIN_HEALTH => {
            expect_method(view, "GET", out)
        }
        HOSTPLUGIN_STATUS => expect_method(view, "PUT", out),
        _ => out.push(Finding::warning(
            "path.unknown",
            format!(
                "{} {}{}: not a HostGAPlugin endpoint the fake serves (answered 404)",
                view.method,
                view.path,
                query_suffix(view.query)
            ),
        )),
    }
}

fn expect_method(view: &RequestView, method: &str, out: &mut Vec<Finding>) {
    if view.method != method {
        out.push(Finding::error(
            "method.unexpected",
            format!(
                "{} expects {method}, got {} (answered 405)",
                view.endpoint, view.method
            ),
        ));
    }
}

fn wireserver(view: &RequestView, out: &mut Vec<Finding>) {
    let xml_call = matches!(
        view.endpoint,
        WIRESERVER_GOALSTATE
            | WIRESERVER_CONFIG
            | WIRESERVER_CONFIG_HOSTING
            | WIRESERVER_CONFIG_EXTENSIONS
            | WIRESERVER_CERTIFICATES
            | WIRESERVER_HEALTH_XML
            | WIRESERVER_TELEMETRY
            | WIRESERVER_ROLE_PROPERTIES
    );
    if xml_call {
        match view.header("x-ms-version") {
            None => out.push(Finding::warning(
                "header.missing.x-ms-version",
                format!(
                    "{}: no x-ms-version header; every agent sends x-ms-version: 2012-11-30",
                    view.endpoint
                ),
            )),
            Some(v) if v.trim() != "2012-11-30" => out.push(Finding::warning(
                "header.unusual.x-ms-version",
                format!(
                    "{}: x-ms-version is {v:?}, expected \"2012-11-30\"",
                    view.endpoint
                ),
            )),
            Some(_) => {}
        }
        if view.header("x-ms-agent-name").is_none() {
            out.push(Finding::info(
                "header.missing.x-ms-agent-name",
                format!(
                    "{}: no x-ms-agent-name header (informational)",
                    view.endpoint
                ),
            ));
        }
    }
    match view.endpoint {
        WIRESERVER_VERSIONS
        | WIRESERVER_GOALSTATE
        | WIRESERVER_CONFIG
        | WIRESERVER_CONFIG_HOSTING
        | WIRESERVER_CONFIG_EXTENSIONS
        | WIRESERVER_CERTIFICATES => expect_method(view, "GET", out),
        WIRESERVER_HEALTH_SERVICE => expect_method(view, "POST", out),
        WIRESERVER_METADATA => out.push(Finding::info(
            "path.imds-on-wireserver",
            format!(
                "{} {}{}: an IMDS request sent to the wireserver (WALA's fallback when 169.254.169.254 is unreachable; answered 404)",
                view.method,
                view.path,
                query_suffix(view.query)
            ),
        )),
        WIRESERVER_HEALTH_XML | WIRESERVER_TELEMETRY | WIRESERVER_ROLE_PROPERTIES => {
            expect_method(view, "POST", out);
            content_type(view, &["text/xml"], out);
        }
        WIRESERVER_HEALTH_JSON => {
            expect_method(view, "POST", out);
            content_type(view, &["application/json"], out);
            if view.header("x-ms-guest-agent-name").is_none() {
                out.push(Finding::info(
                    "header.missing.x-ms-guest-agent-name",
                    "wireserver.health.json: no x-ms-guest-agent-name header (azure-init sends \"azure-init v<version>\")",
                ));
            }
        }
        WIRESERVER_UNKNOWN => out.push(Finding::warning(
            "path.unknown",
            format!(
                "{} {}{}: not a wireserver endpoint (answered 404, as the platform does)",
                view.method,
                view.path,
                query_suffix(view.query)
            ),
        )),
        _ => {}
    }
    // Path spelling: both are accepted; note the less common one (docs/protocol.md §1.1).
    let spelling = match (view.endpoint, view.path) {
        (WIRESERVER_GOALSTATE, "/machine") => Some(
            "goal state requested as /machine?comp=goalstate (no slash; linuxkit style); cloud-init, afterburn and WALA use /machine/?comp=goalstate",
        ),
        (WIRESERVER_GOALSTATE, "/") => {
            Some("goal state requested as /?comp=goalstate; agents use /machine/?comp=goalstate")
        }
        (WIRESERVER_HEALTH_XML, "/machine/") => Some(
            "health posted to /machine/?comp=health (afterburn, azure-init <= Aug 2025 style); cloud-init, WALA and linuxkit use /machine?comp=health",
        ),
        (WIRESERVER_HEALTH_XML, "/") => {
            Some("health posted to /?comp=health; agents use /machine?comp=health")
        }
        (WIRESERVER_VERSIONS, p) if p != "/" => {
            Some("versions requested on /machine; agents use /?comp=versions")
        }
        _ => None,
    };
    if let Some(message) = spelling {
        out.push(Finding::info("path.spelling", message));
    }
}

fn content_type(view: &RequestView, expected: &[&str], out: &mut Vec<Finding>) {
    if view.method != "POST" {
        return;
    }
    match view.header("content-type") {
        None => out.push(Finding::warning(
            "header.missing.content-type",
            format!(
                "{}: no Content-Type; expected {}",
                view.endpoint,
                expected.join(" or ")
            ),
        )),
        Some(v) => {
            // `text/xml; charset=utf-8` and `text/xml;charset=utf-8` are both fine (§2).
            let media = v
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if !expected.iter().any(|e| *e == media) {
                out.push(Finding::warning(
                    "header.unusual.content-type",
                    format!(
                        "{}: Content-Type is {v:?}, expected {}",
                        view.endpoint,
                        expected.join(" or ")
                    ),
                ));
            }
        }
    }
}

fn imds(view: &RequestView, out: &mut Vec<Finding>) {
    match imds_refusal(view) {
        Some(ImdsRefusal::ForwardedFor) => out.push(Finding::error(
            "header.forbidden.x-forwarded-for",
            "IMDS refuses requests with X-Forwarded-For (answered 400)",
        )),
        Some(ImdsRefusal::MetadataHeader) => match view.header("metadata") {
            None => out.push(Finding::error(
                "header.missing.metadata",
                "IMDS request without `Metadata: true` (answered 400)",
            )),
            Some(v) => out.push(Finding::error(
                "header.unusual.metadata",
                format!("IMDS request with Metadata: {v:?}; expected \"true\" (answered 400)"),
            )),
        },
        Some(ImdsRefusal::DuplicateQuery(k)) => out.push(Finding::error(
            "query.duplicate",
            format!("query parameter {k:?} given more than once (answered 400)"),
        )),
        Some(ImdsRefusal::ApiVersionMissing) => out.push(Finding::error(
            "query.missing.api-version",
            "IMDS request without api-version (answered 400)",
        )),
        Some(ImdsRefusal::ApiVersionUnsupported(v)) => out.push(Finding::error(
            "query.unsupported.api-version",
            format!("api-version {v:?} is not one the platform supports (answered 400)"),
        )),
        None => {}
    }
    if view.endpoint != IMDS_UNKNOWN {
        expect_method(view, "GET", out);
    }
    if view.header("x-ms-version").is_some() || view.header("x-ms-agent-name").is_some() {
        out.push(Finding::info(
            "header.unexpected.x-ms",
            "wireserver x-ms-* headers sent to IMDS (afterburn does this; harmless)",
        ));
    }
    if view.endpoint == IMDS_UNKNOWN {
        out.push(Finding::warning(
            "path.unknown",
            format!(
                "{} {}{}: not an IMDS endpoint the fake serves (answered 404)",
                view.method,
                view.path,
                query_suffix(view.query)
            ),
        ));
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
