//! The builder a Rust test writes a scenario with: [`Scenario::new`], a plan per
//! [`Scenario::endpoint`], [`Step::respond`] and a constructor per preset, and the setters of a
//! step and its reply (each other kind's constructor is beside its variant, in `action.rs`).
//!
//! A method given an argument a scenario file could not hold (an unknown endpoint id, no
//! steps, `times(0)`, `probability(7.0)`, `rate_limit(0, -1.0, ..)`, status 42, ...) panics at
//! the caller's line with the file format's rule, so a typo cannot make a plan silently inert.
//! What the builder cannot see (a struct literal, a field set by hand) [`Scenario::validate`]
//! catches when the fake starts or loads the scenario.

use super::rules::{self, or_panic};
use super::*;

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
    /// endpoint id, listing the valid ids ([`Scenario::try_endpoint`] returns the error), and
    /// on an empty `steps`.
    #[track_caller]
    pub fn endpoint(self, id: impl IntoEndpointPattern, end: EndPolicy, steps: Vec<Step>) -> Self {
        if steps.is_empty() {
            panic!("Scenario::endpoint: {}", rules::EMPTY_PLAN);
        }
        match self.try_endpoint(id, end, steps) {
            Ok(scenario) => scenario,
            Err(e) => panic!("Scenario::endpoint: {e}"),
        }
    }

    /// [`Scenario::endpoint`], returning a typo'd id as an error instead of panicking (an empty
    /// `steps` is refused when the fake starts or loads the scenario, [`Scenario::validate`]).
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

    /// Adds a trigger `after` seconds from loading. Panics, at the caller's line, unless `after`
    /// is 0 to [`MAX_SECONDS`].
    #[track_caller]
    pub fn trigger(mut self, after: f64, action: TriggerAction) -> Self {
        or_panic("Scenario::trigger", "after", rules::trigger_after(after));
        self.triggers.push(Trigger { after, action });
        self
    }

    /// Sets IMDS's per-VM limit (`[imds] rate_limit`; the platform's 5 per second when never
    /// set). Panics, at the caller's line, unless a number is 1-[`MAX_RATE_REQUESTS`].
    #[track_caller]
    pub fn imds_rate_limit(mut self, limit: ImdsRateLimit) -> Self {
        or_panic("Scenario::imds_rate_limit", "limit", limit.check());
        self.imds.rate_limit = Some(limit);
        self
    }

    /// Throttles each client to `requests` per `window` seconds on `endpoints` ([`EndpointId`]s
    /// or string ids and globs); the rest get the platform's 403. Panics, at the caller's line,
    /// on a string that matches no endpoint id, listing the valid ids, and unless `requests` is
    /// 1-[`MAX_RATE_REQUESTS`] and `window` a positive number of seconds up to [`MAX_SECONDS`].
    ///
    /// [`EndpointId`]: crate::EndpointId
    #[track_caller]
    pub fn rate_limit<P: IntoEndpointPattern>(
        mut self,
        requests: u32,
        window: f64,
        endpoints: impl IntoIterator<Item = P>,
    ) -> Self {
        or_panic(
            "Scenario::rate_limit",
            "requests",
            rules::rate_requests(requests),
        );
        or_panic("Scenario::rate_limit", "window", rules::rate_window(window));
        // A loop, not a closure: #[track_caller] reaches only panics in this function's body.
        let mut patterns = Vec::new();
        for p in endpoints {
            match p.into_endpoint_pattern() {
                Ok(p) => patterns.push(p),
                Err(e) => panic!("Scenario::rate_limit: {e}"),
            }
        }
        let endpoints = patterns;
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
            then: None,
        }
    }
    /// `kind = "respond"` with `status` (headers and body from [`Step::header`], [`Step::body`]).
    /// Panics, at the caller's line, unless `status` is 100..=599.
    #[track_caller]
    pub fn respond(status: u16) -> Self {
        or_panic("Step::respond", "status", rules::status(status));
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
    /// How many requests this step consumes (`times`, default 1). Panics, at the caller's line,
    /// unless `times` is 1-[`MAX_TIMES`].
    #[track_caller]
    pub fn times(mut self, times: u32) -> Self {
        or_panic("Step::times", "times", rules::times(times));
        self.times = times;
        self
    }
    /// The chance the action applies to each request it consumes (seeded; default 1.0).
    /// Panics, at the caller's line, unless it is between 0.0 and 1.0.
    #[track_caller]
    pub fn probability(mut self, probability: f64) -> Self {
        or_panic(
            "Step::probability",
            "probability",
            rules::probability(probability),
        );
        self.probability = probability;
        self
    }
    /// What happens on the platform each time this step answers (`then`): e.g. the goal state
    /// moves on as a health report is answered 410. A `bump-incarnation` needs a numeric
    /// `goalstate.incarnation` ([`Scenario::validate`] checks it).
    pub fn then(mut self, action: TriggerAction) -> Self {
        self.then = Some(action);
        self
    }
    /// Sets the reply's status. Panics, at the caller's line, on a step without a reply
    /// (`hang`, `reset`, `close`, `malformed`) and unless `status` is 100..=599.
    #[track_caller]
    pub fn status(mut self, status: u16) -> Self {
        or_panic("Step::status", "status", rules::status(status));
        self.reply_to_set("status").status = Some(status);
        self
    }
    /// Adds a reply header (in order). Panics like [`Step::status`], and on a header a scenario
    /// file may not give (an invalid name or value, `Content-Length`, `Transfer-Encoding`).
    #[track_caller]
    pub fn header(mut self, name: &str, value: &str) -> Self {
        or_panic("Step::header", "headers", rules::header(name, value));
        self.reply_to_set("header")
            .headers
            .push((name.to_owned(), value.to_owned()));
        self
    }
    /// Sets the reply body. Panics like [`Step::status`].
    #[track_caller]
    pub fn body(mut self, body: impl Into<String>) -> Self {
        self.reply_to_set("body").body = Some(Body::Inline(body.into()));
        self
    }

    #[track_caller]
    fn reply_to_set(&mut self, what: &str) -> &mut Reply {
        let kind = self.action.kind();
        match self.action.reply_or_insert() {
            Some(reply) => reply,
            None => panic!("Step::{what}: a {:?} step sends no reply", kind.as_str()),
        }
    }
}
