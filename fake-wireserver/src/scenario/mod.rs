//! Scenario files: what the fake should do, per endpoint, instead of (or before) its default
//! answers. TOML, `deny_unknown_fields` everywhere; every error names the file, the line and the
//! field (`scenario.toml:12:8: endpoint[1].step[2].kind: unknown variant ...`).
//!
//! ```toml
//! name = "403 throttling burst then success"
//! seed = 42
//!
//! [goalstate]
//! incarnation = "7"
//!
//! [[endpoint]]
//! id = "wireserver.health.*"
//! end = "default"                 # "repeat-last" | "cycle" | "default"
//!
//! [[endpoint.step]]
//! kind = "respond"
//! preset = "throttled"
//! times = 3
//! ```
//!
//! Parsing happens in two passes: serde (with spans) into the raw shapes below, then a
//! validation pass that checks what serde cannot (per-kind fields, ranges, globs) and reads
//! `body_file`s. Only a fully valid scenario is returned; nothing is half-loaded.
//!
//! `body_file` and `imds.instance_file` load only regular files of at most 1 MiB from the
//! scenario's own folder or an `--allow-files` folder ([`FileAccess`], [`crate::files`]).
//!
//! In Rust, the same scenario is [`Scenario::new`] plus the builder: a plan per
//! [`Scenario::endpoint`], a [`Step`] constructor per `kind` (an [`Action`] each) and per
//! preset ([`Step::throttled`], ...), with `times` and `probability`.
//!
//! ```
//! use fake_wireserver::{EndPolicy, EndpointId, Scenario, Step};
//! let scenario = Scenario::new()
//!     .seed(42)
//!     .incarnation("7")
//!     .endpoint("wireserver.health.*", EndPolicy::Default, vec![Step::throttled().times(3)])
//!     .endpoint(EndpointId::ImdsInstance, EndPolicy::Default, vec![Step::reset().probability(0.5)]);
//! // Written back as a scenario file, it parses to itself.
//! let toml = scenario.to_toml_string();
//! assert_eq!(Scenario::from_toml_str(&toml, "x.toml").unwrap().endpoints, scenario.endpoints);
//! ```

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::endpoint::{ENDPOINT_IDS, IntoEndpointPattern, UnknownEndpoint};
pub use crate::files::FileAccess;
use crate::journal::AnswerKind;

/// A scenario file could not be used. The message names the file, line, column and field.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{origin}: cannot read the scenario file: {source}")]
    Read {
        /// The file as named.
        origin: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The document is not a valid scenario.
    #[error("{origin}:{line}:{column}: {field}: {message}")]
    Invalid {
        /// The file as named (or the origin given).
        origin: String,
        /// 1-based; 0 when the problem has no position (e.g. an empty document).
        line: usize,
        /// 1-based, like `line`; 0 without a position.
        column: usize,
        /// Dotted path, e.g. `endpoint[1].step[2].seconds` (array indexes are 1-based).
        field: String,
        /// What is wrong and what is expected.
        message: String,
    },
}

impl ScenarioError {
    /// The field path named by the error, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            ScenarioError::Invalid { field, .. } => Some(field),
            ScenarioError::Read { .. } => None,
        }
    }
    /// The 1-based line named by the error, if any.
    pub fn line(&self) -> Option<usize> {
        match self {
            ScenarioError::Invalid { line, .. } if *line > 0 => Some(*line),
            _ => None,
        }
    }
}

/// A validated scenario. Build one with [`Scenario::from_toml_str`], [`Scenario::from_file`],
/// [`Scenario::from_toml_section`] or in code ([`Scenario::new`] + the builder methods).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scenario {
    /// A name for reports (`name = ...`).
    pub name: Option<String>,
    /// Seeds every `probability` draw, so chaos runs replay exactly. Default 0.
    pub seed: Option<u64>,
    /// `[goalstate]`: the served ids and the URLs listed.
    pub goalstate: GoalStateOverrides,
    /// `[imds]`: the served instance document and IMDS's rate limit.
    pub imds: ImdsOverrides,
    /// Plans in file order; the first plan whose id (or glob) matches a request's endpoint id
    /// answers it.
    pub endpoints: Vec<EndpointPlan>,
    /// `[rate_limit]`: per-client throttling.
    pub rate_limit: Option<RateLimit>,
    /// `[[trigger]]`s: changes at a time after loading.
    pub triggers: Vec<Trigger>,
    /// Where it came from (file name for messages); `"<code>"` when built in code.
    pub origin: String,
}

