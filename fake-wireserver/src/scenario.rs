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
//! [`Scenario::endpoint`], a [`Step`] constructor per `kind` ([`Step::respond`], [`Step::delay`],
//! [`Step::hang`], [`Step::reset`], [`Step::close`], [`Step::malformed`], [`Step::partial`],
//! [`Step::slow`]) and per preset ([`Step::throttled`], ...), with `times` and `probability`.
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
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use toml::Spanned;

use crate::endpoint::{ENDPOINT_IDS, IntoEndpointPattern, UnknownEndpoint};
pub use crate::files::FileAccess;
use crate::files::FileReader;

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
    /// `[imds]`: the served instance document.
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

/// Overrides of the served IMDS instance document (defaults in `defaults/instance.json`).
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
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Answer with this status/headers/body.
    Respond(Reply),
    /// Wait, then answer normally (or with the reply when given).
    Delay {
        /// How long to wait.
        seconds: f64,
        /// The answer after the wait; `None` = the default answer.
        reply: Option<Reply>,
    },
    /// Read the request, never answer (until the client gives up).
    Hang,
    /// TCP RST (SO_LINGER 0, then close).
    Reset,
    /// Close without any response bytes.
    Close,
    /// Write these bytes raw, then close.
    Malformed {
        /// The bytes, as written in the scenario (escapes already decoded by TOML).
        bytes: String,
    },
    /// Send the head with the full Content-Length, then `bytes_sent` bytes of body, then close.
    Partial {
        /// Body bytes sent before the close.
        bytes_sent: usize,
        /// The answer cut short; `None` = the default answer.
        reply: Option<Reply>,
    },
    /// Send the head, then dribble the body: `chunk` bytes every `interval` seconds.
    Slow {
        /// Bytes per write.
        chunk: usize,
        /// Seconds between writes.
        interval: f64,
        /// The answer dribbled; `None` = the default answer.
        reply: Option<Reply>,
    },
}

impl Action {
    /// The `kind` string of the step (also the journal's `answer.kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Respond(_) => "respond",
            Action::Delay { .. } => "delay",
            Action::Hang => "hang",
            Action::Reset => "reset",
            Action::Close => "close",
            Action::Malformed { .. } => "malformed",
            Action::Partial { .. } => "partial",
            Action::Slow { .. } => "slow",
        }
    }
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
    /// 403 with the platform's `RequestRateLimitExceeded` body (PROTOCOL.md §8.1).
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

/// What a [`Trigger`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
/// values are capped at [`MAX_SECONDS`] (scenarios built in code skip the file validation).
pub fn seconds(x: f64) -> std::time::Duration {
    if x.is_nan() || x <= 0.0 {
        std::time::Duration::ZERO
    } else {
        std::time::Duration::from_secs_f64(x.min(MAX_SECONDS))
    }
}

// ---------------------------------------------------------------------------------------------
// Builders (for Rust tests)

impl Scenario {
    /// An empty scenario (the default documents, no faults) whose origin is `"<code>"`.
    pub fn new() -> Self {
        Scenario {
            origin: "<code>".to_owned(),
            ..Scenario::default()
        }
    }

    /// Adds a plan for the endpoints matching `id`: an [`EndpointId`](crate::EndpointId) or a string id or glob
    /// (`"wireserver.health.*"`). Panics, at the caller's line, on a string that matches no
    /// endpoint id, listing the valid ids ([`Scenario::try_endpoint`] returns the error).
    #[track_caller]
    pub fn endpoint(self, id: impl IntoEndpointPattern, end: EndPolicy, steps: Vec<Step>) -> Self {
        match self.try_endpoint(id, end, steps) {
            Ok(scenario) => scenario,
            Err(e) => panic!("Scenario::endpoint: {e}"),
        }
    }

    /// [`Scenario::endpoint`], returning a typo'd id as an error instead of panicking.
    pub fn try_endpoint(
        mut self,
        id: impl IntoEndpointPattern,
        end: EndPolicy,
        steps: Vec<Step>,
    ) -> Result<Self, UnknownEndpoint> {
        let id = id.into_endpoint_pattern()?;
        self.endpoints.push(EndpointPlan { id, end, steps });
        Ok(self)
    }

    /// Seeds the `probability` draws.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Serves this goal state incarnation (`[goalstate] incarnation`).
    pub fn incarnation(mut self, incarnation: &str) -> Self {
        self.goalstate.incarnation = Some(incarnation.to_owned());
        self
    }

