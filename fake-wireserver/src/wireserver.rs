//! The wireserver's default answers, as an axum router (docs/protocol.md §1.1, §3, §4.3, §5).
//!
//! `/`, `/machine` and `/machine/` are treated alike and dispatched on `comp`. Documents come
//! from the request's context (ids in effect, base URL from the Host the agent used).

use axum::Router;
use axum::extract::{Extension, RawQuery};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

use crate::context::RequestCtx;
use crate::documents::{SERVER_HEADER, XML_CONTENT_TYPE};
use crate::endpoint::{self, EndpointId, Service};

/// The wireserver's default answers as an axum router (no sockets needed).
pub fn router() -> Router {
    Router::new()
        .route("/", any(by_comp))
        .route("/machine", any(by_comp))
        .route("/machine/", any(by_comp))
        .route("/machine/{container}/{role}", any(by_comp))
        .route("/provisioning/health", any(health_json))
        // /HealthService, /metadata/... (WALA) and anything else: classified like the rest.
        .fallback(by_comp)
}

/// A wireserver answer: IIS in front, XML when there is a body.
pub(crate) fn reply(status: StatusCode, body: impl Into<String>) -> Response {
    let body = body.into();
    let mut res = (status, body.clone()).into_response();
    let headers = res.headers_mut();
    headers.insert(header::SERVER, HeaderValue::from_static(SERVER_HEADER));
    if body.is_empty() {
        headers.remove(header::CONTENT_TYPE);
    } else {
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(XML_CONTENT_TYPE),
        );
    }
    res
}

fn method_not_allowed(allow: &'static str) -> Response {
    let mut res = reply(StatusCode::METHOD_NOT_ALLOWED, "");
    res.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    res
}

async fn by_comp(
    Extension(ctx): Extension<RequestCtx>,
    method: Method,
    uri: Uri,
    RawQuery(query): RawQuery,
) -> Response {
    let query = endpoint::decode_query(query.as_deref());
    let id = endpoint::classify(Service::Wireserver, uri.path(), &query);
    let get = |body: String| {
        if method == Method::GET {
            reply(StatusCode::OK, body)
        } else {
            method_not_allowed("GET")
        }
    };
    match id {
        EndpointId::WireserverVersions => get(crate::documents::VERSIONS_XML.to_owned()),
        EndpointId::WireserverGoalstate => {
            get(ctx.documents.goalstate_xml(&ctx.ids, &ctx.base_url))
        }
        EndpointId::WireserverCertificates => get(ctx.documents.certificates_xml(&ctx.ids)),
        EndpointId::WireserverConfig => {
            let kind = query
                .iter()
                .find(|(k, _)| k == "type")
                .map(|(_, v)| v.as_ref());
            match kind {
                Some(t)
                    if t.eq_ignore_ascii_case("sharedConfig") && ctx.documents.shared_config =>
                {
                    get(ctx.documents.shared_config_xml(&ctx.ids))
                }
                _ => reply(StatusCode::NOT_FOUND, ""),
            }
        }
        // Served when the goal state lists them (a scenario can leave each out).
        EndpointId::WireserverConfigHosting if ctx.documents.hosting_environment_config => {
            get(ctx.documents.hosting_environment_config_xml(&ctx.ids))
        }
        EndpointId::WireserverConfigExtensions if ctx.documents.extensions_config => {
            get(ctx.documents.extensions_config_xml(&ctx.ids))
        }
        // The platform accepts health reports with 200 and no body; no client reads it.
        // WALA's /HealthService posts are answered alike.
        EndpointId::WireserverHealthXml
        | EndpointId::WireserverTelemetry
        | EndpointId::WireserverHealthService => {
            if method == Method::POST {
                reply(StatusCode::OK, "")
            } else {
                method_not_allowed("POST")
            }
        }
        // WALA accepts nothing but 202 here (docs/protocol.md §1.1).
        EndpointId::WireserverRoleProperties => {
            if method == Method::POST {
                reply(StatusCode::ACCEPTED, "")
            } else {
                method_not_allowed("POST")
            }
        }
        // WALA's IMDS fallback: the platform's wireserver does not serve IMDS documents.
        _ => reply(StatusCode::NOT_FOUND, ""),
    }
}

/// azure-init's endpoint: 201 on success (azure-init issue #186).
async fn health_json(method: Method) -> Response {
    if method == Method::POST {
        reply(StatusCode::CREATED, "")
    } else {
        method_not_allowed("POST")
    }
}
