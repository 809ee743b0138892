//! The wireserver client: the JSON endpoint (docs/protocol.md §5) and the legacy XML flow
//! (versions → goal state → health, §3, §4), under one retry budget. A status outside the
//! retry set (a redirect included: none is followed) fails the report at once.

use std::fmt;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::CONTENT_TYPE;
use thiserror::Error;

use crate::bounded_log::{Excerpt, ID_MAX};
use crate::format::HealthState;
use crate::format::json::health_body;
use crate::format::xml::{
    GoalState, PROTOCOL_VERSION, health_document, parse_goal_state, parse_versions,
};
use crate::http::{Answer, Http, error_chain};
use crate::retry::{Attempt, Budget, RetryError, RetryPolicy, Retryable, StatusClass};

/// Which way to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `POST /provisioning/health` only.
    #[default]
    Json,
    /// The legacy versions → goal state → `POST /machine?comp=health` flow only.
    Xml,
    /// JSON first; the XML flow when the JSON endpoint answers 404 or 405.
    Auto,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Json => "json",
            Protocol::Xml => "xml",
            Protocol::Auto => "auto",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The flow that delivered the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Json,
    Xml,
}

/// A report the wireserver accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    pub flow: Flow,
    pub status: u16,
    /// HTTP attempts over all steps.
    pub attempts: u32,
    pub elapsed: Duration,
}

/// A report the wireserver did not accept.
#[derive(Debug, Error)]
pub enum WireserverError {
    #[error(
        "{step}: the wireserver answered HTTP {status}, which is not retried{}",
        parenthesized(detail)
    )]
    Rejected {
        step: &'static str,
        status: u16,
        /// [`Answer::detail`]: a redirect's `Location`, the start of the body.
        detail: String,
    },
    #[error("{step}: gave up after {attempts} attempt(s) in {:.1} s; last failure: {last}", elapsed.as_secs_f64())]
    Exhausted {
        step: &'static str,
        attempts: u32,
        elapsed: Duration,
        last: String,
    },
    #[error(
        "{step}: the wireserver does not list protocol version {PROTOCOL_VERSION} under Supported (it lists: {supported})"
    )]
    UnsupportedVersion {
        step: &'static str,
        /// The versions listed, joined, escaped and clipped ([`crate::bounded_log`]).
        supported: String,
    },
}

/// ` (detail)`, or nothing for an empty detail.
pub(crate) fn parenthesized(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(" ({detail})")
    }
}

const STEP_JSON: &str = "POST /provisioning/health";
const STEP_VERSIONS: &str = "GET /?comp=versions";
const STEP_GOAL_STATE: &str = "GET /machine/?comp=goalstate";
const STEP_HEALTH: &str = "POST /machine?comp=health";

/// The identification headers.
#[derive(Debug, Clone)]
pub struct AgentHeaders {
    /// `x-ms-guest-agent-name` on the JSON endpoint, azure-init style: `name v<version>`.
    pub guest_agent_name: String,
    /// `x-ms-agent-name` on the XML flow.
    pub agent_name: String,
}

/// A wireserver at a base URL.
#[derive(Debug, Clone)]
pub struct Wireserver<'a> {
    http: &'a Http,
    base: Url,
    headers: AgentHeaders,
}

enum JsonOutcome {
    Accepted(u16),
    /// Auto mode: the JSON endpoint does not exist here.
    NotHere(u16),
}

enum HealthOutcome {
    Accepted(u16),
    /// 410: the goal state moved on; fetch it again.
    Gone,
}

impl<'a> Wireserver<'a> {
    /// `base` is the wireserver root, e.g. `http://168.63.129.16`.
    pub fn new(http: &'a Http, base: Url, headers: AgentHeaders) -> Self {
        Wireserver {
            http,
            base,
            headers,
        }
    }

    fn url(&self, path_and_query: &str) -> Url {
        join(&self.base, path_and_query)
    }