    /// Adds a trigger `after` seconds from loading.
    pub fn trigger(mut self, after: f64, action: TriggerAction) -> Self {
        self.triggers.push(Trigger { after, action });
        self
    }

    /// Throttles each client to `requests` per `window` seconds on `endpoints` ([`EndpointId`]s
    /// or string ids and globs); the rest get the platform's 403. Panics, at the caller's line,
    /// on a string that matches no endpoint id, listing the valid ids.
    ///
    /// [`EndpointId`]: crate::EndpointId
    #[track_caller]
    pub fn rate_limit<P: IntoEndpointPattern>(
        mut self,
        requests: u32,
        window: f64,
        endpoints: impl IntoIterator<Item = P>,
    ) -> Self {
        let endpoints = endpoints
            .into_iter()
            .map(|p| p.into_endpoint_pattern())
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_else(|e| panic!("Scenario::rate_limit: {e}"));
        self.rate_limit = Some(RateLimit {
            requests,
            window,
            endpoints,
        });
        self
    }
}

impl Step {
    /// A step doing `action` once, always (`times = 1`, `probability = 1.0`).
    pub fn new(action: Action) -> Self {
        Step {
            action,
            times: 1,
            probability: 1.0,
        }
    }
    /// `kind = "respond"` with `status` (headers and body from [`Step::header`], [`Step::body`]).
    pub fn respond(status: u16) -> Self {
        Step::new(Action::Respond(Reply {
            status: Some(status),
            ..Reply::default()
        }))
    }
    /// `kind = "respond"` with a canned platform answer.
    pub fn preset(preset: Preset) -> Self {
        Step::new(Action::Respond(Reply {
            preset: Some(preset),
            ..Reply::default()
        }))
    }
    /// The platform's throttling answer: 403 `RequestRateLimitExceeded` ([`Preset::Throttled`]).
    pub fn throttled() -> Self {
        Step::preset(Preset::Throttled)
    }
    /// 410 Gone ([`Preset::Gone`]).
    pub fn gone() -> Self {
        Step::preset(Preset::Gone)
    }
    /// 500 Internal Server Error ([`Preset::InternalError`]).
    pub fn internal_error() -> Self {
        Step::preset(Preset::InternalError)
    }
    /// 503 Service Unavailable ([`Preset::Unavailable`]).
    pub fn unavailable() -> Self {
        Step::preset(Preset::Unavailable)
    }
    /// 429 Too Many Requests ([`Preset::TooManyRequests`]).
    pub fn too_many_requests() -> Self {
        Step::preset(Preset::TooManyRequests)
    }
    /// `kind = "delay"`: wait, then give the default answer. [`Step::status`], [`Step::header`]
    /// or [`Step::body`] script the answer instead (status 200 unless set), as for `partial` and
    /// `slow`.
    pub fn delay(wait: std::time::Duration) -> Self {
        Step::new(Action::Delay {
            seconds: wait.as_secs_f64(),
            reply: None,
        })
    }
    /// `kind = "hang"`: read the request, never answer.
    pub fn hang() -> Self {
        Step::new(Action::Hang)
    }
    /// `kind = "reset"`: a TCP RST.
    pub fn reset() -> Self {
        Step::new(Action::Reset)
    }
    /// `kind = "close"`: close without a byte.
    pub fn close() -> Self {
        Step::new(Action::Close)
    }
    /// `kind = "malformed"`: write these bytes raw, then close.
    pub fn malformed(bytes: impl Into<String>) -> Self {
        Step::new(Action::Malformed {
            bytes: bytes.into(),
        })
    }
    /// `kind = "partial"`: the head with the full `Content-Length`, then only `bytes_sent` bytes
    /// of the (default, or set) body, then close.
    pub fn partial(bytes_sent: usize) -> Self {
        Step::new(Action::Partial {
            bytes_sent,
            reply: None,
        })
    }
    /// `kind = "slow"`: the head, then the body `chunk` bytes every `interval`.
    pub fn slow(chunk: usize, interval: std::time::Duration) -> Self {
        Step::new(Action::Slow {
            chunk,
            interval: interval.as_secs_f64(),
            reply: None,
        })
    }
    /// How many requests this step consumes (`times`, default 1).
    pub fn times(mut self, times: u32) -> Self {
        self.times = times;
        self
    }
    /// The chance the action applies to each request it consumes (seeded; default 1.0).
    pub fn probability(mut self, probability: f64) -> Self {
        self.probability = probability;
        self
    }
    /// Sets the reply's status. Panics, at the caller's line, on a step without a reply
    /// (`hang`, `reset`, `close`, `malformed`).
    #[track_caller]
    pub fn status(mut self, status: u16) -> Self {
        self.reply_mut("status").status = Some(status);
        self
    }
    /// Adds a reply header (in order). Panics like [`Step::status`].
    #[track_caller]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.reply_mut("header")
            .headers
            .push((name.to_owned(), value.to_owned()));
        self
    }
    /// Sets the reply body. Panics like [`Step::status`].
    #[track_caller]
    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.reply_mut("body").body = Some(Body::Inline(body.into()));
        self
    }

    #[track_caller]
    fn reply_mut(&mut self, what: &str) -> &mut Reply {
        let kind = self.action.kind();
        match &mut self.action {
            Action::Respond(reply) => reply,
            Action::Delay { reply, .. }
            | Action::Partial { reply, .. }
            | Action::Slow { reply, .. } => reply.get_or_insert_with(Reply::default),
            Action::Hang | Action::Reset | Action::Close | Action::Malformed { .. } => {
                panic!("Step::{what}: a {kind:?} step sends no reply")
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing

impl Scenario {
    /// Parses a scenario document. `origin` names it in error messages (usually the file name);
    /// `body_file` / `instance_file` paths are relative to `origin`'s folder and must stay inside
    /// it ([`FileAccess::beside`]; see [`crate::files`]).
    pub fn from_toml_str(s: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        Scenario::from_toml_str_with(s, origin, &FileAccess::beside(origin))
    }

    /// [`Scenario::from_toml_str`] with the folders files may come from given explicitly.
    pub fn from_toml_str_with(
        s: &str,
        origin: &str,
        files: &FileAccess,
    ) -> Result<Scenario, ScenarioError> {
        let ctx = Ctx::new(s, origin, files);
        let de = toml::Deserializer::parse(s).map_err(|e| ctx.toml_error(&[], e))?;
        let raw: RawScenario = serde_path_to_error::deserialize(de)
            .map_err(|e| ctx.path_error(e.path(), e.inner().clone()))?;
        raw.validate(&ctx)
    }

    /// Reads and parses a scenario file; its files come from its own folder.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        Scenario::from_file_allowing(path, &[])
    }

    /// [`Scenario::from_file`], also allowing files from the folders `allow` (`--allow-files`).
    pub fn from_file_allowing(
        path: impl AsRef<Path>,
        allow: &[PathBuf],
    ) -> Result<Scenario, ScenarioError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let text = crate::files::read_regular_text(path, crate::files::MAX_INPUT_FILE_BYTES)
            .map_err(|source| ScenarioError::Read {
                origin: origin.clone(),
                source,
            })?;
        let files = FileAccess::beside(path).allow(allow.iter().cloned());
        Scenario::from_toml_str_with(&text, &origin, &files)
    }

    /// Parses the table `section` of a larger TOML document (e.g. the `[fake]` table of a
    /// conformance scenario) with line numbers of the whole document. Keys outside `section` are
    /// not looked at. `Ok(None)` when the document has no such table. Files come from `origin`'s
    /// folder.
    pub fn from_toml_section(
        s: &str,
        origin: &str,
        section: &str,
    ) -> Result<Option<Scenario>, ScenarioError> {
        let files = FileAccess::beside(origin);
        let ctx = Ctx::new(s, origin, &files);
        let de = toml::Deserializer::parse(s).map_err(|e| ctx.toml_error(&[], e))?;
        let seed = SectionSeed { section };
        let mut track = serde_path_to_error::Track::new();
        let raw = seed
            .deserialize(serde_path_to_error::Deserializer::new(de, &mut track))
            .map_err(|e| ctx.path_error(&track.path(), e))?;
        match raw {
            Some(raw) => raw.validate(&ctx).map(Some),
            None => Ok(None),
        }
    }

    /// The scenario as TOML, in the file format (effective configuration dumps).
    pub fn to_toml_string(&self) -> String {
        toml::to_string(&ScenarioToml::from(self)).unwrap_or_default()
    }

    /// The scenario as a TOML file that needs nothing of where it came from, for a scenario
    /// file written to `dir`: every file it loaded (`body_file`, `imds.instance_file`) is
    /// written again, as loaded, to `dir/files/`, and named relative to `dir`, inside the
    /// folder the file may load from.
    pub fn to_self_contained_toml(&self, dir: &Path) -> std::io::Result<String> {
        let files = dir.join(SELF_CONTAINED_FILES);
        let mut copy = self.clone();
        let mut n = 0usize;
        let mut write = |contents: &[u8]| -> std::io::Result<String> {
            std::fs::create_dir_all(&files)?;
            n += 1;
            let name = format!("{SELF_CONTAINED_FILES}/file-{n}");
            std::fs::write(dir.join(&name), contents)?;
            Ok(name)
        };
        for plan in &mut copy.endpoints {
            for step in &mut plan.steps {
                let reply = match &mut step.action {
                    Action::Respond(r) => Some(r),
                    Action::Delay { reply, .. }
                    | Action::Partial { reply, .. }
                    | Action::Slow { reply, .. } => reply.as_mut(),
                    Action::Hang | Action::Reset | Action::Close | Action::Malformed { .. } => None,
                };
                if let Some(Reply {
                    body: Some(Body::File { path, contents }),
                    ..
                }) = reply
                {
                    *path = write(contents)?;
                }
            }
        }
        if let (Some(file), Some(document)) = (
            copy.imds.instance_file.as_mut(),
            copy.imds.instance_document.as_ref(),
        ) {
            *file = write(document.to_string().as_bytes())?;
        }
        Ok(copy.to_toml_string())
    }
}

struct SectionSeed<'a> {
    section: &'a str,
}

