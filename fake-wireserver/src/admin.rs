//! The admin API, on its own loopback listener (never on an agent-facing port):
//!
//! * `GET /__admin/journal` — the in-memory journal window, a JSON array of entries;
//! * `POST /__admin/scenario` — body = a scenario file's contents (`Content-Type:
//!   application/toml`); `?origin=PATH` names it in errors and makes PATH's folder the folder
//!   its `body_file`s come from (without it, only `--allow-files` folders); errors → 400 with the
//!   message;
//! * `POST /__admin/reset` — empty the journal window, rewind the scenario (cursors, random
//!   streams, rate limiter, trigger clock);
//! * `GET /__admin/served` — the goal state ids in effect (`ServedIds`);
//! * `GET /__admin/stats` — the journal's state: the window (`JournalStats`) and, once a write
//!   to the `--journal` file failed, `file_error` (`JournalFileError`: the entries it misses).
//!
//! Every request is checked before anything is done (docs/threat-model.md):
//!
//! 1. 403 for what a browser sends: a `Host` that is not this listener (`127.0.0.1:PORT`,
//!    `localhost:PORT`: DNS rebinding), an `Origin` or `Sec-Fetch-*` header, a POST with a
//!    content type other than `application/toml` / `application/json` (or a body without one:
//!    the types a page can send without a CORS preflight are all refused);
//! 2. 401 without `Authorization: Bearer TOKEN`, the token generated at start and printed in the
//!    binary's ready line (`admin_token`; [`crate::Fake::admin_token`]).

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::files::FileAccess;
use crate::scenario::Scenario;
use crate::server::Shared;
use crate::sync::lock;

/// Content types an admin POST may carry. All of them make a browser send a CORS preflight
/// first, which this API never answers with an allow.
const ACCEPTED_TYPES: [&str; 2] = ["application/toml", "application/json"];

pub(crate) struct AdminState {
    pub(crate) shared: Arc<Shared>,
    pub(crate) token: String,
    /// The listener's own address: the only `Host` accepted (besides `localhost:PORT`).
    pub(crate) local: SocketAddr,
    pub(crate) allow_files: Vec<PathBuf>,
}

/// 256 random bits from the kernel, as 64 lowercase hex digits.
pub(crate) fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

pub(crate) fn router(state: AdminState) -> Router {
    let state = Arc::new(state);
    Router::new()
        .route("/__admin/journal", get(journal))
        .route("/__admin/scenario", post(scenario))
        .route("/__admin/reset", post(reset))
        .route("/__admin/served", get(served))
        .route("/__admin/stats", get(stats))
        // `layer` (not `route_layer`): unknown paths are checked too, so nothing is learned
        // without the token.
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

async fn guard(State(state): State<Arc<AdminState>>, req: Request, next: Next) -> Response {
    if let Err(reason) = browser_check(&state, req.method(), req.headers()) {
        return (StatusCode::FORBIDDEN, format!("admin API: {reason}\n")).into_response();
    }
    if !authorized(&state.token, req.headers()) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "admin API: Authorization: Bearer TOKEN required (the admin_token of the ready line)\n",
        )
            .into_response();
    }
    next.run(req).await
}

/// Refuses what only a browser (or a page it was tricked into loading) would send.
fn browser_check(state: &AdminState, method: &Method, headers: &HeaderMap) -> Result<(), String> {
    let port = state.local.port();
    match headers.get(header::HOST).map(|h| h.to_str()) {
        None => return Err(format!("a Host header is required ({})", state.local)),
        Some(Ok(host))
            if host.eq_ignore_ascii_case(&state.local.to_string())
                || host.eq_ignore_ascii_case(&format!("localhost:{port}")) => {}
        Some(host) => {
            return Err(format!(
                "Host {:?} is not this listener ({} or localhost:{port})",
                host.unwrap_or("<not text>"),
                state.local
            ));
        }
    }
    if headers.contains_key(header::ORIGIN) {
        return Err(
            "requests with an Origin header are refused (browsers are not admin clients)".into(),
        );
    }
    if let Some(name) = headers
        .keys()
        .find(|k| k.as_str().starts_with("sec-fetch-"))
    {
        return Err(format!(
            "requests with a {name} header are refused (browsers are not admin clients)"
        ));
    }
    if method == Method::POST {
        match headers.get(header::CONTENT_TYPE) {
            Some(value) => {
                let essence = value
                    .to_str()
                    .unwrap_or("")
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase();
                if !ACCEPTED_TYPES.contains(&essence.as_str()) {
                    return Err(format!(
                        "Content-Type {value:?} is refused; expected {}",
                        ACCEPTED_TYPES.join(" or ")
                    ));
                }
            }
            None if has_body(headers) => {
                return Err(format!(
                    "a POST body needs a Content-Type: {}",
                    ACCEPTED_TYPES.join(" or ")
                ));
            }
            None => {}
        }
    }
    Ok(())
}

fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

/// `Authorization: Bearer TOKEN`, compared in constant time.
fn authorized(token: &str, headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let Some(given) = value
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case(b"bearer "))
        .map(|_| &value[7..])
    else {
        return false;
    };
    given.len() == token.len()
        && given
            .iter()
            .zip(token.as_bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

async fn journal(State(state): State<Arc<AdminState>>) -> Response {
    axum::Json(lock(&state.shared.journal).snapshot()).into_response()
}

#[derive(Deserialize)]
struct ScenarioParams {
    origin: Option<String>,
}

async fn scenario(
    State(state): State<Arc<AdminState>>,
    Query(params): Query<ScenarioParams>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let toml = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/toml"));
    if !toml {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a scenario is TOML: Content-Type: application/toml\n",
        )
            .into_response();
    }
    let files = match &params.origin {
        Some(origin) => FileAccess::beside(origin),
        None => FileAccess::none(),
    }
    .allow(state.allow_files.iter().cloned());
    let origin = params.origin.unwrap_or_else(|| "<admin>".to_owned());
    // Files are read here: on a blocking thread, never on the runtime's.
    let parsed =
        tokio::task::spawn_blocking(move || Scenario::from_toml_str_with(&body, &origin, &files))
            .await;
    match parsed {
        Ok(Ok(scenario)) => {
            state.shared.load_scenario(scenario);
            (StatusCode::OK, "scenario loaded\n").into_response()
        }
        Ok(Err(e)) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("parsing the scenario failed: {e}\n"),
        )
            .into_response(),
    }
}

async fn reset(State(state): State<Arc<AdminState>>) -> Response {
    state.shared.reset();
    (StatusCode::OK, "reset\n").into_response()
}

async fn served(State(state): State<Arc<AdminState>>) -> Response {
    axum::Json(state.shared.served_ids()).into_response()
}

/// The journal's state as JSON: [`crate::JournalStats`] with `file_error` (null while the
/// `--journal` file, if any, has every entry).
async fn stats(State(state): State<Arc<AdminState>>) -> Response {
    let journal = lock(&state.shared.journal);
    #[derive(serde::Serialize)]
    struct Stats {
        #[serde(flatten)]
        window: crate::JournalStats,
        file_error: Option<crate::journal_file::JournalFileError>,
    }
    axum::Json(Stats {
        window: journal.stats(),
        file_error: journal.file_error(),
    })
    .into_response()
}