    /// Reports `state`, retrying within `policy`.
    pub async fn report(
        &self,
        state: &HealthState,
        protocol: Protocol,
        policy: RetryPolicy,
    ) -> Result<Delivered, WireserverError> {
        let mut budget = Budget::start(policy);
        let delivered = |flow, status, budget: &Budget| Delivered {
            flow,
            status,
            attempts: budget.attempts(),
            elapsed: budget.elapsed(),
        };
        match protocol {
            Protocol::Xml => {
                let status = self.xml_flow(state, &mut budget).await?;
                Ok(delivered(Flow::Xml, status, &budget))
            }
            Protocol::Json | Protocol::Auto => {
                match self
                    .json(state, protocol == Protocol::Auto, &mut budget)
                    .await?
                {
                    JsonOutcome::Accepted(status) => Ok(delivered(Flow::Json, status, &budget)),
                    JsonOutcome::NotHere(status) => {
                        tracing::info!(
                            "the JSON health endpoint answered HTTP {status}; using the XML flow"
                        );
                        let status = self.xml_flow(state, &mut budget).await?;
                        Ok(delivered(Flow::Xml, status, &budget))
                    }
                }
            }
        }
    }

    async fn json(
        &self,
        state: &HealthState,
        auto: bool,
        budget: &mut Budget,
    ) -> Result<JsonOutcome, WireserverError> {
        let url = self.url("/provisioning/health");
        let body = health_body(state);
        budget
            .run(STEP_JSON, |attempt| {
                let request = self
                    .http
                    .client()
                    .post(url.clone())
                    .header("x-ms-guest-agent-name", &self.headers.guest_agent_name)
                    .header(CONTENT_TYPE, "application/json")
                    .body(body.clone());
                async move {
                    match self.http.execute(STEP_JSON, attempt, request).await {
                        Err(e) => Attempt::Retry(error_chain(&e)),
                        Ok(answer) if answer.is_success() => {
                            Attempt::Done(JsonOutcome::Accepted(answer.status))
                        }
                        Ok(answer) if auto && matches!(answer.status, 404 | 405) => {
                            Attempt::Done(JsonOutcome::NotHere(answer.status))
                        }
                        Ok(answer) => retry_or_reject(STEP_JSON, &answer),
                    }
                }
            })
            .await
            .map_err(|e| flatten(STEP_JSON, e))
    }

    async fn xml_flow(
        &self,
        state: &HealthState,
        budget: &mut Budget,
    ) -> Result<u16, WireserverError> {
        self.check_versions(budget).await?;
        loop {
            let goal_state = self.goal_state(budget).await?;
            tracing::debug!(
                incarnation = %Excerpt::new(&goal_state.incarnation, ID_MAX),
                container_id = %Excerpt::new(&goal_state.container_id, ID_MAX),
                instance_id = %Excerpt::new(&goal_state.instance_id, ID_MAX),
                "goal state"
            );
            let document = health_document(&goal_state, state);
            match self.post_health(&document, budget).await? {
                HealthOutcome::Accepted(status) => return Ok(status),
                HealthOutcome::Gone => {
                    budget.failed(
                        STEP_HEALTH,
                        "HTTP 410: the goal state changed; fetching it again",
                    );
                    if !budget.pause().await {
                        return Err(flatten(STEP_HEALTH, budget.exhausted()));
                    }
                }
            }
        }
    }

    fn xml_request(&self, method: reqwest::Method, url: Url) -> reqwest::RequestBuilder {
        self.http
            .client()
            .request(method, url)
            .header("x-ms-agent-name", &self.headers.agent_name)
            .header("x-ms-version", PROTOCOL_VERSION)
    }

    async fn check_versions(&self, budget: &mut Budget) -> Result<(), WireserverError> {
        let url = self.url("/?comp=versions");
        let versions = budget
            .run(STEP_VERSIONS, |attempt| {
                let request = self.xml_request(reqwest::Method::GET, url.clone());
                async move {
                    match self.http.execute(STEP_VERSIONS, attempt, request).await {
                        Err(e) => Attempt::Retry(error_chain(&e)),
                        Ok(answer) if answer.is_success() => {
                            match parse_versions(&String::from_utf8_lossy(&answer.body)) {
                                Ok(versions) => Attempt::Done(versions),
                                Err(e) => Attempt::Retry(e.to_string()),
                            }
                        }
                        Ok(answer) => retry_or_reject(STEP_VERSIONS, &answer),
                    }
                }
            })
            .await
            .map_err(|e| flatten(STEP_VERSIONS, e))?;
        if versions.supports_protocol() {
            Ok(())
        } else {
            Err(WireserverError::UnsupportedVersion {
                step: STEP_VERSIONS,
                supported: if versions.supported.is_empty() {
                    "nothing".to_owned()
                } else {
                    Excerpt::new(&versions.supported.join(", "), ID_MAX).to_string()
                },
            })
        }
    }

