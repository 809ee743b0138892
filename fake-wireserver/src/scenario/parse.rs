//! Parsing a scenario file: serde (with spans) into the raw shapes, then a validation pass that
//! checks what serde cannot (per-kind fields, ranges, globs) and reads `body_file`s.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use toml::Spanned;

use super::action::{self, RawStep, span};
use super::rules;
use super::*;
use crate::files::FileReader;
use crate::journal::StepKind;

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

impl RawScenario {
    /// Checks the sections in file order (the first error is the one reported).
    fn validate(self, ctx: &Ctx) -> Result<Scenario, ScenarioError> {
        let goalstate = self.goalstate.unwrap_or_default();
        let imds = match self.imds {
            None => ImdsOverrides::default(),
            Some(imds) => validate_imds(ctx, imds)?,
        };
        let endpoints = validate_endpoints(ctx, self.endpoint, &goalstate)?;
        let rate_limit = match self.rate_limit {
            None => None,
            Some(rl) => Some(validate_rate_limit(ctx, rl)?),
        };
        let triggers = validate_triggers(ctx, self.trigger, &goalstate)?;
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

/// `[imds]`, with the instance document read from `instance_file`.
fn validate_imds(
    ctx: &Ctx,
    spanned: Spanned<ImdsOverrides>,
) -> Result<ImdsOverrides, ScenarioError> {
    let span = spanned.span();
    let mut imds = spanned.into_inner();
    if let Some(file) = &imds.instance_file {
        let err = |message| ctx.invalid(Some(span.clone()), "imds.instance_file".into(), message);
        let bytes = ctx.read_file(file).map_err(err)?;
        let doc: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| err(format!("{file:?} is not a JSON document: {e}")))?;
        if !doc.is_object() {
            return Err(err(format!(
                "{file:?} must hold a JSON object (the instance document)"
            )));
        }
        imds.instance_document = Some(doc);
    }
    Ok(imds)
}

/// `[[endpoint]]`s and their steps (with the bound on steps across all of them).
fn validate_endpoints(
    ctx: &Ctx,
    raw: Vec<Spanned<RawEndpoint>>,
    goalstate: &GoalStateOverrides,
) -> Result<Vec<EndpointPlan>, ScenarioError> {
    let mut endpoints = Vec::with_capacity(raw.len());
    let mut total_steps = 0usize;
    for (i, ep) in raw.into_iter().enumerate() {
        let field = format!("endpoint[{}]", i + 1);
        let ep_span = ep.span();
        let ep = ep.into_inner();
        rules::pattern(ep.id.get_ref())
            .map_err(|m| ctx.invalid(Some(ep.id.span()), format!("{field}.id"), m))?;
        if ep.step.is_empty() {
            return Err(ctx.invalid(
                Some(ep_span),
                format!("{field}.step"),
                rules::EMPTY_PLAN.into(),
            ));
        }
        total_steps += ep.step.len();
        rules::total_steps(total_steps)
            .map_err(|m| ctx.invalid(Some(ep_span.clone()), format!("{field}.step"), m))?;
        let mut steps = Vec::with_capacity(ep.step.len());
        for (j, step) in ep.step.into_iter().enumerate() {
            let field = format!("{field}.step[{}]", j + 1);
            steps.push(step.into_inner().validate(ctx, &field, goalstate)?);
        }
        endpoints.push(EndpointPlan {
            id: ep.id.into_inner(),
            end: ep.end,
            steps,
        });
    }
    Ok(endpoints)
}

/// `[rate_limit]`.
fn validate_rate_limit(ctx: &Ctx, rl: Spanned<RateLimit>) -> Result<RateLimit, ScenarioError> {
    let span = rl.span();
    let rl = rl.into_inner();
    let err = |field: String, message| ctx.invalid(Some(span.clone()), field, message);
    rules::rate_requests(rl.requests).map_err(|m| err("rate_limit.requests".into(), m))?;
    rules::rate_window(rl.window).map_err(|m| err("rate_limit.window".into(), m))?;
    for (i, pattern) in rl.endpoints.iter().enumerate() {
        rules::rate_limited_pattern(pattern)
            .map_err(|m| err(format!("rate_limit.endpoints[{}]", i + 1), m))?;
    }
    Ok(rl)
}

/// `[[trigger]]`s (`bump-incarnation` needs a given `goalstate.incarnation` to be a number).
fn validate_triggers(
    ctx: &Ctx,
    raw: Vec<Spanned<Trigger>>,
    goalstate: &GoalStateOverrides,
) -> Result<Vec<Trigger>, ScenarioError> {
    let mut triggers = Vec::with_capacity(raw.len());
    for (i, t) in raw.into_iter().enumerate() {
        let span = t.span();
        let t = t.into_inner();
        let err = |name: &str, message| {
            ctx.invalid(
                Some(span.clone()),
                format!("trigger[{}].{name}", i + 1),
                message,
            )
        };
        rules::trigger_after(t.after).map_err(|m| err("after", m))?;
        if t.action == TriggerAction::BumpIncarnation {
            rules::bump_incarnation(goalstate.incarnation.as_deref())
                .map_err(|m| err("action", m))?;
        }
        triggers.push(t);
    }
    Ok(triggers)
}

/// Where a step stands, for its error messages: the step's field path (`endpoint[1].step[2]`)
/// and its kind with the kind's position (what a missing field is reported at).
struct StepAt<'c, 'a> {
    ctx: &'c Ctx<'a>,
    field: &'c str,
    kind: StepKind,
    kind_span: Range<usize>,
}

impl StepAt<'_, '_> {
    fn err(&self, span: Range<usize>, name: &str, message: String) -> ScenarioError {
        self.ctx
            .invalid(Some(span), format!("{}.{name}", self.field), message)
    }