impl<'de> DeserializeSeed<'de> for SectionSeed<'_> {
    type Value = Option<RawScenario>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SectionSeed<'_> {
    type Value = Option<RawScenario>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a table")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == self.section {
                found = Some(map.next_value::<RawScenario>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Positions and names for error messages.
struct Ctx<'a> {
    text: &'a str,
    origin: &'a str,
    files: FileReader<'a>,
}

impl<'a> Ctx<'a> {
    fn new(text: &'a str, origin: &'a str, files: &'a FileAccess) -> Self {
        Ctx {
            text,
            origin,
            files: FileReader::new(files),
        }
    }

    fn position(&self, span: Option<Range<usize>>) -> (usize, usize) {
        let Some(span) = span else { return (0, 0) };
        let at = span.start.min(self.text.len());
        let before = &self.text.as_bytes()[..at];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        (line, column)
    }

    fn invalid(&self, span: Option<Range<usize>>, field: String, message: String) -> ScenarioError {
        let (line, column) = self.position(span);
        ScenarioError::Invalid {
            origin: self.origin.to_owned(),
            line,
            column,
            field: if field.is_empty() {
                "(document)".to_owned()
            } else {
                field
            },
            message,
        }
    }

    fn toml_error(&self, prefix: &[String], e: toml::de::Error) -> ScenarioError {
        let mut field = prefix.join(".");
        let message = e.message().trim().to_owned();
        // "unknown field `x`" / "missing field `x`": name the key itself.
        if let Some(name) = message
            .strip_prefix("unknown field `")
            .or_else(|| message.strip_prefix("missing field `"))
            .and_then(|rest| rest.split('`').next())
        {
            field = join_field(&field, name);
        }
        self.invalid(e.span(), field, message)
    }

