//! The checks serde cannot make of a parsed profile ([`super::raw`]), one part at a time, each
//! error naming the file, the line and the field.

use super::raw::*;
use super::*;

/// The checks serde cannot make of a parsed profile, one part at a time, each error naming
/// the file, the line and the field (indexes from 1: `deviation[1].cases`).
pub(super) struct Validate<'a> {
    pub(super) path: &'a Path,
    pub(super) text: &'a str,
}

/// `done`, `done_grace`, `in_progress_continues_to_ready`, `health_report`: how a daemon's
/// run ends.
pub(super) struct Daemon {
    pub(super) done: Done,
    pub(super) done_grace: f64,
    pub(super) in_progress_continues_to_ready: bool,
    pub(super) health_report: HealthReporting,
}

impl Validate<'_> {
    pub(super) fn at(
        &self,
        span: std::ops::Range<usize>,
        field: &str,
        message: String,
    ) -> FileError {
        FileError::at(self.path, self.text, span, Some(field), message)
    }

    /// `fastest_clock`: the fastest agent time the agent keeps up with (the default
    /// [`TimeScale::MAX`]).
    pub(super) fn fastest_clock(&self, raw: Option<&Spanned<u32>>) -> Result<TimeScale, FileError> {
        let Some(raw) = raw else {
            return Ok(TimeScale::new(TimeScale::MAX).unwrap_or(TimeScale::WALL));
        };
        TimeScale::new(*raw.get_ref()).map_err(|e| self.at(raw.span(), "fastest_clock", e))
    }

    /// `name`: a folder's name in the results and snapshots.
    pub(super) fn name(&self, name: &Spanned<String>) -> Result<String, FileError> {
        let text = name.get_ref();
        // Not starting with '.': `..` would lead out of the results and snapshots.
        if text.is_empty()
            || text.starts_with('.')
            || !text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(self.at(
                name.span(),
                "name",
                format!(
                    "{text:?} is not a valid agent name: use letters, digits, '-', '_', '.' (not first)"
                ),
            ));
        }
        Ok(text.clone())
    }

    /// `[commands]`: at least one, each a template whose placeholders that can be unset for
    /// its action sit in optional groups.
    pub(super) fn commands(
        &self,
        file: &CommandsFile,
        attach: Attach,
    ) -> Result<BTreeMap<Action, Command>, FileError> {
        let mut commands = BTreeMap::new();
        for (action, raw) in [
            (Action::Ready, &file.ready),
            (Action::Failure, &file.failure),
            (Action::InProgress, &file.in_progress),
        ] {
            let Some(raw) = raw else { continue };
            let field = format!("commands.{action}");
            let template = Template::parse(raw.get_ref())
                .map_err(|e| self.at(raw.span(), &field, e.to_string()))?;
            for p in Placeholder::ALL {
                let may_be_unset = match p {
                    Placeholder::VmId | Placeholder::Description => true,
                    Placeholder::Reason => action != Action::Failure,
                    Placeholder::ProxyUrl => attach != Attach::Proxy,
                    _ => false,
                };
                if let Some(word) = template.plain_uses(p).first()
                    && may_be_unset
                {
                    return Err(self.at(
                        raw.span(),
                        &field,
                        format!(
                            "{word:?} uses {{{}}}, which can have no value for `{action}`; put it in an optional group, e.g. [\"--flag\", {word:?}]",
                            p.name()
                        ),
                    ));
                }
            }
            let (line, _) = crate::diag::line_column(self.text, raw.span().start);
            commands.insert(
                action,
                Command {
                    template,
                    field,
                    line: Some(line),
                },
            );
        }
        if commands.is_empty() {
            return Err(FileError::whole(
                self.path,
                "field `commands`: at least one of `ready`, `failure`, `in-progress` is required",
            ));
        }
        Ok(commands)
    }

    /// `[env]`: each value a word (placeholders allowed).
    pub(super) fn env(
        &self,
        env: &BTreeMap<String, Spanned<String>>,
    ) -> Result<Vec<(String, Word)>, FileError> {
        env.iter()
            .map(|(key, value)| {
                let word = Word::parse(value.get_ref())
                    .map_err(|e| self.at(value.span(), &format!("env.{key}"), e.to_string()))?;
                Ok((key.clone(), word))
            })
            .collect()
    }

    /// `capabilities`: a report kind claimed needs its command.
    pub(super) fn capabilities(
        &self,
        claimed: &[Capability],
        commands: &BTreeMap<Action, Command>,
    ) -> Result<BTreeSet<Capability>, FileError> {
        let capabilities: BTreeSet<Capability> = claimed.iter().copied().collect();
        for (cap, action) in [
            (Capability::Failure, Action::Failure),
            (Capability::InProgress, Action::InProgress),
        ] {
            if capabilities.contains(&cap) && !commands.contains_key(&action) {
                return Err(FileError::whole(
                    self.path,
                    format!(
                        "field `capabilities`: claims \"{}\" but `commands.{action}` is missing",
                        cap.as_str()
                    ),
                ));
            }
        }
        Ok(capabilities)
    }

    /// `[guest]`: only for an agent that claims `guest`, which needs the sandbox; each declared
    /// reason a text to find.
    pub(super) fn guest(
        &self,
        guest: Option<&Spanned<GuestFile>>,
        capabilities: &BTreeSet<Capability>,
        attach: Attach,
    ) -> Result<GuestPolicy, FileError> {
        let claims = capabilities.contains(&Capability::Guest);
        if claims && attach != Attach::Sandbox {
            return Err(FileError::whole(
                self.path,
                "field `capabilities`: claims \"guest\", which only the sandbox can arrange (attach = \"sandbox\")",
            ));
        }
        let Some(guest) = guest else {
            return Ok(GuestPolicy::default());
        };
        if !claims {
            return Err(self.at(
                guest.span(),
                "guest",
                "[guest] is for an agent that claims \"guest\" in `capabilities`".into(),
            ));
        }
        let mut reasons = BTreeMap::new();
        for (id, text) in &guest.get_ref().reasons {
            if text.get_ref().trim().is_empty() {
                return Err(self.at(
                    text.span(),
                    &format!("guest.reasons.{id}"),
                    "expected the text its failure report's reason contains, not an empty one"
                        .into(),
                ));
            }
            reasons.insert(id.clone(), text.get_ref().clone());
        }
        Ok(GuestPolicy {
            only: guest.get_ref().only,
            reasons,
        })
    }

    /// `[[deviation]]`: a case glob and a reason.
    pub(super) fn deviations(
        &self,
        deviations: &[DeviationFile],
    ) -> Result<Vec<Deviation>, FileError> {
        let mut out = Vec::new();
        for (i, d) in deviations.iter().enumerate() {
            let table = crate::diag::nth("deviation", i);
            let matcher = crate::select::matcher(d.cases.get_ref())
                .map_err(|e| self.at(d.cases.span(), &format!("{table}.cases"), e))?;
            self.reason(&d.reason, &table, "deviation")?;
            out.push(Deviation {
                cases: d.cases.get_ref().clone(),
                matcher,
                verdict: d.verdict,
                reason: d.reason.get_ref().clone(),
            });
        }
        Ok(out)
    }

    /// `[[limitation]]`: property and check globs (checks required: a limitation of every
    /// check would turn any failure on such an input, a wrong exit status, a missing header,
    /// into the declared one) and a reason.
    pub(super) fn limitations(
        &self,
        limitations: &[LimitationFile],
    ) -> Result<Vec<Limitation>, FileError> {
        let mut out = Vec::new();
        for (i, l) in limitations.iter().enumerate() {
            let table = crate::diag::nth("limitation", i);
            let property_matcher = crate::select::matcher(l.property.get_ref())
                .map_err(|e| self.at(l.property.span(), &format!("{table}.property"), e))?;
            let checks = l.checks.get_ref().clone();
            let check_matcher = crate::select::matcher(&checks)
                .map_err(|e| self.at(l.checks.span(), &format!("{table}.checks"), e))?;
            self.reason(&l.reason, &table, "limitation")?;
            out.push(Limitation {
                properties: l.property.get_ref().clone(),
                property_matcher,
                input: l.input,
                endpoint: l.endpoint,
                checks,
                check_matcher,
                verdict: l.verdict,
                reason: l.reason.get_ref().clone(),
            });
        }
        Ok(out)
    }

    /// A `[[deviation]]` or `[[limitation]]` (`kind`, at `table`) needs a reason: it is shown
    /// in every report it shapes.
    pub(super) fn reason(
        &self,
        reason: &Spanned<String>,
        table: &str,
        kind: &str,
    ) -> Result<(), FileError> {
        if reason.get_ref().trim().is_empty() {
            return Err(self.at(
                reason.span(),
                &format!("{table}.reason"),
                format!("a {kind} needs a reason (it is shown in every report)"),
            ));
        }
        Ok(())
    }

    /// `[snapshot]`: the headers transcripts keep and the profile's own redactions, at most
    /// 64 of each.
    pub(super) fn snapshot(
        &self,
        file: &SnapshotFile,
    ) -> Result<crate::snapshot::SnapshotOptions, FileError> {
        let mut snapshot = crate::snapshot::SnapshotOptions::default();
        if let Some(cases) = &file.cases {
            crate::select::glob(cases.get_ref())
                .map_err(|msg| self.at(cases.span(), "snapshot.cases", msg))?;
            snapshot.cases = Some(cases.get_ref().clone());
        }
        if let Some(headers) = &file.headers {
            if headers.get_ref().len() > 64 {
                return Err(self.at(
                    headers.span(),
                    "snapshot.headers",
                    "at most 64 headers".into(),
                ));
            }
            snapshot.headers = Some(
                headers
                    .get_ref()
                    .iter()
                    .map(|h| h.to_ascii_lowercase())
                    .collect(),
            );
        }
        if file.redact.len() > 64 {
            return Err(self.at(
                file.redact[64].span(),
                "snapshot.redact",
                "at most 64 redactions".into(),
            ));
        }
        for (i, r) in file.redact.iter().enumerate() {
            let field = crate::diag::nth("snapshot.redact", i);
            snapshot
                .redact
                .push(match (&r.get_ref().field, &r.get_ref().pattern) {
                    (Some(name), None) => crate::snapshot::Redaction::Field(name.clone()),
                    (None, Some(pattern)) => crate::snapshot::Redaction::Pattern(
                        crate::select::glob(pattern)
                            .map_err(|msg| self.at(r.span(), &field, msg))?
                            .compile_matcher(),
                    ),
                    _ => {
                        return Err(self.at(
                            r.span(),
                            &field,
                            "expected { field = \"NAME\" } or { pattern = \"GLOB\" }".into(),
                        ));
                    }
                });
        }
        Ok(snapshot)
    }

    /// `done`, `done_grace`, `in_progress_continues_to_ready`: only with the sandbox, which
    /// ends the agent's process tree.
    pub(super) fn daemon(
        &self,
        file: &ProfileFile,
        commands: &BTreeMap<Action, Command>,
    ) -> Result<Daemon, FileError> {
        let done = file.done.as_ref().map_or(Done::Exit, |d| *d.get_ref());
        if let Some(d) = &file.done
            && done == Done::TerminalReport
            && file.attach != Attach::Sandbox
        {
            return Err(self.at(
                d.span(),
                "done",
                format!(
                    "\"terminal-report\" needs attach = \"sandbox\" (the sandbox ends the agent's process tree); this profile attaches with {:?}",
                    file.attach.as_str()
                ),
            ));
        }
        let done_grace = match &file.done_grace {
            Some(g) if done != Done::TerminalReport => {
                return Err(self.at(
                    g.span(),
                    "done_grace",
                    "only meaningful with done = \"terminal-report\"".into(),
                ));
            }
            Some(g) => self.seconds_up_to_60(g, "done_grace")?,
            None => DEFAULT_DONE_GRACE,
        };
        let in_progress_continues_to_ready = match &file.in_progress_continues_to_ready {
            Some(flag) if *flag.get_ref() => {
                let field = "in_progress_continues_to_ready";
                if file.attach != Attach::Sandbox {
                    return Err(self.at(
                        flag.span(),
                        field,
                        "only supported with attach = \"sandbox\"".into(),
                    ));
                }
                if !commands.contains_key(&Action::InProgress) {
                    return Err(self.at(
                        flag.span(),
                        field,
                        "needs `commands.in-progress` (the invocation that goes on to Ready)"
                            .into(),
                    ));
                }
                true
            }
            _ => false,
        };
        let health_report = file
            .health_report
            .as_ref()
            .map_or(HealthReporting::Sent, |h| *h.get_ref());
        // An agent that never reports has no in-progress report to go on from.
        if let Some(h) = &file.health_report
            && health_report == HealthReporting::None
            && in_progress_continues_to_ready
        {
            return Err(self.at(
                h.span(),
                "health_report",
                "\"none\" cannot go with in_progress_continues_to_ready = true (no report goes on to Ready)"
                    .into(),
            ));
        }
        Ok(Daemon {
            done,
            done_grace,
            in_progress_continues_to_ready,
            health_report,
        })
    }

    pub(super) fn seconds_up_to_60(&self, v: &Spanned<f64>, field: &str) -> Result<f64, FileError> {
        let x = *v.get_ref();
        if !(x.is_finite() && (0.0..=60.0).contains(&x)) {
            return Err(self.at(
                v.span(),
                field,
                format!("expected seconds between 0 and 60, got {x}"),
            ));
        }
        Ok(x)
    }

    /// `[sandbox]`: `startup` and `private_dirs`, only with attach = "sandbox"; the folders
    /// plain absolute paths below /.
    pub(super) fn sandbox(
        &self,
        file: &SandboxFile,
        attach: Attach,
    ) -> Result<(f64, Vec<PathBuf>), FileError> {
        let startup = match &file.startup {
            Some(s) if attach != Attach::Sandbox => {
                return Err(self.at(
                    s.span(),
                    "sandbox.startup",
                    "only used with attach = \"sandbox\"".into(),
                ));
            }
            Some(s) => self.seconds_up_to_60(s, "sandbox.startup")?,
            None => 0.0,
        };
        let mut private_dirs = Vec::new();
        let Some(dirs) = &file.private_dirs else {
            return Ok((startup, private_dirs));
        };
        if attach != Attach::Sandbox {
            return Err(self.at(
                dirs.span(),
                "sandbox.private_dirs",
                "only used with attach = \"sandbox\"".into(),
            ));
        }
        for dir in dirs.get_ref() {
            let plain = dir.is_absolute()
                && dir
                    .components()
                    .skip(1)
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
                && dir.components().count() > 1;
            if !plain {
                return Err(self.at(
                    dirs.span(),
                    "sandbox.private_dirs",
                    format!(
                        "{} is not an absolute folder path below / without `.` or `..` (e.g. \"/var/log\")",
                        dir.display()
                    ),
                ));
            }
            private_dirs.push(dir.clone());
        }
        Ok((startup, private_dirs))
    }
}

