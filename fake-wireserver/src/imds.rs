//! IMDS default answers, as an axum router (docs/protocol.md §1.2).
//!
//! Platform rules: `Metadata: true` (any case) is required, `api-version` is required (except on
//! `/metadata/versions`) and must be one the platform supports, duplicate query parameters and
//! `X-Forwarded-For` are refused — all with 400 and a JSON `error` body. Leaf paths below
//! `/metadata/instance` walk the JSON document; a leaf needs `format=text`. The per-VM rate limit
//! (429 beyond 5 requests per second) is decided before any of this, by the scenario engine
//! (`engine.rs`), which counts every IMDS request.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, RawQuery};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Value, json};

use crate::context::RequestCtx;
use crate::documents::{JSON_CONTENT_TYPE, TEXT_CONTENT_TYPE, XML_CONTENT_TYPE};
use crate::endpoint::{self, EndpointId, QueryPair, Service};
use crate::inspect::{ImdsRefusal, RequestView, imds_api_versions, imds_refusal};

/// IMDS's body for a request beyond its per-VM limit (the 429 of docs/protocol.md §1.2).
/// The fake's wording: the platform's is not documented, only the status.
pub const TOO_MANY_REQUESTS_BODY: &str =
    r#"{"error":"Too many requests. The per-VM request rate limit was exceeded; retry later"}"#;

/// IMDS's default answers as an axum router (the connection loop skips it for the same answers).
pub fn router() -> Router {
    Router::new()
        .route("/metadata/instance", any(handle))
        .route("/metadata/instance/", any(handle))
        .route("/metadata/instance/{*leaf}", any(handle))
        .route("/metadata/versions", any(handle))
        .route("/metadata/reprovisiondata", any(handle))
        .fallback(handle)
}

/// A default IMDS answer, independent of axum: the connection loop serves it directly (the
/// hot path), and [`router`] wraps it for in-process use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImdsAnswer {
    pub status: StatusCode,
    pub content_type: &'static str,
    /// `Allow: GET` on 405.
    pub allow_get: bool,
    pub body: Bytes,
}

fn with_type(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> ImdsAnswer {
    ImdsAnswer {
        status,
        content_type,
        allow_get: false,
        body: body.into(),
    }
}

fn json_reply(status: StatusCode, body: &Value) -> ImdsAnswer {
    with_type(status, JSON_CONTENT_TYPE, body.to_string())
}

fn error(status: StatusCode, message: &str) -> ImdsAnswer {
    json_reply(status, &json!({ "error": message }))
}

/// The newest versions, as the platform lists them in its "api-version" errors.
fn newest_versions() -> Vec<String> {
    imds_api_versions().iter().rev().take(3).cloned().collect()
}

fn refusal_response(refusal: &ImdsRefusal) -> ImdsAnswer {
    match refusal {
        ImdsRefusal::ForwardedFor => error(
            StatusCode::BAD_REQUEST,
            "Bad request. Requests with the X-Forwarded-For header are not allowed.",
        ),
        ImdsRefusal::MetadataHeader => error(
            StatusCode::BAD_REQUEST,
            "Bad request. Required metadata header not specified",
        ),
        ImdsRefusal::DuplicateQuery(_) => error(
            StatusCode::BAD_REQUEST,
            "Bad request. Query parameters must not be repeated.",
        ),
        ImdsRefusal::ApiVersionMissing => json_reply(
            StatusCode::BAD_REQUEST,
            &json!({
                "error": "Bad request. api-version was not specified in the request. For more information refer to aka.ms/azureimds",
                "newest-versions": newest_versions(),
            }),
        ),
        ImdsRefusal::ApiVersionUnsupported(_) => json_reply(
            StatusCode::BAD_REQUEST,
            &json!({
                "error": "Bad request. api-version is invalid or was not specified in the request. For more information refer to aka.ms/azureimds",
                "newest-versions": newest_versions(),
            }),
        ),
    }
}

async fn handle(
    Extension(ctx): Extension<RequestCtx>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let header_list: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let query = endpoint::decode_query(query.as_deref());
    let answer = answer(&ctx, method.as_str(), uri.path(), &query, &header_list);
    let mut res = (answer.status, answer.body).into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(answer.content_type),
    );
    if answer.allow_get {
        res.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
    }
    res
}