    fn path_error(&self, path: &serde_path_to_error::Path, e: toml::de::Error) -> ScenarioError {
        let mut segments: Vec<String> = Vec::new();
        for seg in path.iter() {
            match seg {
                serde_path_to_error::Segment::Seq { index } => {
                    if let Some(last) = segments.last_mut() {
                        last.push_str(&format!("[{}]", index + 1));
                    } else {
                        segments.push(format!("[{}]", index + 1));
                    }
                }
                serde_path_to_error::Segment::Map { key } => {
                    // Spanned<T> is deserialized through private keys; they are not fields.
                    if !key.starts_with("$__") {
                        segments.push(key.clone());
                    }
                }
                serde_path_to_error::Segment::Enum { .. }
                | serde_path_to_error::Segment::Unknown => {}
            }
        }
        self.toml_error(&segments, e)
    }

    /// A file named by the scenario, under its [`FileAccess`]; the error names the path.
    fn read_file(&self, path: &str) -> Result<Vec<u8>, String> {
        self.files
            .read(path)
            .map_err(|why| format!("cannot read {path:?}: {why}"))
    }
}

fn join_field(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_owned()
    } else if base.ends_with(name) {
        base.to_owned()
    } else {
        format!("{base}.{name}")
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    seed: Option<u64>,
    goalstate: Option<GoalStateOverrides>,
    imds: Option<Spanned<ImdsOverrides>>,
    #[serde(default)]
    endpoint: Vec<Spanned<RawEndpoint>>,
    rate_limit: Option<Spanned<RateLimit>>,
    #[serde(default)]
    trigger: Vec<Spanned<Trigger>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEndpoint {
    id: Spanned<String>,
    #[serde(default)]
    end: EndPolicy,
    #[serde(default)]
    step: Vec<Spanned<RawStep>>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum StepKind {
    Respond,
    Delay,
    Hang,
    Reset,
    Close,
    Malformed,
    Partial,
    Slow,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    kind: Spanned<StepKind>,
    times: Option<Spanned<u32>>,
    probability: Option<Spanned<f64>>,
    status: Option<Spanned<u16>>,
    preset: Option<Spanned<Preset>>,
    headers: Option<Spanned<Vec<(String, String)>>>,
    body: Option<Spanned<String>>,
    body_file: Option<Spanned<String>>,
    seconds: Option<Spanned<f64>>,
    bytes: Option<Spanned<String>>,
    bytes_sent: Option<Spanned<usize>>,
    chunk: Option<Spanned<usize>>,
    interval: Option<Spanned<f64>>,
}

impl RawScenario {
    fn validate(self, ctx: &Ctx) -> Result<Scenario, ScenarioError> {
        let goalstate = self.goalstate.unwrap_or_default();
        let imds = match self.imds {
            None => ImdsOverrides::default(),
            Some(spanned) => {
                let span = spanned.span();
                let mut imds = spanned.into_inner();
                if let Some(file) = &imds.instance_file {
                    let bytes = ctx.read_file(file).map_err(|message| {
                        ctx.invalid(Some(span.clone()), "imds.instance_file".into(), message)
                    })?;
                    let doc: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
                        ctx.invalid(
                            Some(span.clone()),
                            "imds.instance_file".into(),
                            format!("{file:?} is not a JSON document: {e}"),
                        )
                    })?;
                    if !doc.is_object() {
                        return Err(ctx.invalid(
                            Some(span),
                            "imds.instance_file".into(),
                            format!("{file:?} must hold a JSON object (the instance document)"),
                        ));
                    }
                    imds.instance_document = Some(doc);
                }
                imds
            }
        };

        let mut endpoints = Vec::with_capacity(self.endpoint.len());
        let mut total_steps = 0usize;
        for (i, ep) in self.endpoint.into_iter().enumerate() {
            let field = format!("endpoint[{}]", i + 1);
            let ep_span = ep.span();
            let ep = ep.into_inner();
            if !crate::endpoint::is_valid_pattern(ep.id.get_ref()) {
                return Err(ctx.invalid(
                    Some(ep.id.span()),
                    format!("{field}.id"),
                    format!(
                        "{:?} is not a valid endpoint id or glob (letters, digits, '.', '-', '_', '*', '?'; at most {} characters and {} wildcards)",
                        crate::text::clip(ep.id.get_ref(), 64),
                        crate::endpoint::MAX_PATTERN_LEN,
                        crate::endpoint::MAX_PATTERN_WILDCARDS
                    ),
                ));
            }
            if !crate::endpoint::pattern_matches_any(ep.id.get_ref()) {
                return Err(ctx.invalid(
                    Some(ep.id.span()),
                    format!("{field}.id"),
                    format!(
                        "{:?} matches no endpoint id; expected one of {}",
                        crate::text::clip(ep.id.get_ref(), 64),
                        ENDPOINT_IDS.join(", ")
                    ),
                ));
            }
            if ep.step.is_empty() {
                return Err(ctx.invalid(
                    Some(ep_span),
                    format!("{field}.step"),
                    "a plan needs at least one [[endpoint.step]]".into(),
                ));
            }
            total_steps += ep.step.len();
            if total_steps > MAX_STEPS {
                return Err(ctx.invalid(
                    Some(ep_span),
                    format!("{field}.step"),
                    format!(
                        "a scenario has at most {MAX_STEPS} steps over all plans (use `times`)"
                    ),
                ));
            }
            let mut steps = Vec::with_capacity(ep.step.len());
            for (j, step) in ep.step.into_iter().enumerate() {
                let field = format!("{field}.step[{}]", j + 1);
                steps.push(step.into_inner().validate(ctx, &field)?);
            }
            endpoints.push(EndpointPlan {
                id: ep.id.into_inner(),
                end: ep.end,
                steps,
            });
        }

        let rate_limit = match self.rate_limit {
            None => None,
            Some(rl) => {
                let span = rl.span();
                let rl = rl.into_inner();
                if !(1..=MAX_RATE_REQUESTS).contains(&rl.requests) {
                    return Err(ctx.invalid(
                        Some(span),
                        "rate_limit.requests".into(),
                        format!("must be 1-{MAX_RATE_REQUESTS}, got {}", rl.requests),
                    ));
                }
                if !(rl.window.is_finite() && rl.window > 0.0 && rl.window <= MAX_SECONDS) {
                    return Err(ctx.invalid(
                        Some(span),
                        "rate_limit.window".into(),
                        format!(
                            "must be a positive number of seconds up to {MAX_SECONDS}, got {}",
                            rl.window
                        ),
                    ));
                }
                for (i, pattern) in rl.endpoints.iter().enumerate() {
                    if !crate::endpoint::pattern_matches_any(pattern) {
                        return Err(ctx.invalid(
                            Some(span),
                            format!("rate_limit.endpoints[{}]", i + 1),
                            format!(
                                "{:?} matches no endpoint id",
                                crate::text::clip(pattern, 64)
                            ),
                        ));
                    }
                }
                Some(rl)
            }
        };

        let mut triggers = Vec::with_capacity(self.trigger.len());
        for (i, t) in self.trigger.into_iter().enumerate() {
            let span = t.span();
            let t = t.into_inner();
            if !(t.after.is_finite() && t.after >= 0.0 && t.after <= MAX_SECONDS) {
                return Err(ctx.invalid(
                    Some(span),
                    format!("trigger[{}].after", i + 1),
                    format!(
                        "must be a number of seconds from 0 to {MAX_SECONDS}, got {}",
                        t.after
                    ),
                ));
            }
            if t.action == TriggerAction::BumpIncarnation
                && let Some(inc) = &goalstate.incarnation
                && inc.parse::<u64>().is_err()
            {
                return Err(ctx.invalid(
                    Some(span),
                    format!("trigger[{}].action", i + 1),
                    format!("bump-incarnation needs a numeric goalstate.incarnation, got {inc:?}"),
                ));
            }
            triggers.push(t);
        }

        Ok(Scenario {
            name: self.name,
            seed: self.seed,
            goalstate,
            imds,
            endpoints,
            rate_limit,
            triggers,
            origin: ctx.origin.to_owned(),
        })
    }
}