/// Overrides of the served goal state (defaults in `defaults/defaults.toml`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalStateOverrides {
    /// The goal state's `Incarnation`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// The goal state's `ContainerId`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// The role instance's `InstanceId`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    /// List a `Certificates` URL in the goal state (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificates: Option<bool>,
    /// List a `HostingEnvironmentConfig` URL (default true; WALA refuses a goal state without).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosting_environment_config: Option<bool>,
    /// List a `SharedConfig` URL (default true; WALA and afterburn `--attributes` fetch it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_config: Option<bool>,
    /// List an `ExtensionsConfig` URL (default false: WALA fetches it when listed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extensions_config: Option<bool>,
}

/// Overrides of the served IMDS instance document (defaults in `defaults/instance.json`), and
/// IMDS's own rate limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImdsOverrides {
    /// `compute.vmId`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_id: Option<String>,
    /// `extended.compute.ppsType` (`"None"`, `"Running"`, `"Savable"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pps_type: Option<String>,
    /// `compute.name` and `compute.osProfile.computerName`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `compute.vmSize`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_size: Option<String>,
    /// `compute.osProfile.adminUsername`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_username: Option<String>,
    /// A whole instance document (JSON) replacing the default, relative to the scenario file.
    /// The other overrides still apply on top of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_file: Option<String>,
    /// IMDS's per-VM request limit (`false`, `true` or requests per second); `None` = the
    /// platform's 5 per second ([`ImdsRateLimit`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<ImdsRateLimit>,
    /// Contents of `instance_file`, read at load time.
    #[serde(skip)]
    pub instance_document: Option<serde_json::Value>,
}

/// What happens after the last step of a plan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndPolicy {
    /// Keep answering with the last step.
    RepeatLast,
    /// Start again at the first step.
    Cycle,
    /// Answer normally (the default documents).
    #[default]
    Default,
}

impl Scenario {
    /// The plan that answers requests for `id`: the first whose pattern matches it, as the
    /// fake decides at request time (a later plan that also matches never sees them).
    pub fn plan_for(&self, id: crate::EndpointId) -> Option<&EndpointPlan> {
        self.endpoints
            .iter()
            .find(|p| crate::endpoint::Patterns::new([p.id.as_str()]).matches(id.as_str()))
    }

    /// The plans that answer some endpoint of `service` ([`Scenario::plan_for`]), in file
    /// order, each once: decided on the endpoints they get, not on how a pattern starts (`"*"`
    /// and `"?mds.*"` script IMDS too; a plan shadowed by an earlier one scripts nothing).
    pub fn plans_for(&self, service: crate::endpoint::Service) -> Vec<&EndpointPlan> {
        self.endpoints
            .iter()
            .filter(|plan| {
                crate::EndpointId::ALL.into_iter().any(|id| {
                    id.service() == Some(service)
                        && self.plan_for(id).is_some_and(|p| std::ptr::eq(p, *plan))
                })
            })
            .collect()
    }
}

/// An ordered plan of steps for the endpoints matching `id` (an endpoint id or a glob).
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointPlan {
    /// An endpoint id or glob (`"wireserver.health.*"`).
    pub id: String,
    /// What happens after the last step.
    pub end: EndPolicy,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

/// One step of a plan: an action, applied `times` times, each time with `probability`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// What the step does.
    pub action: Action,
    /// How many requests this step consumes (default 1).
    pub times: u32,
    /// Chance that the step's action applies to a request it consumes; otherwise the request
    /// gets the default answer (seeded, default 1.0).
    pub probability: f64,
    /// What happens on the platform each time the step's action answers a request (`then`),
    /// as a [`Trigger`] would: the moment a fault is met, not a time (a health report answered
    /// 410 because the goal state just moved on).
    pub then: Option<TriggerAction>,
}

