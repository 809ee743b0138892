//! Endpoint ids and request classification: which endpoint a request is for, decided from the
//! service it reached (wireserver or IMDS), the path and the `comp` query value. The same ids
//! key scenario plans, journal entries and conformance checks (docs/fake-wireserver.md,
//! "Endpoint ids").

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// Declares the endpoint ids from one row each (variant, id string, service): the enum,
/// [`EndpointId::ALL`], [`ENDPOINT_IDS`], [`EndpointId::as_str`] and [`EndpointId::service`]
/// are generated from the rows, so an endpoint is added in one place.
macro_rules! endpoints {
    (
        $(#[$meta:meta])*
        pub enum EndpointId {
            $($(#[doc = $doc:literal])* $variant:ident = $id:literal, $service:expr;)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EndpointId {
            $($(#[doc = $doc])* $variant,)+
        }

        /// Every endpoint id the fake classifies requests into, as strings.
        pub const ENDPOINT_IDS: &[&str] = &[$($id),+];

        impl EndpointId {
            /// Every endpoint id, in the order of the rows (= [`ENDPOINT_IDS`], and
            /// docs/fake-wireserver.md's table).
            pub const ALL: [EndpointId; [$($id),+].len()] = [$(EndpointId::$variant),+];

            /// The id as the journal, scenario files and checks spell it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EndpointId::$variant => $id,)+
                }
            }

            /// The service the request reached (`None` for [`EndpointId::ProxyUnknownHost`]: the
            /// proxy answered it itself). A request through the proxy still has its service's id.
            pub const fn service(self) -> Option<Service> {
                match self {
                    $(EndpointId::$variant => $service,)+
                }
            }
        }
    };
}

endpoints! {
    /// An endpoint id, typed: what the Rust API takes where a scenario file writes a string. It
    /// serializes (serde, [`Display`](fmt::Display), [`EndpointId::as_str`]) as exactly the id
    /// string, and [`FromStr`](std::str::FromStr) refuses an unknown id with the list of valid ones.
    ///
    /// ```
    /// use fake_wireserver::EndpointId;
    /// assert_eq!(EndpointId::WireserverGoalstate.as_str(), "wireserver.goalstate");
    /// assert_eq!("imds.instance".parse::<EndpointId>(), Ok(EndpointId::ImdsInstance));
    /// let err = "wireserver.goalstat".parse::<EndpointId>().unwrap_err();
    /// assert!(err.to_string().contains("expected one of wireserver.versions, wireserver.goalstate"));
    /// ```
    pub enum EndpointId {
        /// `GET /?comp=versions`.
        WireserverVersions = "wireserver.versions", Some(Service::Wireserver);
        /// The goal state (`/machine/?comp=goalstate`).
        WireserverGoalstate = "wireserver.goalstate", Some(Service::Wireserver);
        /// Config URLs named in the goal state (`sharedConfig`, unknown types).
        WireserverConfig = "wireserver.config", Some(Service::Wireserver);
        /// `comp=config&type=hostingEnvironmentConfig`.
        WireserverConfigHosting = "wireserver.config.hosting", Some(Service::Wireserver);
        /// `comp=config&type=extensionsConfig`.
        WireserverConfigExtensions = "wireserver.config.extensions", Some(Service::Wireserver);
        /// `comp=certificates`.
        WireserverCertificates = "wireserver.certificates", Some(Service::Wireserver);
        /// XML health reports (`POST /machine?comp=health`).
        WireserverHealthXml = "wireserver.health.xml", Some(Service::Wireserver);
        /// JSON health reports (`POST /provisioning/health`).
        WireserverHealthJson = "wireserver.health.json", Some(Service::Wireserver);
        /// `POST /machine?comp=telemetrydata`.
        WireserverTelemetry = "wireserver.telemetry", Some(Service::Wireserver);
        /// `POST /machine?comp=roleProperties`.
        WireserverRoleProperties = "wireserver.roleproperties", Some(Service::Wireserver);
        /// `POST /HealthService` (WALA's JSON health events).
        WireserverHealthService = "wireserver.healthservice", Some(Service::Wireserver);
        /// `/metadata/...` sent to the wireserver (WALA's IMDS fallback).
        WireserverMetadata = "wireserver.metadata", Some(Service::Wireserver);
        /// Anything else sent to the wireserver.
        WireserverUnknown = "wireserver.unknown", Some(Service::Wireserver);
        /// HostGAPlugin `GET /vmSettings`.
        HostpluginVmsettings = "hostplugin.vmsettings", Some(Service::HostPlugin);
        /// HostGAPlugin `GET /versions`.
        HostpluginVersions = "hostplugin.versions", Some(Service::HostPlugin);
        /// HostGAPlugin `GET /health`.
        HostpluginHealth = "hostplugin.health", Some(Service::HostPlugin);
        /// HostGAPlugin `PUT /status`.
        HostpluginStatus = "hostplugin.status", Some(Service::HostPlugin);
        /// Anything else sent to the HostGAPlugin.
        HostpluginUnknown = "hostplugin.unknown", Some(Service::HostPlugin);
        /// `/metadata/instance` and every leaf below it.
        ImdsInstance = "imds.instance", Some(Service::Imds);
        /// `/metadata/versions`.
        ImdsVersions = "imds.versions", Some(Service::Imds);
        /// `/metadata/reprovisiondata`.
        ImdsReprovisiondata = "imds.reprovisiondata", Some(Service::Imds);
        /// Anything else sent to IMDS.
        ImdsUnknown = "imds.unknown", Some(Service::Imds);
        /// Proxy mode: a target host that is neither service (502).
        ProxyUnknownHost = "proxy.unknown-host", None;
    }
}

impl EndpointId {
    /// A wireserver endpoint (`wireserver.*`).
    pub const fn is_wireserver(self) -> bool {
        matches!(self.service(), Some(Service::Wireserver))
    }

    /// An IMDS endpoint (`imds.*`).
    pub const fn is_imds(self) -> bool {
        matches!(self.service(), Some(Service::Imds))
    }

    /// A HostGAPlugin endpoint (`hostplugin.*`).
    pub const fn is_hostplugin(self) -> bool {
        matches!(self.service(), Some(Service::HostPlugin))
    }

    /// One of the two health report endpoints (`wireserver.health.xml`, `wireserver.health.json`).
    pub const fn is_health(self) -> bool {
        matches!(
            self,
            EndpointId::WireserverHealthXml | EndpointId::WireserverHealthJson
        )
    }

    /// A request the fake could not place: `*.unknown` of a service, or the proxy's unknown host.
    pub const fn is_unknown(self) -> bool {
        matches!(
            self,
            EndpointId::WireserverUnknown
                | EndpointId::HostpluginUnknown
                | EndpointId::ImdsUnknown
                | EndpointId::ProxyUnknownHost
        )
    }

    /// The `*.unknown` id of a service: what a request the service cannot place is journaled as.
    pub const fn unknown_of(service: Service) -> EndpointId {
        match service {
            Service::Wireserver => EndpointId::WireserverUnknown,
            Service::Imds => EndpointId::ImdsUnknown,
            Service::HostPlugin => EndpointId::HostpluginUnknown,
        }
    }
}

impl fmt::Display for EndpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for EndpointId {
    type Err = UnknownEndpoint;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EndpointId::ALL
            .into_iter()
            .find(|id| id.as_str() == s)
            .ok_or_else(|| UnknownEndpoint::new(s))
    }
}

impl Serialize for EndpointId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for EndpointId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// An endpoint id or glob that matches no endpoint id (a typo). The message lists the valid
/// ids, like the scenario file's error for the same mistake.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{:?} matches no endpoint id; expected one of {}", crate::text::clip(.pattern, 64), ENDPOINT_IDS.join(", "))]
pub struct UnknownEndpoint {
    /// The id or glob as given.
    pub pattern: String,
}

impl UnknownEndpoint {
    fn new(pattern: &str) -> Self {
        UnknownEndpoint {
            pattern: pattern.to_owned(),
        }
    }
}

/// What the Rust API accepts where it needs an endpoint id or glob: an [`EndpointId`] (always
/// valid), or a string (`"wireserver.*"`), checked to match at least one endpoint id.
pub trait IntoEndpointPattern {
    /// The pattern as a string, or the error naming the valid ids.
    fn into_endpoint_pattern(self) -> Result<String, UnknownEndpoint>;
}

impl IntoEndpointPattern for EndpointId {
    fn into_endpoint_pattern(self) -> Result<String, UnknownEndpoint> {
        Ok(self.as_str().to_owned())
    }
}

impl IntoEndpointPattern for &str {
    fn into_endpoint_pattern(self) -> Result<String, UnknownEndpoint> {
        if pattern_matches_any(self) {
            Ok(self.to_owned())
        } else {
            Err(UnknownEndpoint::new(self))
        }
    }
}

impl IntoEndpointPattern for String {
    fn into_endpoint_pattern(self) -> Result<String, UnknownEndpoint> {
        self.as_str().into_endpoint_pattern()
    }
}

impl IntoEndpointPattern for &String {
    fn into_endpoint_pattern(self) -> Result<String, UnknownEndpoint> {
        self.as_str().into_endpoint_pattern()
    }
}

/// The address agents use for the wireserver (never contacted by the fake itself).
pub const WIRESERVER_HOST: &str = "168.63.129.16";
/// The HostGAPlugin's port on the wireserver address (docs/protocol.md §1.1).
pub const HOSTPLUGIN_PORT: u16 = 32526;
/// The address agents use for IMDS (never contacted by the fake itself).
pub const IMDS_HOST: &str = "169.254.169.254";

/// The services the fake impersonates ([`EndpointId::service`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// `168.63.129.16:80`.
    Wireserver,
    /// `169.254.169.254:80`.
    Imds,
    /// The HostGAPlugin (port 32526 of the wireserver address; WALA only).
    HostPlugin,
}

/// A request target split into its parts. `authority` is set for absolute-form targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TargetParts<'a> {
    pub(crate) authority: Option<&'a str>,
    pub(crate) path: &'a str,
    pub(crate) query: Option<&'a str>,
}