    async fn goal_state(&self, budget: &mut Budget) -> Result<GoalState, WireserverError> {
        let url = self.url("/machine/?comp=goalstate");
        budget
            .run(STEP_GOAL_STATE, |attempt| {
                let request = self.xml_request(reqwest::Method::GET, url.clone());
                async move {
                    match self.http.execute(STEP_GOAL_STATE, attempt, request).await {
                        Err(e) => Attempt::Retry(error_chain(&e)),
                        Ok(answer) if answer.is_success() => {
                            // A truncated or garbled goal state is as transient as a 500.
                            match parse_goal_state(&String::from_utf8_lossy(&answer.body)) {
                                Ok(goal_state) => Attempt::Done(goal_state),
                                Err(e) => Attempt::Retry(e.to_string()),
                            }
                        }
                        Ok(answer) => retry_or_reject(STEP_GOAL_STATE, &answer),
                    }
                }
            })
            .await
            .map_err(|e| flatten(STEP_GOAL_STATE, e))
    }

    async fn post_health(
        &self,
        document: &str,
        budget: &mut Budget,
    ) -> Result<HealthOutcome, WireserverError> {
        let url = self.url("/machine?comp=health");
        budget
            .run(STEP_HEALTH, |attempt| {
                let request = self
                    .xml_request(reqwest::Method::POST, url.clone())
                    .header(CONTENT_TYPE, "text/xml; charset=utf-8")
                    .body(document.to_owned());
                async move {
                    match self.http.execute(STEP_HEALTH, attempt, request).await {
                        Err(e) => Attempt::Retry(error_chain(&e)),
                        Ok(answer) if answer.is_success() => {
                            Attempt::Done(HealthOutcome::Accepted(answer.status))
                        }
                        Ok(answer) if answer.status == 410 => Attempt::Done(HealthOutcome::Gone),
                        Ok(answer) => retry_or_reject(STEP_HEALTH, &answer),
                    }
                }
            })
            .await
            .map_err(|e| flatten(STEP_HEALTH, e))
    }
}

fn retry_or_reject<T>(step: &'static str, answer: &Answer) -> Attempt<T, WireserverError> {
    match Retryable::WIRESERVER.classify(answer) {
        StatusClass::Retry(why) => Attempt::Retry(why),
        StatusClass::Fatal => Attempt::Fail(WireserverError::Rejected {
            step,
            status: answer.status,
            detail: answer.detail(),
        }),
    }
}

fn flatten(step: &'static str, error: RetryError<WireserverError>) -> WireserverError {
    match error {
        RetryError::Failed(error) => error,
        RetryError::Exhausted {
            attempts,
            elapsed,
            last,
        } => WireserverError::Exhausted {
            step,
            attempts,
            elapsed,
            last,
        },
    }
}

/// `base` + an absolute path and query, keeping any path prefix of `base`.
pub(crate) fn join(base: &Url, path_and_query: &str) -> Url {
    let prefix = base.as_str().trim_end_matches('/');
    Url::parse(&format!("{prefix}{path_and_query}"))
        .expect("a valid base plus a fixed path is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_keeps_prefixes_and_queries() {
        let base = Url::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            join(&base, "/machine/?comp=goalstate").as_str(),
            "http://127.0.0.1:8080/machine/?comp=goalstate"
        );
        let prefixed = Url::parse("http://host/wire/").unwrap();
        assert_eq!(
            join(&prefixed, "/?comp=versions").as_str(),
            "http://host/wire/?comp=versions"
        );
    }
}