impl RawStep {
    fn validate(self, ctx: &Ctx, field: &str) -> Result<Step, ScenarioError> {
        let kind = *self.kind.get_ref();
        let kind_name = match kind {
            StepKind::Respond => "respond",
            StepKind::Delay => "delay",
            StepKind::Hang => "hang",
            StepKind::Reset => "reset",
            StepKind::Close => "close",
            StepKind::Malformed => "malformed",
            StepKind::Partial => "partial",
            StepKind::Slow => "slow",
        };
        let err = |span: Range<usize>, name: &str, msg: String| {
            ctx.invalid(Some(span), format!("{field}.{name}"), msg)
        };

        // Fields a kind does not use are errors, not silently ignored.
        let takes_reply = matches!(
            kind,
            StepKind::Respond | StepKind::Delay | StepKind::Partial | StepKind::Slow
        );
        let unused = |name: &str, span: Option<Range<usize>>, used: bool| match span {
            Some(span) if !used => Err(err(
                span,
                name,
                format!("not used by kind = \"{kind_name}\""),
            )),
            _ => Ok(()),
        };
        unused(
            "status",
            self.status.as_ref().map(Spanned::span),
            takes_reply,
        )?;
        unused(
            "preset",
            self.preset.as_ref().map(Spanned::span),
            takes_reply,
        )?;
        unused(
            "headers",
            self.headers.as_ref().map(Spanned::span),
            takes_reply,
        )?;
        unused("body", self.body.as_ref().map(Spanned::span), takes_reply)?;
        unused(
            "body_file",
            self.body_file.as_ref().map(Spanned::span),
            takes_reply,
        )?;
        unused(
            "seconds",
            self.seconds.as_ref().map(Spanned::span),
            kind == StepKind::Delay,
        )?;
        unused(
            "bytes",
            self.bytes.as_ref().map(Spanned::span),
            kind == StepKind::Malformed,
        )?;
        unused(
            "bytes_sent",
            self.bytes_sent.as_ref().map(Spanned::span),
            kind == StepKind::Partial,
        )?;
        unused(
            "chunk",
            self.chunk.as_ref().map(Spanned::span),
            kind == StepKind::Slow,
        )?;
        unused(
            "interval",
            self.interval.as_ref().map(Spanned::span),
            kind == StepKind::Slow,
        )?;

        let times = match &self.times {
            Some(t) if !(1..=MAX_TIMES).contains(t.get_ref()) => {
                return Err(err(
                    t.span(),
                    "times",
                    format!("must be 1-{MAX_TIMES}, got {}", t.get_ref()),
                ));
            }
            Some(t) => *t.get_ref(),
            None => 1,
        };
        let probability = match &self.probability {
            Some(p) if !(0.0..=1.0).contains(p.get_ref()) => {
                return Err(err(
                    p.span(),
                    "probability",
                    format!("must be between 0.0 and 1.0, got {}", p.get_ref()),
                ));
            }
            Some(p) => *p.get_ref(),
            None => 1.0,
        };

        let reply = if takes_reply {
            let mut reply = Reply {
                status: None,
                preset: self.preset.as_ref().map(|p| *p.get_ref()),
                headers: Vec::new(),
                body: None,
            };
            if let Some(status) = &self.status {
                if !(100..=599).contains(status.get_ref()) {
                    return Err(err(
                        status.span(),
                        "status",
                        format!("must be an HTTP status 100..=599, got {}", status.get_ref()),
                    ));
                }
                reply.status = Some(*status.get_ref());
            }
            if let Some(headers) = self.headers {
                let span = headers.span();
                for (name, value) in headers.into_inner() {
                    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                        return Err(err(
                            span,
                            "headers",
                            format!("{name:?} is not a valid header name"),
                        ));
                    }
                    if http::HeaderValue::from_str(&value).is_err() {
                        return Err(err(
                            span,
                            "headers",
                            format!("the value of {name:?} is not a valid header value"),
                        ));
                    }
                    if name.eq_ignore_ascii_case("content-length")
                        || name.eq_ignore_ascii_case("transfer-encoding")
                    {
                        return Err(err(
                            span,
                            "headers",
                            format!(
                                "{name:?} is computed by the fake; use kind = \"malformed\" for raw bytes"
                            ),
                        ));
                    }
                    reply.headers.push((name, value));
                }
            }
            match (self.body, self.body_file) {
                (Some(_), Some(file)) => {
                    return Err(err(
                        file.span(),
                        "body_file",
                        "give either body or body_file, not both".into(),
                    ));
                }
                (Some(body), None) => reply.body = Some(Body::Inline(body.into_inner())),
                (None, Some(file)) => {
                    let span = file.span();
                    let path = file.into_inner();
                    let contents = ctx
                        .read_file(&path)
                        .map_err(|message| err(span, "body_file", message))?;
                    reply.body = Some(Body::File { path, contents });
                }
                (None, None) => {}
            }
            let given = reply.status.is_some()
                || reply.preset.is_some()
                || !reply.headers.is_empty()
                || reply.body.is_some();
            if kind == StepKind::Respond && reply.status.is_none() && reply.preset.is_none() {
                return Err(err(
                    self.kind.span(),
                    "status",
                    "kind = \"respond\" needs a status or a preset".into(),
                ));
            }
            if given && reply.status.is_none() && reply.preset.is_none() {
                return Err(err(
                    self.kind.span(),
                    "status",
                    "headers/body need a status or a preset".into(),
                ));
            }
            given.then_some(reply)
        } else {
            None
        };