impl Validate<'_> {
    /// `[limits]`: each given value within its range, the others at their defaults.
    pub(super) fn limits(&self, file: &LimitsFile) -> Result<Limits, FileError> {
        let mut limits = Limits::DEFAULT;
        for (name, value) in [
            ("processes", &file.processes),
            ("memory_mib", &file.memory_mib),
            ("file_size_mib", &file.file_size_mib),
            ("open_files", &file.open_files),
        ] {
            let Some(value) = value else { continue };
            limits
                .set(name, *value.get_ref())
                .map_err(|e| self.at(value.span(), &format!("limits.{name}"), e))?;
        }
        Ok(limits)
    }
}

/// `[reactions]` → [`Reactions`], each value within its bounds.
pub(super) fn reactions_from(
    r: &ReactionsFile,
    at: &dyn Fn(std::ops::Range<usize>, &str, String) -> FileError,
) -> Result<Reactions, FileError> {
    let statuses = |list: &Spanned<Vec<u16>>, field: &str| -> Result<BTreeSet<u16>, FileError> {
        for status in list.get_ref() {
            if !(100..=599).contains(status) {
                return Err(at(
                    list.span(),
                    field,
                    format!("{status} is not an HTTP status (100-599)"),
                ));
            }
            if *status == 403 {
                return Err(at(
                    list.span(),
                    field,
                    "403 is decided by `status_403` (\"throttling\", \"throttle-body\" or \"fatal\"), not listed here".into(),
                ));
            }
        }
        Ok(list.get_ref().iter().copied().collect())
    };
    let retryable = statuses(&r.retryable, "reactions.retryable")?;
    let imds_retryable = match &r.imds_retryable {
        Some(list) => Some(statuses(list, "reactions.imds_retryable")?),
        None => None,
    };
    let bounded = |v: &Option<Spanned<f64>>,
                   field: &str,
                   max: f64,
                   unit: &str|
     -> Result<Option<f64>, FileError> {
        v.as_ref()
            .map(|s| {
                crate::bounds::positive_at_most(*s.get_ref(), max, unit)
                    .map_err(|msg| at(s.span(), field, msg))
            })
            .transpose()
    };
    let seconds = |v: &Option<Spanned<f64>>, field: &str| {
        bounded(v, field, crate::bounds::MAX_SECONDS, "seconds")
    };
    let honours_retry_after = retried_statuses(
        r.honours_retry_after.as_ref(),
        "reactions.honours_retry_after",
        r,
        &retryable,
        at,
    )?;
    let never_gives_up_on = never_gives_up_on(r, &retryable, at)?;
    let reactions = Reactions {
        retryable,
        transport_errors: r.transport_errors,
        status_403: r.status_403,
        refresh_goal_state_on_410: r.refresh_goal_state_on_410,
        retry_interval_min: seconds(&r.retry_interval_min, "reactions.retry_interval_min")?,
        retry_interval_max: seconds(&r.retry_interval_max, "reactions.retry_interval_max")?,
        budget: seconds(&r.budget, "reactions.budget")?,
        request_timeout: seconds(&r.request_timeout, "reactions.request_timeout")?,
        max_rate: bounded(
            &r.max_rate,
            "reactions.max_rate",
            crate::bounds::MAX_RATE,
            "requests per second",
        )?,
        imds_retryable,
        imds_status_403: r.imds_status_403,
        imds_retry_interval_min: seconds(
            &r.imds_retry_interval_min,
            "reactions.imds_retry_interval_min",
        )?,
        imds_budget: seconds(&r.imds_budget, "reactions.imds_budget")?,
        imds_unusable_body: r.imds_unusable_body,
        retry_interval_503: seconds(&r.retry_interval_503, "reactions.retry_interval_503")?,
        retry_interval_throttled: seconds(
            &r.retry_interval_throttled,
            "reactions.retry_interval_throttled",
        )?,
        budget_scope: r.budget_scope,
        honours_retry_after,
        never_gives_up_on,
        gives_up: r.gives_up.as_ref().is_none_or(|g| *g.get_ref()),
        tries: tries(r, at)?,
    };

    if let (Some(min), Some(max)) = (reactions.retry_interval_min, &r.retry_interval_max)
        && *max.get_ref() < min
    {
        return Err(at(
            max.span(),
            "reactions.retry_interval_max",
            format!(
                "{} is shorter than retry_interval_min ({min})",
                max.get_ref()
            ),
        ));
    }
    Ok(reactions)
}

