//! The step kinds: what each does (an [`Action`] variant with its typed fields), and all a kind
//! adds to the scenario format, in one place: its fields in a file (read, refused when another
//! kind gives them, written back), their rules, and its builder constructor. Besides this file,
//! a new kind is a row in `journal::answer_kinds!` (its spelling and how it reaches the client,
//! from which every class of it derives, the conformance model's included) and its act in
//! `server::respond`.

use serde::Serialize;
use toml::Spanned;

use super::rules::{self, or_panic};
use super::*;
use crate::journal::{Delivery, StepKind};

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
    /// The step's `kind` (also the journal's `answer.kind`); always one of
    /// [`AnswerKind::STEP_KINDS`].
    pub fn kind(&self) -> AnswerKind {
        match self {
            Action::Respond(_) => AnswerKind::Respond,
            Action::Delay { .. } => AnswerKind::Delay,
            Action::Hang => AnswerKind::Hang,
            Action::Reset => AnswerKind::Reset,
            Action::Close => AnswerKind::Close,
            Action::Malformed { .. } => AnswerKind::Malformed,
            Action::Partial { .. } => AnswerKind::Partial,
            Action::Slow { .. } => AnswerKind::Slow,
        }
    }

    /// The scripted reply the step answers with; `None` for the default answer or a kind that
    /// sends no reply.
    pub fn reply(&self) -> Option<&Reply> {
        match self {
            Action::Respond(reply) => Some(reply),
            Action::Delay { reply, .. }
            | Action::Partial { reply, .. }
            | Action::Slow { reply, .. } => reply.as_ref(),
            Action::Hang | Action::Reset | Action::Close | Action::Malformed { .. } => None,
        }
    }

    /// The seconds the fake waits before it answers, for a kind whose answer comes after a
    /// scripted wait ([`Delivery::AfterWait`]).
    pub fn scripted_wait(&self) -> Option<f64> {
        match self {
            Action::Delay { seconds, .. } => Some(*seconds),
            Action::Respond(_)
            | Action::Hang
            | Action::Reset
            | Action::Close
            | Action::Malformed { .. }
            | Action::Partial { .. }
            | Action::Slow { .. } => None,
        }
    }

    /// Seconds the step holds a client whose requests time out after `timeout` before its
    /// answer (or the timeout) ends the request: its scripted wait, or the whole timeout for an
    /// answer dribbled or never given; 0 for one at once.
    pub fn held_seconds(&self, timeout: f64) -> f64 {
        match self.kind().delivery() {
            Delivery::AfterWait => self.scripted_wait().map_or(timeout, |s| s.min(timeout)),
            Delivery::OverTime | Delivery::Never => timeout,
            Delivery::AtOnce | Delivery::Broken(_) => 0.0,
        }
    }

    /// Where the kind keeps its reply, when it sends one: `Some(None)` is a kind that would
    /// answer with the default answer.
    fn reply_slot(&mut self) -> Option<ReplySlot<'_>> {
        match self {
            Action::Respond(reply) => Some(ReplySlot::Always(reply)),
            Action::Delay { reply, .. }
            | Action::Partial { reply, .. }
            | Action::Slow { reply, .. } => Some(ReplySlot::Optional(reply)),
            Action::Hang | Action::Reset | Action::Close | Action::Malformed { .. } => None,
        }
    }

    /// The scripted reply, to change in place (a loaded body written out again).
    pub(super) fn scripted_reply_mut(&mut self) -> Option<&mut Reply> {
        match self.reply_slot()? {
            ReplySlot::Always(reply) => Some(reply),
            ReplySlot::Optional(reply) => reply.as_mut(),
        }
    }

    /// The reply the builder sets fields of (an empty one for a kind answering by default);
    /// `None` for a kind that sends no reply.
    pub(super) fn reply_or_insert(&mut self) -> Option<&mut Reply> {
        match self.reply_slot()? {
            ReplySlot::Always(reply) => Some(reply),
            ReplySlot::Optional(reply) => Some(reply.get_or_insert_with(Reply::default)),
        }
    }

    /// The kind's own fields by the file rules: the failing field's name and what is wrong.
    pub(super) fn check_fields(&self) -> Result<(), (&'static str, String)> {
        match self {
            Action::Delay { seconds, .. } => {
                rules::seconds(*seconds, true).map_err(|m| ("seconds", m))
            }
            Action::Slow {
                chunk, interval, ..
            } => {
                rules::chunk(*chunk).map_err(|m| ("chunk", m))?;
                rules::seconds(*interval, false).map_err(|m| ("interval", m))
            }
            Action::Respond(_)
            | Action::Hang
            | Action::Reset
            | Action::Close
            | Action::Malformed { .. }
            | Action::Partial { .. } => Ok(()),
        }
    }
}