        let positive = |v: &Option<Spanned<f64>>, name: &str, allow_zero: bool| match v {
            None => Err(err(
                self.kind.span(),
                name,
                format!("required for kind = \"{kind_name}\""),
            )),
            Some(s) => {
                let x = *s.get_ref();
                if x.is_finite() && (x > 0.0 || (allow_zero && x == 0.0)) && x <= MAX_SECONDS {
                    Ok(x)
                } else {
                    Err(err(
                        s.span(),
                        name,
                        format!(
                            "must be a number of seconds {} 0 and at most {MAX_SECONDS}, got {x}",
                            if allow_zero { ">=" } else { ">" }
                        ),
                    ))
                }
            }
        };

        let action = match kind {
            StepKind::Respond => Action::Respond(reply.unwrap_or_default()),
            StepKind::Delay => Action::Delay {
                seconds: positive(&self.seconds, "seconds", true)?,
                reply,
            },
            StepKind::Hang => Action::Hang,
            StepKind::Reset => Action::Reset,
            StepKind::Close => Action::Close,
            StepKind::Malformed => match self.bytes {
                Some(b) => Action::Malformed {
                    bytes: b.into_inner(),
                },
                None => {
                    return Err(err(
                        self.kind.span(),
                        "bytes",
                        "required for kind = \"malformed\" (the raw bytes to send)".into(),
                    ));
                }
            },
            StepKind::Partial => match self.bytes_sent {
                Some(n) => Action::Partial {
                    bytes_sent: n.into_inner(),
                    reply,
                },
                None => {
                    return Err(err(
                        self.kind.span(),
                        "bytes_sent",
                        "required for kind = \"partial\" (body bytes sent before closing)".into(),
                    ));
                }
            },
            StepKind::Slow => {
                let chunk = match &self.chunk {
                    Some(c) if *c.get_ref() >= 1 => *c.get_ref(),
                    Some(c) => {
                        return Err(err(c.span(), "chunk", "must be at least 1 byte".into()));
                    }
                    None => {
                        return Err(err(
                            self.kind.span(),
                            "chunk",
                            "required for kind = \"slow\" (bytes per write)".into(),
                        ));
                    }
                };
                Action::Slow {
                    chunk,
                    interval: positive(&self.interval, "interval", false)?,
                    reply,
                }
            }
        };
        Ok(Step {
            action,
            times,
            probability,
        })
    }
}

