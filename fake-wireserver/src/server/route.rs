//! The first steps of an exchange: which service a request is for (by listener, or by target
//! authority / Host in proxy mode), its endpoint id, and what the request itself gets wrong.

use crate::endpoint::{self, EndpointId, QueryPair, Service, TargetParts};
use crate::http1::Request;
use crate::inspect::{self, RequestId, RequestView};
use crate::oracle::Finding;

use crate::journal::Listener;

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    Service(Service),
    /// Proxy mode, a host that is neither service.
    UnknownHost,
}

/// A routed request: where it goes and what routing found.
pub(super) struct Routed {
    pub route: Route,
    /// Sent to `/__admin...` on an agent's listener (the admin API has its own listener).
    pub admin_path: bool,
    pub findings: Vec<Finding>,
}

impl Routed {
    /// The service that answers (`None`: the proxy's 502 for an unknown host).
    pub fn service(&self) -> Option<Service> {
        match self.route {
            Route::Service(s) => Some(s),
            Route::UnknownHost => None,
        }
    }

    /// Whether the scenario decides the answer (not for admin paths or unknown proxy hosts).
    pub fn scripted(&self) -> bool {
        !self.admin_path && self.route != Route::UnknownHost
    }

    /// The endpoint id the journal, the scenario plans and the checks key on.
    pub fn endpoint(&self, path: &str, query: &[QueryPair<'_>]) -> EndpointId {
        match self.route {
            Route::Service(service) if self.admin_path => EndpointId::unknown_of(service),
            Route::Service(service) => endpoint::classify(service, path, query),
            Route::UnknownHost => EndpointId::ProxyUnknownHost,
        }
    }
}

/// Routes `req`, received on a `kind` listener.
pub(super) fn route(kind: Listener, req: &Request, target: &TargetParts<'_>) -> Routed {
    let mut findings = Vec::new();
    let host_header = req.header("host");
    let route = match kind {
        Listener::Wireserver => Route::Service(Service::Wireserver),
        Listener::Imds => Route::Service(Service::Imds),
        Listener::HostPlugin => Route::Service(Service::HostPlugin),
        Listener::Proxy if req.method.eq_ignore_ascii_case("CONNECT") => {
            findings.push(RequestId::ProxyConnect.error(format!(
                "CONNECT {} through the proxy: tunnels are not served (answered 502)",
                req.target
            )));
            Route::UnknownHost
        }
        Listener::Proxy => {
            let authority = target.authority.or(host_header);
            match authority.map(endpoint::host_of) {
                // The HostGAPlugin is the wireserver address on port 32526.
                Some(endpoint::WIRESERVER_HOST)
                    if authority.and_then(endpoint::port_of) == Some(endpoint::HOSTPLUGIN_PORT) =>
                {
                    Route::Service(Service::HostPlugin)
                }
                Some(endpoint::WIRESERVER_HOST) => Route::Service(Service::Wireserver),
                Some(endpoint::IMDS_HOST) => Route::Service(Service::Imds),
                other => {
                    let host = other.unwrap_or("").to_owned();
                    findings.push(RequestId::ProxyUnknownHost.error(
                        format!(
                            "proxy request for host {host:?}: neither the wireserver ({}) nor IMDS ({}) (answered 502)",
                            endpoint::WIRESERVER_HOST,
                            endpoint::IMDS_HOST
                        ),
                    ));
                    Route::UnknownHost
                }
            }
        }
    };
    Routed {
        route,
        admin_path: target.path.starts_with("/__admin"),
        findings,
    }
}

/// What the request gets wrong for its endpoint (headers, query, method, path spelling).
pub(super) fn inspect(
    routed: &Routed,
    kind: Listener,
    endpoint_id: EndpointId,
    req: &Request,
    target: &TargetParts<'_>,
    query: &[QueryPair<'_>],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    if routed.admin_path {
        findings.push(RequestId::PathAdminOnAgentListener.warning(
            format!(
                "{} reached the {} listener; the admin API lives on its own loopback listener (answered 404)",
                target.path,
                kind.as_str()
            ),
        ));
        return findings;
    }
    let Route::Service(service) = routed.route else {
        return findings;
    };
    findings.extend(inspect::findings(&RequestView {
        service,
        endpoint: endpoint_id,
        method: &req.method,
        path: target.path,
        query,
        headers: &req.headers,
        http_version: req.http_version,
    }));
    findings
}