enum ReplySlot<'a> {
    Always(&'a mut Reply),
    Optional(&'a mut Option<Reply>),
}

/// Whether a step of `kind` answers with a reply (status, preset, headers, body).
pub(super) fn takes_reply(kind: StepKind) -> bool {
    match kind {
        StepKind::Respond | StepKind::Delay | StepKind::Partial | StepKind::Slow => true,
        StepKind::Hang | StepKind::Reset | StepKind::Close | StepKind::Malformed => false,
    }
}

/// A step table as a scenario file gives it. The fields every kind has are checked by the
/// parser (`RawStep::validate`); the kind's own fields here.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStep {
    pub(super) kind: Spanned<StepKind>,
    pub(super) times: Option<Spanned<u32>>,
    pub(super) probability: Option<Spanned<f64>>,
    pub(super) status: Option<Spanned<u16>>,
    pub(super) preset: Option<Spanned<Preset>>,
    pub(super) headers: Option<Spanned<Vec<(String, String)>>>,
    pub(super) body: Option<Spanned<String>>,
    pub(super) body_file: Option<Spanned<String>>,
    pub(super) seconds: Option<Spanned<f64>>,
    pub(super) bytes: Option<Spanned<String>>,
    pub(super) bytes_sent: Option<Spanned<usize>>,
    pub(super) chunk: Option<Spanned<usize>>,
    pub(super) interval: Option<Spanned<f64>>,
    pub(super) then: Option<Spanned<TriggerAction>>,
}

impl RawStep {
    /// The kinds' own fields with where each was given and whether `kind` uses it (one given
    /// that the kind does not use is an error, not silently ignored).
    pub(super) fn kind_fields(&self, kind: StepKind) -> [(&'static str, Option<Range>, bool); 5] {
        // Named field by field, so a new field does not build without its row below.
        let RawStep {
            seconds,
            bytes,
            bytes_sent,
            chunk,
            interval,
            // Every kind's fields, and the reply's (the parser refuses those): no kind's own.
            kind: _,
            times: _,
            probability: _,
            status: _,
            preset: _,
            headers: _,
            body: _,
            body_file: _,
            then: _,
        } = self;
        [
            ("seconds", span(seconds), kind == StepKind::Delay),
            ("bytes", span(bytes), kind == StepKind::Malformed),
            ("bytes_sent", span(bytes_sent), kind == StepKind::Partial),
            ("chunk", span(chunk), kind == StepKind::Slow),
            ("interval", span(interval), kind == StepKind::Slow),
        ]
    }

    /// What the step does, from its kind's own fields and its checked reply.
    pub(super) fn action(self, kind: StepKind, reply: Option<Reply>) -> Result<Action, FieldError> {
        Ok(match kind {
            StepKind::Respond => Action::Respond(reply.unwrap_or_default()),
            StepKind::Delay => Action::Delay {
                seconds: seconds(kind, self.seconds, "seconds", true)?,
                reply,
            },
            StepKind::Hang => Action::Hang,
            StepKind::Reset => Action::Reset,
            StepKind::Close => Action::Close,
            StepKind::Malformed => Action::Malformed {
                bytes: required(kind, self.bytes, "bytes", Some("the raw bytes to send"))?
                    .into_inner(),
            },
            StepKind::Partial => Action::Partial {
                bytes_sent: required(
                    kind,
                    self.bytes_sent,
                    "bytes_sent",
                    Some("body bytes sent before closing"),
                )?
                .into_inner(),
                reply,
            },
            StepKind::Slow => {
                let chunk = required(kind, self.chunk, "chunk", Some("bytes per write"))?;
                Action::Slow {
                    chunk: by_rule(&chunk, "chunk", rules::chunk)?,
                    interval: seconds(kind, self.interval, "interval", false)?,
                    reply,
                }
            }
        })
    }
}

/// A kind's field that is missing or breaks its rule; the parser adds the file, line and the
/// step's path.
pub(super) struct FieldError {
    /// Where: the value's position, or `None` for the step's `kind` (a missing field).
    pub(super) span: Option<Range>,
    pub(super) name: &'static str,
    pub(super) message: String,
}

/// A field `kind` needs; `why`, when given, says what it is for.
fn required<T>(
    kind: StepKind,
    value: Option<Spanned<T>>,
    name: &'static str,
    why: Option<&str>,
) -> Result<Spanned<T>, FieldError> {
    value.ok_or_else(|| {
        let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
        FieldError {
            span: None,
            name,
            message: format!("required for kind = \"{}\"{why}", kind.as_str()),
        }
    })
}

/// A value checked by its rule.
fn by_rule<T: Copy>(
    value: &Spanned<T>,
    name: &'static str,
    rule: impl FnOnce(T) -> Result<(), String>,
) -> Result<T, FieldError> {
    let v = *value.get_ref();
    rule(v).map(|()| v).map_err(|message| FieldError {
        span: Some(value.span()),
        name,
        message,
    })
}

/// A required duration in seconds (`delay.seconds`, `slow.interval`).
fn seconds(
    kind: StepKind,
    value: Option<Spanned<f64>>,
    name: &'static str,
    allow_zero: bool,
) -> Result<f64, FieldError> {
    let value = required(kind, value, name, None)?;
    by_rule(&value, name, |x| rules::seconds(x, allow_zero))
}

type Range = std::ops::Range<usize>;

/// Where a field was given, if it was.
pub(super) fn span<T>(value: &Option<Spanned<T>>) -> Option<Range> {
    value.as_ref().map(Spanned::span)
}

/// A step as a scenario file is written back (the same fields [`RawStep`] reads).
#[derive(Serialize, Default)]
pub(super) struct StepToml<'a> {
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
    #[serde(skip_serializing_if = "Option::is_none")]
    then: Option<TriggerAction>,
}