/// Attempts per request, at most (afterburn: 11).
const MAX_TRIES: u32 = 1000;
/// Tries of the whole exchange, at most (afterburn: 6).
const MAX_SEQUENCE_TRIES: u32 = 100;

/// `never_gives_up_on`: statuses the agent retries (`retried_statuses`), for an agent that
/// otherwise gives up: `gives_up = false` already covers every status, and one that counts its
/// tries (`tries`) gives up when they are used up.
fn never_gives_up_on(
    r: &ReactionsFile,
    retryable: &BTreeSet<u16>,
    at: &dyn Fn(std::ops::Range<usize>, &str, String) -> FileError,
) -> Result<Vec<u16>, FileError> {
    let field = "reactions.never_gives_up_on";
    let list = retried_statuses(r.never_gives_up_on.as_ref(), field, r, retryable, at)?;
    let contradicted = if r.tries.is_some() {
        Some("an agent that counts its tries (`tries`) gives up when they are used up")
    } else if r.gives_up.as_ref().is_some_and(|g| !*g.get_ref()) {
        Some("`gives_up = false` already says it never gives up on anything")
    } else {
        None
    };
    match (contradicted, &r.never_gives_up_on) {
        (Some(why), Some(v)) if !list.is_empty() => Err(at(v.span(), field, why.into())),
        _ => Ok(list),
    }
}