/// The default answer to one IMDS request (`path` as `http::Uri` splits it, `query` the decoded
/// pairs of its query; header names in any case).
pub(crate) fn answer(
    ctx: &RequestCtx,
    method: &str,
    path: &str,
    query: &[QueryPair],
    header_list: &[(String, String)],
) -> ImdsAnswer {
    let id = endpoint::classify(Service::Imds, path, query);
    let view = RequestView {
        service: Service::Imds,
        endpoint: id,
        method,
        path,
        query,
        headers: header_list,
        http_version: "",
    };
    if let Some(refusal) = imds_refusal(&view) {
        return refusal_response(&refusal);
    }
    if id == EndpointId::ImdsUnknown {
        return error(StatusCode::NOT_FOUND, "Not found");
    }
    if method != Method::GET.as_str() {
        let mut res = error(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed");
        res.allow_get = true;
        return res;
    }
    match id {
        EndpointId::ImdsVersions => with_type(
            StatusCode::OK,
            JSON_CONTENT_TYPE,
            crate::documents::IMDS_VERSIONS_JSON.trim().to_owned(),
        ),
        EndpointId::ImdsReprovisiondata => {
            if ctx.reprovision_available {
                with_type(
                    StatusCode::OK,
                    XML_CONTENT_TYPE,
                    ctx.documents.reprovision_xml(),
                )
            } else {
                // Not reassigned yet: cloud-init keeps polling on 404.
                error(StatusCode::NOT_FOUND, "Not found")
            }
        }
        _ => instance_answer(ctx, path, query),
    }
}

/// A walk of the instance document (`/metadata/instance` and what is below it), in the format
/// asked for.
fn instance_answer(ctx: &RequestCtx, path: &str, query: &[QueryPair]) -> ImdsAnswer {
    let param = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_ref())
    };
    let extended = param("extended").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let format = param("format").unwrap_or("json");
    let rest = path.strip_prefix("/metadata/instance").unwrap_or_default();
    if format.eq_ignore_ascii_case("json") && rest.split('/').all(str::is_empty) {
        // The whole document, serialized once per scenario (the hot path).
        return with_type(
            StatusCode::OK,
            JSON_CONTENT_TYPE,
            ctx.documents.instance_json_bytes(extended),
        );
    }
    let doc = ctx.documents.instance_json(extended);
    let mut node = &doc;
    for segment in rest.split('/').filter(|s| !s.is_empty()) {
        let next = match node {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        match next {
            Some(n) => node = n,
            None => return error(StatusCode::NOT_FOUND, "Not found"),
        }
    }
    let leaf = !matches!(node, Value::Object(_) | Value::Array(_));
    match format {
        f if f.eq_ignore_ascii_case("json") => {
            if leaf {
                error(
                    StatusCode::BAD_REQUEST,
                    "Bad request. Leaf nodes are only available with format=text.",
                )
            } else {
                json_reply(StatusCode::OK, node)
            }
        }
        f if f.eq_ignore_ascii_case("text") => {
            let text = match node {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                Value::Object(map) => map.keys().map(|k| format!("{k}\n")).collect::<String>(),
                Value::Array(items) => (0..items.len())
                    .map(|i| format!("{i}\n"))
                    .collect::<String>(),
                other => other.to_string(),
            };
            with_type(StatusCode::OK, TEXT_CONTENT_TYPE, text)
        }
        _ => error(
            StatusCode::BAD_REQUEST,
            "Bad request. Unsupported format; use format=json or format=text.",
        ),
    }
}