/// A scripted answer. Explicit `status`/`headers`/`body` override the preset's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    /// The status line's code (200 without it and without a preset).
    pub status: Option<u16>,
    /// A canned platform answer the other fields adjust.
    pub preset: Option<Preset>,
    /// Headers in order; each replaces the preset's header of the same name.
    pub headers: Vec<(String, String)>,
    /// The body (none = the preset's, or empty).
    pub body: Option<Body>,
}

/// A reply body: inline text, or a file (path as written, contents read at load time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// `body = "..."`.
    Inline(String),
    /// `body_file = "..."`.
    File {
        /// The path as written.
        path: String,
        /// The file's bytes, read when the scenario was loaded.
        contents: Vec<u8>,
    },
}

impl Body {
    /// The bytes sent.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Body::Inline(s) => s.as_bytes(),
            Body::File { contents, .. } => contents,
        }
    }
}

/// Canned platform answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// 403 with the platform's `RequestRateLimitExceeded` body (docs/protocol.md §8.1).
    Throttled,
    /// 410 Gone.
    Gone,
    /// 500 Internal Server Error.
    InternalError,
    /// 503 Service Unavailable.
    Unavailable,
    /// 429 Too Many Requests.
    TooManyRequests,
}

impl Preset {
    /// The preset's status code.
    pub fn status(self) -> u16 {
        match self {
            Preset::Throttled => 403,
            Preset::Gone => 410,
            Preset::InternalError => 500,
            Preset::Unavailable => 503,
            Preset::TooManyRequests => 429,
        }
    }
}

/// Per client IP: at most `requests` per `window` seconds; the rest get the platform's 403.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Requests allowed per window and client.
    pub requests: u32,
    /// The window, in seconds (sliding).
    pub window: f64,
    /// Endpoint ids or globs (default `["wireserver.*"]`).
    #[serde(default = "default_rate_limited")]
    pub endpoints: Vec<String>,
}

fn default_rate_limited() -> Vec<String> {
    vec!["wireserver.*".to_owned()]
}

/// A time trigger, counted from when the scenario was loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    /// Seconds after the scenario was loaded.
    pub after: f64,
    /// What happens then.
    pub action: TriggerAction,
}

/// What a [`Trigger`] (or a step's `then`) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TriggerAction {
    /// The goal state's incarnation goes up by one.
    BumpIncarnation,
    /// `/metadata/reprovisiondata` starts answering 200 (404 before).
    ReprovisionAvailable,
}

/// Longest duration a scenario file may give (`seconds`, `interval`, `rate_limit.window`,
/// `trigger.after`): one day.
pub const MAX_SECONDS: f64 = 86_400.0;
/// Most requests one step may consume (`times`). Plans are counted, never expanded, so this
/// bounds nothing in memory; it keeps a typo from scripting a fault forever.
pub const MAX_TIMES: u32 = 1_000_000;
/// Most `[[endpoint.step]]` tables in one scenario, over all plans.
pub const MAX_STEPS: usize = 10_000;
/// Most requests per window of `[rate_limit]` (the limiter keeps one timestamp per request
/// per client).
pub const MAX_RATE_REQUESTS: u32 = 1_000;

/// Seconds from a scenario as a `Duration`, never panicking: NaN and negatives are zero, huge
/// values are capped at [`MAX_SECONDS`] (the fake validates what it serves; the engine stays
/// panic-free on a scenario that skipped [`Scenario::validate`] all the same).
pub fn seconds(x: f64) -> std::time::Duration {
    if x.is_nan() || x <= 0.0 {
        std::time::Duration::ZERO
    } else {
        std::time::Duration::from_secs_f64(x.min(MAX_SECONDS))
    }
}

mod action;
mod builder;
mod imds_rate;
mod parse;
mod rules;
mod write;

pub use action::Action;
pub use imds_rate::{IMDS_REQUESTS_PER_SECOND, ImdsRateLimit};
pub(crate) use write::serialize_scenario;
