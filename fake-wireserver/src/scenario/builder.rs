//! The builder a Rust test writes a scenario with: [`Scenario::new`], a plan per
//! [`Scenario::endpoint`], and a [`Step`] constructor per kind and preset.

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