/// A list of error statuses the agent retries (`honours_retry_after`: a Retry-After on an
/// answer it gives up on has no retry to wait for; `never_gives_up_on`: nor a retry to go on
/// with), as `field` names it.
fn retried_statuses(
    list: Option<&Spanned<Vec<u16>>>,
    field: &str,
    r: &ReactionsFile,
    retryable: &BTreeSet<u16>,
    at: &dyn Fn(std::ops::Range<usize>, &str, String) -> FileError,
) -> Result<Vec<u16>, FileError> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    for status in list.get_ref() {
        if !(400..=599).contains(status) {
            return Err(at(
                list.span(),
                field,
                format!("{status} is not an error status (400-599)"),
            ));
        }
        let retried =
            retryable.contains(status) || (*status == 403 && r.status_403 != Forbidden::Fatal);
        if !retried {
            return Err(at(
                list.span(),
                field,
                format!("{status} is not retried (reactions.retryable, status_403)"),
            ));
        }
    }
    Ok(list.get_ref().clone())
}

/// `tries` and `sequence_tries` → [`Tries`]: counts from 1, `sequence_tries` only beside
/// `tries`, and a backoff to double (`retry_interval_min`).
fn tries(
    r: &ReactionsFile,
    at: &dyn Fn(std::ops::Range<usize>, &str, String) -> FileError,
) -> Result<Option<Tries>, FileError> {
    let count = |v: &Spanned<u32>, field: &str, max: u32| {
        if (1..=max).contains(v.get_ref()) {
            Ok(*v.get_ref())
        } else {
            Err(at(
                v.span(),
                field,
                format!("{} is not a count of attempts from 1 to {max}", v.get_ref()),
            ))
        }
    };
    if let (Some(_), Some(g)) = (&r.tries, &r.gives_up)
        && !*g.get_ref()
    {
        return Err(at(
            g.span(),
            "reactions.gives_up",
            "an agent that counts its tries (`tries`) gives up when they are used up; `gives_up = false` contradicts it".into(),
        ));
    }
    let Some(per_request) = &r.tries else {
        if let Some(s) = &r.sequence_tries {
            return Err(at(
                s.span(),
                "reactions.sequence_tries",
                "needs `tries`, the attempts of each request".into(),
            ));
        }
        return Ok(None);
    };
    if r.retry_interval_min.is_none() {
        return Err(at(
            per_request.span(),
            "reactions.tries",
            "needs `retry_interval_min`, the first sleep between tries (doubling up to `retry_interval_max`)".into(),
        ));
    }
    if r.budget.is_none() {
        return Err(at(
            per_request.span(),
            "reactions.tries",
            "needs `budget`, the seconds its tries take when every answer comes at once (what a refused wireserver, which leaves nothing to count, is judged by)".into(),
        ));
    }
    Ok(Some(Tries {
        per_request: count(per_request, "reactions.tries", MAX_TRIES)?,
        sequences: match &r.sequence_tries {
            Some(s) => count(s, "reactions.sequence_tries", MAX_SEQUENCE_TRIES)?,
            None => 1,
        },
    }))
}

