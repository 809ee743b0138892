//! The admin API, on its own loopback listener (never on an agent-facing port):
//!
//! * `GET /__admin/journal` — the in-memory journal window, a JSON array of entries;
//! * `POST /__admin/scenario` — body = a scenario file's contents (TOML); `?origin=PATH` names it
//!   in errors and anchors relative `body_file`s; errors → 400 with the message;
//! * `POST /__admin/reset` — empty the journal window, rewind the scenario (cursors, random
//!   streams, rate limiter, trigger clock);
//! * `GET /__admin/served` — the goal state ids in effect (`ServedIds`).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::scenario::Scenario;
use crate::server::{Shared, lock};

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/__admin/journal", get(journal))
        .route("/__admin/scenario", post(scenario))
        .route("/__admin/reset", post(reset))
        .route("/__admin/served", get(served))
        .with_state(shared)
}

async fn journal(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(lock(&shared.journal).snapshot()).into_response()
}

#[derive(Deserialize)]
struct ScenarioParams {
    origin: Option<String>,
}

async fn scenario(
    State(shared): State<Arc<Shared>>,
    Query(params): Query<ScenarioParams>,
    body: String,
) -> Response {
    let origin = params.origin.unwrap_or_else(|| "<admin>".to_owned());
    match Scenario::from_toml_str(&body, &origin) {
        Ok(scenario) => {
            shared.load_scenario(scenario);
            (StatusCode::OK, "scenario loaded\n").into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

async fn reset(State(shared): State<Arc<Shared>>) -> Response {
    shared.reset();
    (StatusCode::OK, "reset\n").into_response()
}

async fn served(State(shared): State<Arc<Shared>>) -> Response {
    axum::Json(shared.served_ids()).into_response()
}