/// Splits origin-form (`/machine?comp=health`) and absolute-form
/// (`http://168.63.129.16/machine?comp=health`) targets. The scheme is matched without regard
/// to case (RFC 3986 §3.1): `Http://10.0.0.1/...` names the host 10.0.0.1, never a path of
/// whatever the Host header says.
pub(crate) fn split_target(target: &str) -> TargetParts<'_> {
    let (authority, rest) =
        match strip_scheme(target, "http://").or_else(|| strip_scheme(target, "https://")) {
            Some(after) => {
                let end = after.find(['/', '?']).unwrap_or(after.len());
                (Some(&after[..end]), &after[end..])
            }
            None => (None, target),
        };
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    // "http://host?x" has an empty path, which means "/".
    let path = if path.is_empty() { "/" } else { path };
    TargetParts {
        authority,
        path,
        query,
    }
}

/// `target` after `scheme` (lowercase, with `://`), matched in any case.
fn strip_scheme<'a>(target: &'a str, scheme: &str) -> Option<&'a str> {
    let head = target.get(..scheme.len())?;
    head.eq_ignore_ascii_case(scheme)
        .then(|| &target[scheme.len()..])
}

/// The host part of an authority or Host header value (`168.63.129.16:80` → `168.63.129.16`).
pub fn host_of(authority: &str) -> &str {
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.split(':').next().unwrap_or(authority)
}