/// `[encoded]` → [`EncodedDialect`]: quote and order must name one of the two dialects (§6.1,
/// §6.2), and the cuts must fit the limits they stand for.
pub(super) fn encoded_dialect(
    e: &EncodedFile,
    at: &dyn Fn(std::ops::Range<usize>, &str, String) -> FileError,
) -> Result<EncodedDialect, FileError> {
    let quote = match e.quote.get_ref().as_str() {
        "'" => Dialect::CloudInit,
        "\"" => Dialect::AzureInit,
        other => {
            return Err(at(
                e.quote.span(),
                "encoded.quote",
                format!(
                    "{other:?} is not a quote the encoded format uses: \"'\" (cloud-init) or '\"' (azure-init)"
                ),
            ));
        }
    };
    let order = match e.order.get_ref().as_str() {
        "cloud-init" => Dialect::CloudInit,
        "azure-init" => Dialect::AzureInit,
        other => {
            return Err(at(
                e.order.span(),
                "encoded.order",
                format!(
                    "{other:?} is not a field order: \"cloud-init\" or \"azure-init\" (docs/protocol.md §6.2)"
                ),
            ));
        }
    };
    if quote != order {
        return Err(at(
            e.order.span(),
            "encoded.order",
            format!(
                "the {} field order with the {} quote {:?}: no producer writes that mix, and the oracle judges only the two dialects of §6.1",
                order.name(),
                quote.name(),
                quote.quote()
            ),
        ));
    }
    let limit = |v: &Option<Spanned<usize>>, field: &str, max: usize, what: &str| match v {
        Some(n) if !(1..=max).contains(n.get_ref()) => Err(at(
            n.span(),
            field,
            format!("{} is outside 1-{max} ({what})", n.get_ref()),
        )),
        Some(n) => Ok(Some(*n.get_ref())),
        None => Ok(None),
    };
    Ok(EncodedDialect {
        dialect: quote,
        timestamp: e.timestamp,
        description_trim: limit(
            &e.description_trim,
            "encoded.description_trim",
            wirecheck_oracle::health::DESCRIPTION_PLATFORM_CAP,
            "characters of a description the platform caps at 4096 bytes",
        )?,
        kvp_cut: limit(
            &e.kvp_cut,
            "encoded.kvp_cut",
            wirecheck_oracle::kvp::VALUE_SIZE - 1,
            "characters of a 2048-byte KVP value with its NUL",
        )?,
    })
}