impl<'a> From<&'a Step> for StepToml<'a> {
    fn from(step: &'a Step) -> Self {
        let mut out = StepToml {
            kind: step.action.kind().as_str(),
            times: step.times,
            probability: step.probability,
            then: step.then,
            ..StepToml::default()
        };
        match &step.action {
            Action::Delay { seconds, .. } => out.seconds = Some(*seconds),
            Action::Malformed { bytes } => out.bytes = Some(bytes),
            Action::Partial { bytes_sent, .. } => out.bytes_sent = Some(*bytes_sent),
            Action::Slow {
                chunk, interval, ..
            } => {
                out.chunk = Some(*chunk);
                out.interval = Some(*interval);
            }
            Action::Respond(_) | Action::Hang | Action::Reset | Action::Close => {}
        }
        if let Some(r) = step.action.reply() {
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

/// A constructor per kind (`respond` and the presets are the builder's, with the reply's
/// setters).
impl Step {
    /// `kind = "delay"`: wait, then give the default answer. [`Step::status`], [`Step::header`]
    /// or [`Step::body`] script the answer instead (status 200 unless set), as for `partial` and
    /// `slow`. Panics, at the caller's line, on a wait over [`MAX_SECONDS`].
    #[track_caller]
    pub fn delay(wait: std::time::Duration) -> Self {
        let seconds = wait.as_secs_f64();
        or_panic("Step::delay", "seconds", rules::seconds(seconds, true));
        Step::new(Action::Delay {
            seconds,
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
    /// `kind = "slow"`: the head, then the body `chunk` bytes every `interval`. Panics, at the
    /// caller's line, on a `chunk` of 0 or an `interval` of 0 or over [`MAX_SECONDS`].
    #[track_caller]
    pub fn slow(chunk: usize, interval: std::time::Duration) -> Self {
        let interval = interval.as_secs_f64();
        or_panic("Step::slow", "chunk", rules::chunk(chunk));
        or_panic("Step::slow", "interval", rules::seconds(interval, false));
        Step::new(Action::Slow {
            chunk,
            interval,
            reply: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step of each kind, as the file format would give it.
    fn sample(kind: StepKind) -> Action {
        match kind {
            StepKind::Respond => Action::Respond(Reply::default()),
            StepKind::Delay => Action::Delay {
                seconds: 1.0,
                reply: None,
            },
            StepKind::Hang => Action::Hang,
            StepKind::Reset => Action::Reset,
            StepKind::Close => Action::Close,
            StepKind::Malformed => Action::Malformed { bytes: "x".into() },
            StepKind::Partial => Action::Partial {
                bytes_sent: 1,
                reply: None,
            },
            StepKind::Slow => Action::Slow {
                chunk: 1,
                interval: 1.0,
                reply: None,
            },
        }
    }

    /// The facts a kind states in two places agree: the wait the model reads is there exactly
    /// when its row says the answer comes after a wait, and the parser takes reply fields
    /// exactly for a kind that keeps a reply: one written with a reply and read back keeps it
    /// (or the parser would drop it).
    #[test]
    fn a_kinds_facts_agree_with_its_row() {
        for kind in StepKind::ALL {
            let mut action = sample(kind);
            assert_eq!(action.kind(), kind.answer_kind());
            let delivery = action.kind().delivery();
            assert_eq!(
                action.scripted_wait().is_some(),
                delivery == Delivery::AfterWait,
                "{kind:?}"
            );
            let keeps_reply = action.reply_or_insert().map(|r| r.status = Some(500));
            assert_eq!(takes_reply(kind), keeps_reply.is_some(), "{kind:?}");
            let written = Scenario::new()
                .endpoint(
                    "imds.*",
                    EndPolicy::Default,
                    vec![Step::new(action.clone())],
                )
                .to_toml_string();
            let read = Scenario::from_toml_str(&written, "k.toml")
                .unwrap_or_else(|e| panic!("{kind:?}: {e}\n{written}"));
            assert_eq!(read.endpoints[0].steps[0].action, action, "{kind:?}");
            // An answer at once is a reply whose status the model reads (`step_cost`).
            if delivery == Delivery::AtOnce {
                assert!(takes_reply(kind), "{kind:?}");
            }
        }
    }
}