    /// A given field the kind does not use is an error, not silently ignored.
    fn unused(
        &self,
        name: &str,
        span: Option<Range<usize>>,
        used: bool,
    ) -> Result<(), ScenarioError> {
        match span {
            Some(span) if !used => Err(self.err(
                span,
                name,
                format!("not used by kind = \"{}\"", self.kind.as_str()),
            )),
            _ => Ok(()),
        }
    }

    /// A value checked by its rule (an error at the value's position).
    fn check<T: Copy>(
        &self,
        value: &Spanned<T>,
        name: &str,
        rule: impl FnOnce(T) -> Result<(), String>,
    ) -> Result<T, ScenarioError> {
        let v = *value.get_ref();
        rule(v)
            .map(|()| v)
            .map_err(|m| self.err(value.span(), name, m))
    }

    /// [`StepAt::check`] for an optional field.
    fn checked<T: Copy>(
        &self,
        value: &Option<Spanned<T>>,
        name: &str,
        rule: impl FnOnce(T) -> Result<(), String>,
    ) -> Result<Option<T>, ScenarioError> {
        value
            .as_ref()
            .map(|v| self.check(v, name, rule))
            .transpose()
    }
}

/// The reply fields of a step, as given.
struct RawReply {
    status: Option<Spanned<u16>>,
    preset: Option<Spanned<Preset>>,
    headers: Option<Spanned<Vec<(String, String)>>>,
    body: Option<Spanned<String>>,
    body_file: Option<Spanned<String>>,
}

impl RawReply {
    /// The reply, or `None` when no reply field was given (the kind's default answer).
    fn validate(self, at: &StepAt) -> Result<Option<Reply>, ScenarioError> {
        let mut reply = Reply {
            status: at.checked(&self.status, "status", rules::status)?,
            preset: self.preset.as_ref().map(|p| *p.get_ref()),
            headers: Vec::new(),
            body: None,
        };
        if let Some(headers) = self.headers {
            let span = headers.span();
            for (name, value) in headers.into_inner() {
                rules::header(&name, &value).map_err(|m| at.err(span.clone(), "headers", m))?;
                reply.headers.push((name, value));
            }
        }
        reply.body = body(at, self.body, self.body_file)?;
        let given = reply.status.is_some()
            || reply.preset.is_some()
            || !reply.headers.is_empty()
            || reply.body.is_some();
        let answers = reply.status.is_some() || reply.preset.is_some();
        if at.kind == StepKind::Respond && !answers {
            return Err(at.err(
                at.kind_span.clone(),
                "status",
                "kind = \"respond\" needs a status or a preset".into(),
            ));
        }
        if given && !answers {
            return Err(at.err(
                at.kind_span.clone(),
                "status",
                "headers/body need a status or a preset".into(),
            ));
        }
        Ok(given.then_some(reply))
    }
}

/// A reply's body: inline or read from `body_file`, never both.
fn body(
    at: &StepAt,
    inline: Option<Spanned<String>>,
    file: Option<Spanned<String>>,
) -> Result<Option<Body>, ScenarioError> {
    match (inline, file) {
        (Some(_), Some(file)) => Err(at.err(
            file.span(),
            "body_file",
            "give either body or body_file, not both".into(),
        )),
        (Some(body), None) => Ok(Some(Body::Inline(body.into_inner()))),
        (None, Some(file)) => {
            let span = file.span();
            let path = file.into_inner();
            let contents = at
                .ctx
                .read_file(&path)
                .map_err(|message| at.err(span, "body_file", message))?;
            Ok(Some(Body::File { path, contents }))
        }
        (None, None) => Ok(None),
    }
}

impl RawStep {
    /// Checks in a fixed order (the first error is the one reported): fields the kind does not
    /// use, `times`, `probability`, `then`, the reply, then the kind's own fields.
    fn validate(
        mut self,
        ctx: &Ctx,
        field: &str,
        goalstate: &GoalStateOverrides,
    ) -> Result<Step, ScenarioError> {
        let at = StepAt {
            ctx,
            field,
            kind: *self.kind.get_ref(),
            kind_span: self.kind.span(),
        };
        self.refuse_unused(&at)?;
        let times = at.checked(&self.times, "times", rules::times)?;
        let probability = at.checked(&self.probability, "probability", rules::probability)?;
        let then = at.checked(&self.then, "then", |action| match action {
            TriggerAction::BumpIncarnation => {
                rules::bump_incarnation(goalstate.incarnation.as_deref())
            }
            TriggerAction::ReprovisionAvailable => Ok(()),
        })?;
        let reply = if action::takes_reply(at.kind) {
            self.take_reply().validate(&at)?
        } else {
            None
        };
        let action = self.action(at.kind, reply).map_err(|e| {
            let span = e.span.unwrap_or_else(|| at.kind_span.clone());
            at.err(span, e.name, e.message)
        })?;
        Ok(Step {
            action,
            times: times.unwrap_or(1),
            probability: probability.unwrap_or(1.0),
            then,
        })
    }

    /// A field the kind does not use is an error, not silently ignored.
    fn refuse_unused(&self, at: &StepAt) -> Result<(), ScenarioError> {
        let replies = action::takes_reply(at.kind);
        let reply_fields = [
            ("status", span(&self.status)),
            ("preset", span(&self.preset)),
            ("headers", span(&self.headers)),
            ("body", span(&self.body)),
            ("body_file", span(&self.body_file)),
        ];
        for (name, given) in reply_fields {
            at.unused(name, given, replies)?;
        }
        for (name, given, used) in self.kind_fields(at.kind) {
            at.unused(name, given, used)?;
        }
        Ok(())
    }

    /// The reply's fields, taken out of the step.
    fn take_reply(&mut self) -> RawReply {
        RawReply {
            status: self.status.take(),
            preset: self.preset.take(),
            headers: self.headers.take(),
            body: self.body.take(),
            body_file: self.body_file.take(),
        }
    }
}
