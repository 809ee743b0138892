//! The HostGAPlugin's default answers (port 32526 of the wireserver address, API `2015-09-01`;
//! docs/protocol.md §1.1, §9.1). Only WALinuxAgent calls it: `GET /vmSettings` once during protocol
//! detection (404 = a platform without Fast Track), and after provisioning `GET /versions`,
//! `GET /health` and `PUT /status`.

use axum::Router;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

use crate::documents::{HOSTPLUGIN_VERSIONS_JSON, JSON_CONTENT_TYPE};
use crate::endpoint::{self, EndpointId, Service};

/// The HostGAPlugin's default answers as an axum router (no sockets needed).
pub fn router() -> Router {
    Router::new().fallback(any(answer))
}

fn reply(status: StatusCode, body: &'static str) -> Response {
    let mut res = (status, body).into_response();
    if body.is_empty() {
        res.headers_mut().remove(header::CONTENT_TYPE);
    } else {
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(JSON_CONTENT_TYPE),
        );
    }
    res
}

fn only(method: &Method, allowed: Method, ok: Response) -> Response {
    if *method == allowed {
        ok
    } else {
        let mut res = reply(StatusCode::METHOD_NOT_ALLOWED, "");
        if let Ok(v) = HeaderValue::from_str(allowed.as_str()) {
            res.headers_mut().insert(header::ALLOW, v);
        }
        res
    }
}

async fn answer(method: Method, uri: Uri) -> Response {
    match endpoint::classify(Service::HostPlugin, uri.path(), &[]) {
        // Fast Track off: "vmSettings is not supported" (WALA asks again after 6 h).
        EndpointId::HostpluginVmsettings => {
            only(&method, Method::GET, reply(StatusCode::NOT_FOUND, ""))
        }
        EndpointId::HostpluginVersions => only(
            &method,
            Method::GET,
            reply(StatusCode::OK, HOSTPLUGIN_VERSIONS_JSON.trim_end()),
        ),
        EndpointId::HostpluginHealth => only(&method, Method::GET, reply(StatusCode::OK, "")),
        EndpointId::HostpluginStatus => only(&method, Method::PUT, reply(StatusCode::OK, "")),
        _ => reply(StatusCode::NOT_FOUND, ""),
    }
}