/// The port of an authority or Host header value, when it names one (`h:32526` → 32526).
pub fn port_of(authority: &str) -> Option<u16> {
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let rest = match authority.strip_prefix('[') {
        Some(rest) => rest.split_once(']')?.1,
        None => authority,
    };
    rest.rsplit_once(':')?.1.parse().ok()
}

/// One decoded query parameter, borrowed where nothing needed decoding.
pub(crate) type QueryPair<'a> = (Cow<'a, str>, Cow<'a, str>);

/// Decoded query pairs in order, duplicates kept.
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    decode_query(query)
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Decoded query pairs borrowing from the query where nothing needed decoding (the connection
/// loop's per-request parse: no allocation per pair in the common case).
pub(crate) fn decode_query(query: Option<&str>) -> Vec<QueryPair<'_>> {
    match query {
        Some(q) => form_urlencoded::parse(q.as_bytes()).collect(),
        None => Vec::new(),
    }
}

/// Longest endpoint id or glob a scenario may give (the longest id is under 40 characters).
pub const MAX_PATTERN_LEN: usize = 256;
/// Most wildcards (`*`, `?`) in one endpoint glob. Globs compile to regexes whose size grows
/// with the pattern: 200,000 `*` made globset panic. Matching is linear time either way.
pub const MAX_PATTERN_WILDCARDS: usize = 32;

/// Compiles a pattern already checked by [`is_valid_pattern`]; `None` otherwise. A set of one,
/// because `GlobSetBuilder::build` reports a regex it cannot build where `compile_matcher`
/// panics.
fn glob(pattern: &str) -> Option<GlobSet> {
    if !within_bounds(pattern) {
        return None;
    }
    let glob = GlobBuilder::new(pattern)
        .literal_separator(false)
        .build()
        .ok()?;
    GlobSetBuilder::new().add(glob).build().ok()
}