// ---------------------------------------------------------------------------------------------
/// The folder, beside a self-contained scenario file, of the files it loads.
const SELF_CONTAINED_FILES: &str = "files";

// Serialization back to the file format (print-config)

/// Serializes a scenario in the file format (for embedding in other documents).
pub(crate) fn serialize_scenario<S: serde::Serializer>(
    scenario: &Scenario,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    ScenarioToml::from(scenario).serialize(serializer)
}

#[derive(Serialize)]
struct ScenarioToml<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    goalstate: &'a GoalStateOverrides,
    imds: &'a ImdsOverrides,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_limit: Option<&'a RateLimit>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    trigger: &'a Vec<Trigger>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    endpoint: Vec<EndpointToml<'a>>,
}

#[derive(Serialize)]
struct EndpointToml<'a> {
    id: &'a str,
    end: EndPolicy,
    step: Vec<StepToml<'a>>,
}

#[derive(Serialize, Default)]
struct StepToml<'a> {
    kind: &'static str,
    times: u32,
    probability: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preset: Option<Preset>,
    #[serde(skip_serializing_if = "Option::is_none")]
    headers: Option<&'a Vec<(String, String)>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_file: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes_sent: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    chunk: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<f64>,
}

impl<'a> From<&'a Scenario> for ScenarioToml<'a> {
    fn from(s: &'a Scenario) -> Self {
        ScenarioToml {
            name: s.name.as_deref(),
            seed: s.seed,
            goalstate: &s.goalstate,
            imds: &s.imds,
            rate_limit: s.rate_limit.as_ref(),
            trigger: &s.triggers,
            endpoint: s
                .endpoints
                .iter()
                .map(|ep| EndpointToml {
                    id: &ep.id,
                    end: ep.end,
                    step: ep.steps.iter().map(StepToml::from).collect(),
                })
                .collect(),
        }
    }
}