fn within_bounds(pattern: &str) -> bool {
    pattern.len() <= MAX_PATTERN_LEN
        && pattern.chars().filter(|c| matches!(c, '*' | '?')).count() <= MAX_PATTERN_WILDCARDS
}

/// True when `pattern` only uses the characters allowed in ids and globs, and stays within
/// [`MAX_PATTERN_LEN`] and [`MAX_PATTERN_WILDCARDS`].
pub fn is_valid_pattern(pattern: &str) -> bool {
    !pattern.is_empty()
        && pattern
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '*' | '?'))
        && glob(pattern).is_some()
}

/// True when `pattern` (an id or glob) matches `id`.
pub fn pattern_matches(pattern: &str, id: &str) -> bool {
    if pattern == id {
        return true;
    }
    is_valid_pattern(pattern) && glob(pattern).is_some_and(|g| g.is_match(id))
}

/// True when `pattern` matches at least one known endpoint id.
pub fn pattern_matches_any(pattern: &str) -> bool {
    is_valid_pattern(pattern) && ENDPOINT_IDS.iter().any(|id| pattern_matches(pattern, id))
}

/// A compiled set of patterns, for matching at request time.
#[derive(Debug, Clone)]
pub(crate) struct Patterns(Vec<GlobSet>);

impl Patterns {
    pub(crate) fn new<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Self {
        Patterns(patterns.into_iter().filter_map(glob).collect())
    }
    pub(crate) fn matches(&self, id: &str) -> bool {
        self.0.iter().any(|g| g.is_match(id))
    }
}

/// Wireserver `comp` values the fake knows.
fn wireserver_comp(comp: &str) -> Option<EndpointId> {
    match comp {
        "versions" => Some(EndpointId::WireserverVersions),
        "goalstate" => Some(EndpointId::WireserverGoalstate),
        "health" => Some(EndpointId::WireserverHealthXml),
        "telemetrydata" => Some(EndpointId::WireserverTelemetry),
        "config" => Some(EndpointId::WireserverConfig),
        "roleProperties" | "roleproperties" => Some(EndpointId::WireserverRoleProperties),
        "certificates" => Some(EndpointId::WireserverCertificates),
        _ => None,
    }
}

/// The endpoint id of a request that reached `service`.
pub(crate) fn classify(service: Service, path: &str, query: &[QueryPair]) -> EndpointId {
    let comp = query
        .iter()
        .find(|(k, _)| k == "comp")
        .map(|(_, v)| v.as_ref());
    match service {
        Service::Wireserver => {
            if path == "/provisioning/health" {
                return EndpointId::WireserverHealthJson;
            }
            // WALA's health service and its IMDS fallback (docs/protocol.md §1.1, §9.1).
            if path == "/HealthService" {
                return EndpointId::WireserverHealthService;
            }
            if path == "/metadata" || path.starts_with("/metadata/") {
                return EndpointId::WireserverMetadata;
            }
            let comp_id = match comp.and_then(wireserver_comp) {
                Some(EndpointId::WireserverConfig) => Some(config_id(query)),
                other => other,
            };
            match path {
                // The routing rule (docs/protocol.md §1.1): `/`, `/machine`, `/machine/` alike.
                "/" | "/machine" | "/machine/" => comp_id.unwrap_or(EndpointId::WireserverUnknown),
                // Config and certificate URLs named in the goal state: /machine/{container}/{role}.
                p if p.starts_with("/machine/") => match comp_id {
                    Some(
                        id @ (EndpointId::WireserverConfig
                        | EndpointId::WireserverConfigHosting
                        | EndpointId::WireserverConfigExtensions
                        | EndpointId::WireserverCertificates),
                    ) => id,
                    _ => EndpointId::WireserverUnknown,
                },
                _ => EndpointId::WireserverUnknown,
            }
        }
        Service::Imds => match path.trim_end_matches('/') {
            "/metadata/instance" => EndpointId::ImdsInstance,
            p if p.starts_with("/metadata/instance/") => EndpointId::ImdsInstance,
            "/metadata/versions" => EndpointId::ImdsVersions,
            "/metadata/reprovisiondata" => EndpointId::ImdsReprovisiondata,
            _ => EndpointId::ImdsUnknown,
        },
        Service::HostPlugin => match path {
            "/vmSettings" => EndpointId::HostpluginVmsettings,
            "/versions" => EndpointId::HostpluginVersions,
            "/health" => EndpointId::HostpluginHealth,
            "/status" => EndpointId::HostpluginStatus,
            _ => EndpointId::HostpluginUnknown,
        },
    }
}