impl<'a> From<&'a Step> for StepToml<'a> {
    fn from(step: &'a Step) -> Self {
        let mut out = StepToml {
            kind: step.action.kind(),
            times: step.times,
            probability: step.probability,
            ..StepToml::default()
        };
        let reply = match &step.action {
            Action::Respond(r) => Some(r),
            Action::Delay { seconds, reply } => {
                out.seconds = Some(*seconds);
                reply.as_ref()
            }
            Action::Hang | Action::Reset | Action::Close => None,
            Action::Malformed { bytes } => {
                out.bytes = Some(bytes);
                None
            }
            Action::Partial { bytes_sent, reply } => {
                out.bytes_sent = Some(*bytes_sent);
                reply.as_ref()
            }
            Action::Slow {
                chunk,
                interval,
                reply,
            } => {
                out.chunk = Some(*chunk);
                out.interval = Some(*interval);
                reply.as_ref()
            }
        };
        if let Some(r) = reply {
            out.status = r.status;
            out.preset = r.preset;
            out.headers = (!r.headers.is_empty()).then_some(&r.headers);
            match &r.body {
                Some(Body::Inline(s)) => out.body = Some(s),
                Some(Body::File { path, .. }) => out.body_file = Some(path),
                None => {}
            }
        }
        out
    }
}