/// Which config document a `comp=config` request names: `type=hostingEnvironmentConfig` and
/// `type=extensionsConfig` have ids of their own (so a scenario can break each);
/// `sharedConfig` and any other type stay `wireserver.config`.
fn config_id(query: &[QueryPair]) -> EndpointId {
    let kind = query
        .iter()
        .find(|(k, _)| k == "type")
        .map(|(_, v)| v.as_ref());
    match kind {
        Some(t) if t.eq_ignore_ascii_case("hostingEnvironmentConfig") => {
            EndpointId::WireserverConfigHosting
        }
        Some(t) if t.eq_ignore_ascii_case("extensionsConfig") => {
            EndpointId::WireserverConfigExtensions
        }
        _ => EndpointId::WireserverConfig,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Vec<QueryPair<'_>> {
        decode_query(Some(s))
    }

    #[test]
    fn splits_both_target_forms() {
        let t = split_target("http://168.63.129.16/machine/?comp=goalstate");
        assert_eq!(t.authority, Some("168.63.129.16"));
        assert_eq!(t.path, "/machine/");
        assert_eq!(t.query, Some("comp=goalstate"));
        for mixed in [
            "Http://10.0.0.1/machine",
            "hTTpS://10.0.0.1/machine",
            "HTTP://10.0.0.1/machine",
        ] {
            let t = split_target(mixed);
            assert_eq!(
                (t.authority, t.path),
                (Some("10.0.0.1"), "/machine"),
                "{mixed}"
            );
        }
        // Too short for a scheme, or multi-byte where one would be: origin-form, no panic.
        assert_eq!(split_target("http:/").authority, None);
        assert_eq!(split_target("htt\u{e9}p://x/").authority, None);
        let t = split_target("http://169.254.169.254:80?x=1");
        assert_eq!((t.authority, t.path), (Some("169.254.169.254:80"), "/"));
        let t = split_target("/?comp=versions");
        assert_eq!(
            (t.authority, t.path, t.query),
            (None, "/", Some("comp=versions"))
        );
        assert_eq!(host_of("168.63.129.16:80"), "168.63.129.16");
        assert_eq!(host_of("[::1]:80"), "::1");
        assert_eq!(port_of("168.63.129.16:32526"), Some(32526));
        assert_eq!(port_of("168.63.129.16"), None);
        assert_eq!(port_of("[::1]:80"), Some(80));
    }

    #[test]
    fn classifies_wireserver_paths_alike() {
        for path in ["/", "/machine", "/machine/"] {
            assert_eq!(
                classify(Service::Wireserver, path, &q("comp=goalstate")),
                EndpointId::WireserverGoalstate
            );
            assert_eq!(
                classify(Service::Wireserver, path, &q("comp=health")),
                EndpointId::WireserverHealthXml
            );
        }
        assert_eq!(
            classify(
                Service::Wireserver,
                "/machine/c/vm",
                &q("comp=config&type=sharedConfig")
            ),
            EndpointId::WireserverConfig
        );
        assert_eq!(
            classify(Service::Wireserver, "/provisioning/health", &[]),
            EndpointId::WireserverHealthJson
        );
        assert_eq!(
            classify(Service::Wireserver, "/nope", &[]),
            EndpointId::WireserverUnknown
        );
        assert_eq!(
            classify(Service::Wireserver, "/machine/x", &q("comp=health")),
            EndpointId::WireserverUnknown
        );
        assert_eq!(
            classify(Service::Imds, "/metadata/instance/compute/name", &[]),
            EndpointId::ImdsInstance
        );
        assert_eq!(
            classify(Service::Imds, "/metadata/instance/", &[]),
            EndpointId::ImdsInstance
        );
        assert_eq!(
            classify(Service::Imds, "/metadata/identity", &[]),
            EndpointId::ImdsUnknown
        );
    }

    #[test]
    fn classifies_wala_endpoints() {
        let ws = |path, query| classify(Service::Wireserver, path, &q(query));
        assert_eq!(
            ws(
                "/machine/c/r",
                "comp=config&type=hostingEnvironmentConfig&incarnation=1"
            ),
            EndpointId::WireserverConfigHosting
        );
        assert_eq!(
            ws(
                "/machine/c/r",
                "comp=config&type=extensionsConfig&incarnation=1"
            ),
            EndpointId::WireserverConfigExtensions
        );
        assert_eq!(
            ws(
                "/machine/c/r",
                "comp=config&type=sharedConfig&incarnation=1"
            ),
            EndpointId::WireserverConfig
        );
        assert_eq!(
            ws("/machine", "comp=roleProperties"),
            EndpointId::WireserverRoleProperties
        );
        assert_eq!(
            ws("/machine", "comp=telemetrydata"),
            EndpointId::WireserverTelemetry
        );
        assert_eq!(
            ws("/HealthService", ""),
            EndpointId::WireserverHealthService
        );
        assert_eq!(
            ws("/metadata/instance/compute", "api-version=2018-02-01"),
            EndpointId::WireserverMetadata
        );
        assert_eq!(ws("/metadataX", ""), EndpointId::WireserverUnknown);
        let hp = |path| classify(Service::HostPlugin, path, &[]);
        assert_eq!(hp("/vmSettings"), EndpointId::HostpluginVmsettings);
        assert_eq!(hp("/versions"), EndpointId::HostpluginVersions);
        assert_eq!(hp("/health"), EndpointId::HostpluginHealth);
        assert_eq!(hp("/status"), EndpointId::HostpluginStatus);
        assert_eq!(hp("/extensionArtifact"), EndpointId::HostpluginUnknown);
        // A glob covers every config document.
        assert!(pattern_matches(
            "wireserver.config*",
            EndpointId::WireserverConfigHosting.as_str()
        ));
        assert!(pattern_matches(
            "hostplugin.*",
            EndpointId::HostpluginStatus.as_str()
        ));
    }

    #[test]
    fn the_documented_table_lists_every_id_in_order() {
        // docs/fake-wireserver.md's "Endpoint ids" table is what scenario authors read: each
        // row's first cell names the ids it covers (`a`, `b`), in the rows' order.
        let page = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/fake-wireserver.md"),
        )
        .unwrap();
        let table = page
            .split("### Endpoint ids")
            .nth(1)
            .expect("docs/fake-wireserver.md has an \"Endpoint ids\" section");
        let documented: Vec<&str> = table
            .lines()
            .skip_while(|l| !l.starts_with("| id |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .flat_map(|row| row.split('|').nth(1).unwrap_or("").split('`'))
            .filter(|cell| cell.contains('.'))
            .collect();
        assert_eq!(documented, ENDPOINT_IDS);
    }

    #[test]
    fn typed_questions_agree_with_the_id_strings() {
        for id in EndpointId::ALL {
            let s = id.as_str();
            assert_eq!(id.is_wireserver(), s.starts_with("wireserver."), "{s}");
            assert_eq!(id.is_imds(), s.starts_with("imds."), "{s}");
            assert_eq!(id.is_hostplugin(), s.starts_with("hostplugin."), "{s}");
            assert_eq!(id.service().is_none(), s.starts_with("proxy."), "{s}");
            assert_eq!(
                id.is_unknown(),
                s.ends_with(".unknown") || s == "proxy.unknown-host",
                "{s}"
            );
            assert_eq!(id.is_health(), s.starts_with("wireserver.health."), "{s}");
            assert_eq!(s.parse::<EndpointId>(), Ok(id));
            if let Some(service) = id.service() {
                assert_eq!(EndpointId::unknown_of(service).service(), Some(service));
                assert!(EndpointId::unknown_of(service).is_unknown());
            }
        }
        assert_eq!(ENDPOINT_IDS, EndpointId::ALL.map(EndpointId::as_str));
    }

    #[test]
    fn globs_match_ids() {
        assert!(pattern_matches(
            "wireserver.*",
            EndpointId::WireserverHealthJson.as_str()
        ));
        assert!(pattern_matches(
            "wireserver.health.*",
            EndpointId::WireserverHealthXml.as_str()
        ));
        assert!(!pattern_matches(
            "imds.*",
            EndpointId::WireserverHealthXml.as_str()
        ));
        assert!(pattern_matches_any("*"));
        assert!(!pattern_matches_any("wireserver.nothing"));
        assert!(!is_valid_pattern("wire server"));
    }
}
