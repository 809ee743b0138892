//! Report checks: the health document's shape, state and substatus, the description (an
//! encoded report for failures, the given text for in-progress) and the platform's length limit
//! (docs/protocol.md §4–§6).

use fake_wireserver::EndpointId;
use fake_wireserver::journal::Entry;
use wirecheck_oracle::encoded::{self, EncodedReport, Mode};
use wirecheck_oracle::{HealthReport, HealthState, ReportKind, SubStatus};

use super::dialect::{self, Cut};
use super::{Judgement, Tally, about, clip, line, trimmed};
use crate::agent::{Action, FailureDescription, HealthReporting};
use crate::observe::{Observation, is_health};
use crate::scenario::Run;
use wirecheck_results::{Evidence, Verdict};

/// The platform caps descriptions at this many bytes (docs/protocol.md §4.2): the oracle's
/// number, spelled once.
pub const DESCRIPTION_LIMIT: usize = wirecheck_oracle::health::DESCRIPTION_PLATFORM_CAP;

const DOCUMENTATION_URL: &str = "https://aka.ms/linuxprovisioningerror";

/// Health POSTs with the run they belong to.
fn health_posts<'a>(obs: &'a Observation) -> Vec<(&'a Entry, &'a Run)> {
    obs.journal
        .iter()
        .filter(|e| obs.is_flow_health(e))
        .map(|e| (e, &obs.runs[obs.run_of(e)].run))
        .collect()
}

fn body_excerpt(e: &Entry) -> Option<String> {
    Some(clip(&e.body, 600))
}

pub fn shape(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    // A report on the other flow is not the one the scenario asked for; the other checks do
    // not count it, and this one says why.
    for e in obs
        .journal
        .iter()
        .filter(|e| is_health(e) && !obs.is_flow_health(e))
    {
        t.judged();
        t.fail(
            format!(
                "#{}: a health report on {}, but this scenario tests the {} flow ({})",
                e.seq,
                e.endpoint,
                obs.scenario.agent.protocol.as_str(),
                obs.flow_endpoint()
            ),
            about(line(e), &[e], body_excerpt(e)),
        );
    }
    for (e, run) in health_posts(obs) {
        t.judged();
        if obs.profile.health_report == HealthReporting::None {
            t.fail(
                format!(
                    "#{}: a health report, but {} sends none in this mode (health_report = \"none\")",
                    e.seq, obs.profile.name
                ),
                about(line(e), &[e], body_excerpt(e)),
            );
        }
        let Some(report) = &e.report else {
            t.fail(
                format!("#{}: the fake did not parse this health report", e.seq),
                about(line(e), &[e], body_excerpt(e)),
            );
            continue;
        };
        let want = if e.endpoint == EndpointId::WireserverHealthJson {
            ReportKind::Json
        } else {
            ReportKind::Xml
        };
        if report.kind != want {
            t.fail(
                format!("#{}: a {:?} document on {}", e.seq, report.kind, e.endpoint),
                about(line(e), &[e], body_excerpt(e)),
            );
        }
        // Length findings belong to report.limit.
        let mut findings: Vec<_> = report
            .findings
            .iter()
            .filter(|f| !f.is_length())
            .cloned()
            .collect();
        if cut_report(obs, run, report.description.as_deref().unwrap_or("")) {
            findings = trimmed(&findings, report.description.as_deref().unwrap_or(""));
        }
        // A 410 tells the agent its goal state moved on: a report echoing the old one is the
        // reason for the 410, not a deviation.
        if e.answer.status == Some(410) {
            findings.retain(|f| !f.is_goal_state_mismatch());
        }
        // An agent that does not fetch the goal state again after a 410 (its profile says so;
        // behaviour.refresh judges that) keeps echoing the one it has.
        if !obs.profile.reactions.refresh_goal_state_on_410
            && let Some(gone) = obs.journal.iter().find(|g| {
                g.seq < e.seq
                    && obs.is_flow_health(g)
                    && g.answer.status == Some(410)
                    && obs.run_of(g) == obs.run_of(e)
            })
            && findings.iter().any(|f| f.is_goal_state_mismatch())
        {
            findings.retain(|f| !f.is_goal_state_mismatch());
            t.note(about(
                format!(
                    "#{} echoes the goal state fetched before the 410 on #{}; {} does not refresh it",
                    e.seq, gone.seq, obs.profile.name
                ),
                &[gone, e],
                None,
            ));
        }
        let before = t.has_failures();
        t.findings(&findings, &[e.seq], &format!("report #{}", e.seq));
        if !before && t.has_failures() {
            t.note(about(format!("body of #{}", e.seq), &[e], body_excerpt(e)));
        }
    }
    t.finish("no health report reached the fake")
}

pub fn state(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    for (e, run) in health_posts(obs) {
        let Some(report) = &e.report else { continue };
        t.judged();
        let (state, substatus) = obs.expected_state(run);
        let got_state = report.state.as_ref().map(HealthState::as_str);
        let got_sub = report.substatus.as_ref().map(SubStatus::as_str);
        if report.state.as_ref() != Some(&state) || report.substatus != substatus {
            t.fail(
                format!(
                    "#{}: asked for `{}`, so expected {state}{}; got {}{}",
                    e.seq,
                    run.action,
                    substatus
                        .as_ref()
                        .map(|s| format!("/{s}"))
                        .unwrap_or_default(),
                    got_state.unwrap_or("no state"),
                    got_sub.map(|s| format!("/{s}")).unwrap_or_default()
                ),
                about(line(e), &[e], body_excerpt(e)),
            );
        } else {
            t.note(about(
                format!(
                    "#{} {state}{}",
                    e.seq,
                    substatus.map(|s| format!("/{s}")).unwrap_or_default()
                ),
                &[e],
                None,
            ));
        }
    }
    t.finish("no health report reached the fake")
}

/// The VM id `report` (`None`: the KVP record) must carry ([`Observation::expected_vm_id`]),
/// or `got` when it says the agent did not know it and the agent had no way to know it
/// ([`Observation::may_not_know_vm_id`]).
pub(super) fn expected_vm_id(
    obs: &Observation,
    report: Option<&Entry>,
    got: Option<&str>,
) -> Option<String> {
    match got {
        Some(got) if crate::observe::says_vm_id_unknown(got) && obs.may_not_know_vm_id(report) => {
            Some(got.to_owned())
        }
        _ => obs.expected_vm_id().map(str::to_owned),
    }
}

/// True when the requested failure report cannot fit the platform limit, so the agent must
/// trim it (and may cut the tail fields).
pub(super) fn must_trim(run: &Run) -> bool {
    let size = run.reason.as_ref().map_or(0, String::len)
        + run
            .data
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum::<usize>()
        + 300;
    size > DESCRIPTION_LIMIT
}

/// The cut the profile's `[encoded].description_trim` implies for a failure report.
fn description_cut(obs: &Observation, run: &Run) -> Cut {
    match run.action {
        Action::Failure => {
            dialect::cut_for(run, dialect::declared(obs).and_then(|d| d.description_trim))
        }
        _ => Cut::None,
    }
}

/// True when the failure description `desc` was cut to a limit: the platform's, or the one the
/// profile declares.
pub(super) fn cut_report(obs: &Observation, run: &Run, desc: &str) -> bool {
    must_trim(run) || dialect::was_cut(desc, description_cut(obs, run))
}

pub fn description(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    let mut exception_text = None;
    for (e, asked) in health_posts(obs) {
        let Some(report) = &e.report else { continue };
        t.judged();
        let desc = report.description.as_deref().unwrap_or("");
        // What the flow can carry of the request: XML 1.0 has no form for most C0 controls.
        let carried = super::xml_carried_run(obs, asked);
        let run = &carried;
        let (_, substatus) = obs.expected_state(run);
        match substatus {
            None => {
                if !desc.is_empty() {
                    t.non_strict(
                        format!("#{}: a Ready report carries a description", e.seq),
                        about(line(e), &[e], Some(clip(desc, 300))),
                    );
                }
            }
            Some(SubStatus::Provisioning) => in_progress(&mut t, e, run, desc),
            Some(_) => {
                if obs.profile.failure_description == FailureDescription::ExceptionText {
                    exception_text = exception_text.or(report.exception_class.clone());
                }
                failure(&mut t, obs, e, run, report, desc)
            }
        }
    }
    let mut j = t.finish("no health report reached the fake");
    // Nothing wrong, but nothing of the requested report either: informational, as the
    // profile declares (the exception text is WALA's, not the scenario's reason). In a guest
    // its text was judged against what its profile declares.
    if let (Verdict::Pass, Some(class), None) = (j.verdict, exception_text, &obs.scenario.guest) {
        j.verdict = Verdict::Informational;
        j.reason = Some(format!(
            "{} describes failures with its own exception text ([{class}] ...), not the requested encoded report (failure_description = \"exception-text\")",
            obs.profile.name
        ));
    }
    j
}

fn in_progress(t: &mut Tally, e: &Entry, run: &Run, desc: &str) {
    match run.description.as_deref() {
        Some(wanted) if desc == wanted => t.note(about(
            format!(
                "#{} description is the requested text ({} bytes)",
                e.seq,
                desc.len()
            ),
            &[e],
            None,
        )),
        Some(wanted) if !desc.is_empty() && wanted.starts_with(desc) => t.note(about(
            format!(
                "#{} description is the requested text trimmed from {} to {} bytes",
                e.seq,
                wanted.len(),
                desc.len()
            ),
            &[e],
            None,
        )),
        Some(wanted) => t.fail(
            format!(
                "#{}: the description is not the requested text{}",
                e.seq,
                first_difference(wanted, desc)
            ),
            about(
                line(e),
                &[e],
                Some(format!(
                    "requested: {}\nsent:      {}",
                    clip(wanted, 300),
                    clip(desc, 300)
                )),
            ),
        ),
        None if desc.is_empty() => t.non_strict(
            format!("#{}: an in-progress report without a description", e.seq),
            about(line(e), &[e], None),
        ),
        None => t.note(about(
            format!("#{} the agent's own in-progress description", e.seq),
            &[e],
            Some(clip(desc, 300)),
        )),
    }
}

/// ` (first difference at character N: expected 'x', got 'y')`.
fn first_difference(wanted: &str, got: &str) -> String {
    let mut w = wanted.chars();
    let mut g = got.chars();
    let mut i = 0;
    loop {
        match (w.next(), g.next()) {
            (Some(a), Some(b)) if a == b => i += 1,
            (None, None) => return String::new(),
            (a, b) => {
                let show = |c: Option<char>| c.map_or("the end".to_owned(), |c| format!("{c:?}"));
                return format!(
                    " (first difference at character {i}: expected {}, got {})",
                    show(a),
                    show(b)
                );
            }
        }
    }
}

fn failure(
    t: &mut Tally,
    obs: &Observation,
    e: &Entry,
    run: &Run,
    report: &HealthReport,
    desc: &str,
) {
    let excerpt = Some(clip(desc, 600));
    if obs.profile.failure_description == FailureDescription::ExceptionText {
        exception_text(t, obs, e, report, excerpt);
        return;
    }
    if !encoded::looks_encoded(desc) {
        t.fail(
            format!(
                "#{}: the failure description is not an encoded report (`result=...|...`)",
                e.seq
            ),
            about(line(e), &[e], excerpt),
        );
        return;
    }
    let cut = description_cut(obs, run);
    if let Some(problem) = dialect::cut_problem(desc, cut, "description_trim") {
        t.fail(
            format!("#{}: {problem}", e.seq),
            about(line(e), &[e], excerpt.clone()),
        );
    }
    let trimmed = must_trim(run) || dialect::was_cut(desc, cut);
    if dialect::was_cut(desc, cut) {
        t.note(about(
            format!(
                "#{} the encoded report cut to the declared {} characters ([encoded].description_trim)",
                e.seq,
                desc.chars().count()
            ),
            &[e],
            None,
        ));
    }
    let Some(parsed) = parse_encoded(t, obs, e, desc, trimmed, &excerpt) else {
        return;
    };
    let encoded = EncodedFailure {
        obs,
        e,
        run,
        desc,
        cut,
        trimmed,
        parsed,
        excerpt,
    };
    encoded.findings(t);
    encoded.result_and_reason(t);
    encoded.data(t);
    encoded.tail(t);
}

/// The failure description of an agent whose profile says: exception text, never the requested
/// reason (failure_description = "exception-text").
fn exception_text(
    t: &mut Tally,
    obs: &Observation,
    e: &Entry,
    report: &HealthReport,
    excerpt: Option<String>,
) {
    // Only the shape the oracle recognised passes; an empty or encoded description is not that
    // dialect. In a guest the text is the agent's answer to the fault, judged by what it says.
    if report.exception_class.is_some() && obs.scenario.guest.is_some() {
        reason_part(
            t,
            obs,
            e,
            report.description.as_deref().unwrap_or(""),
            excerpt,
        );
        return;
    }
    match &report.exception_class {
        Some(class) => t.note(about(
            format!(
                "#{} [{class}] ...: {}'s own exception text (failure_description = \"exception-text\"); the requested reason cannot be carried",
                e.seq, obs.profile.name
            ),
            &[e],
            excerpt,
        )),
        None => t.fail(
            format!(
                "#{}: the failure description is not `[ClassName] message` exception text, which the profile declares",
                e.seq
            ),
            about(line(e), &[e], excerpt),
        ),
    }
}

/// The agent's own failure text `got` (a reason, or the whole exception text) must contain
/// what the scenario and, in a guest, the profile declare ([`Observation::expected_reason_parts`]).
fn reason_part(t: &mut Tally, obs: &Observation, e: &Entry, got: &str, excerpt: Option<String>) {
    let parts = match obs.expected_reason_parts() {
        Ok(parts) => parts,
        Err(why) => {
            t.fail(format!("#{}: {why}", e.seq), about(line(e), &[e], excerpt));
            return;
        }
    };
    for part in parts {
        if got.contains(part) {
            t.note(about(
                format!("#{}: its failure text mentions {part:?}", e.seq),
                &[e],
                excerpt.clone(),
            ));
        } else {
            t.fail(
                format!(
                    "#{}: its failure text {:?} does not mention {part:?}",
                    e.seq,
                    clip(got, 200)
                ),
                about(line(e), &[e], excerpt.clone()),
            );
        }
    }
}

/// The encoded report parsed strictly, or leniently when the trim cut it inside a quoted field;
/// `None` (a failure) when it does not parse.
fn parse_encoded(
    t: &mut Tally,
    obs: &Observation,
    e: &Entry,
    desc: &str,
    trimmed: bool,
    excerpt: &Option<String>,
) -> Option<EncodedReport> {
    match dialect::parse(obs, desc, Mode::Strict) {
        Ok(r) => Some(r),
        Err(strict_err) => match dialect::parse(obs, desc, Mode::Lenient) {
            Ok(r) if trimmed && r.truncated => {
                t.note(about(
                    format!(
                        "#{} the encoded report was cut inside a quoted field to fit the limit",
                        e.seq
                    ),
                    &[e],
                    None,
                ));
                Some(r)
            }
            _ => {
                t.fail(
                    format!(
                        "#{}: the encoded report does not parse: {strict_err}",
                        e.seq
                    ),
                    about(line(e), &[e], excerpt.clone()),
                );
                None
            }
        },
    }
}

/// An encoded failure report that parsed, with what it is judged against.
struct EncodedFailure<'a> {
    obs: &'a Observation<'a>,
    e: &'a Entry,
    run: &'a Run,
    desc: &'a str,
    /// The cut the profile declares ([`description_cut`]).
    cut: Cut,
    /// The request cannot fit the platform's limit, or the description was cut to the
    /// declared one ([`must_trim`], [`dialect::was_cut`]).
    trimmed: bool,
    parsed: EncodedReport,
    excerpt: Option<String>,
}

impl EncodedFailure<'_> {
    fn findings(&self, t: &mut Tally) {
        let e = self.e;
        // The fake's lenient parse already carries the same findings; judge the strict ones.
        let findings = if self.trimmed {
            trimmed(&self.parsed.findings, self.desc)
        } else {
            self.parsed.findings.clone()
        };
        t.findings(&findings, &[e.seq], &format!("encoded report #{}", e.seq));
    }

    fn result_and_reason(&self, t: &mut Tally) {
        let (e, run, excerpt) = (self.e, self.run, &self.excerpt);
        let parsed = &self.parsed;
        if parsed.fields.first().map(|(k, v)| (k.as_str(), v.as_str())) != Some(("result", "error"))
        {
            t.fail(
                format!(
                    "#{}: the encoded report must start with result=error",
                    e.seq
                ),
                about(line(e), &[e], excerpt.clone()),
            );
        }
        let chosen_by_agent =
            self.obs.scenario.expect.reason_contains.is_some() || self.obs.scenario.guest.is_some();
        match (parsed.get("reason"), chosen_by_agent, run.action) {
            (None, _, _) => t.fail(
                format!("#{}: the encoded report has no reason", e.seq),
                about(line(e), &[e], excerpt.clone()),
            ),
            (Some(got), true, _) => reason_part(t, self.obs, e, got, excerpt.clone()),
            (Some(got), false, Action::Failure) => {
                let wanted = run.reason.as_deref().unwrap_or("");
                let ok =
                    got == wanted || (self.trimmed && !got.is_empty() && wanted.starts_with(got));
                if !ok {
                    t.fail(
                        format!(
                            "#{}: reason differs from the requested one{}",
                            e.seq,
                            first_difference(wanted, got)
                        ),
                        about(
                            line(e),
                            &[e],
                            Some(format!(
                                "requested: {}\nsent:      {}",
                                clip(wanted, 300),
                                clip(got, 300)
                            )),
                        ),
                    );
                }
            }
            (Some(_), false, _) => {}
        }
    }

    /// Supporting data: every requested pair, in order.
    fn data(&self, t: &mut Tally) {
        let e = self.e;
        let fields = &self.parsed.fields;
        let mut pos = 0usize;
        for (k, v) in &self.run.data {
            match fields[pos..].iter().position(|(fk, _)| fk == k) {
                Some(off) => {
                    let got = &fields[pos + off].1;
                    if got != v && !(self.trimmed && v.starts_with(got.as_str())) {
                        t.fail(
                            format!(
                                "#{}: data {k} differs from the requested value{}",
                                e.seq,
                                first_difference(v, got)
                            ),
                            about(
                                line(e),
                                &[e],
                                Some(format!(
                                    "requested: {k}={}\nsent:      {k}={}",
                                    clip(v, 300),
                                    clip(got, 300)
                                )),
                            ),
                        );
                    }
                    pos += off + 1;
                }
                None if self.cut_off(k, v.len()) => t.note(about(
                    format!("#{} data {k} was cut off by the trim", e.seq),
                    &[e],
                    None,
                )),
                None if self.trimmed => t.note(self.not_cut(&format!("data {k}"))),
                None => t.fail(
                    format!(
                        "#{}: requested data {k}={} is missing or out of order",
                        e.seq,
                        clip(v, 80)
                    ),
                    about(line(e), &[e], self.excerpt.clone()),
                ),
            }
        }
    }

    /// The fields after the data: `vm_id`, `timestamp`, `documentation_url` and `agent`.
    fn tail(&self, t: &mut Tally) {
        let (obs, e, excerpt) = (self.obs, self.e, &self.excerpt);
        let get = |k: &str| self.parsed.get(k);
        match (get("vm_id"), expected_vm_id(obs, Some(e), get("vm_id"))) {
            (None, want) => self.tail_missing(t, "vm_id", want.map_or(0, |w| w.len())),
            (Some(got), Some(want)) if self.cut_short("vm_id", got, &want) => t.note(about(
                format!("#{} `vm_id` cut short by the trim", e.seq),
                &[e],
                None,
            )),
            (Some(got), Some(want)) if got != want => t.fail(
                format!("#{}: vm_id is {got:?}, expected {want:?}", e.seq),
                about(line(e), &[e], excerpt.clone()),
            ),
            _ => {}
        }
        match get("timestamp") {
            None => self.tail_missing(t, "timestamp", 0),
            // A timestamp cut short is judged by the oracle's notes only.
            Some(_) if self.trimmed && self.last_field_is("timestamp") => {}
            Some(ts) => {
                if let Some(problem) = dialect::timestamp_problem(obs, ts) {
                    t.fail(
                        format!("#{}: {problem}", e.seq),
                        about(line(e), &[e], excerpt.clone()),
                    );
                }
            }
        }
        match get("documentation_url") {
            None => self.tail_missing(t, "documentation_url", DOCUMENTATION_URL.len()),
            // Cut short by the trim: a prefix of the right value is all one can ask for.
            Some(url)
                if self.trimmed
                    && self.last_field_is("documentation_url")
                    && url != DOCUMENTATION_URL
                    && DOCUMENTATION_URL.starts_with(url) =>
            {
                t.note(about(
                    format!("#{} `documentation_url` cut short by the trim", e.seq),
                    &[e],
                    None,
                ))
            }
            Some(url) if url != DOCUMENTATION_URL => t.fail(
                format!(
                    "#{}: documentation_url is {url:?}, expected {DOCUMENTATION_URL}",
                    e.seq
                ),
                about(line(e), &[e], excerpt.clone()),
            ),
            Some(_) => {}
        }
        if let Some(agent) = get("agent") {
            t.note(about(format!("#{} agent={agent}", e.seq), &[e], None));
        }
    }

    fn last_field_is(&self, key: &str) -> bool {
        self.parsed.fields.last().is_some_and(|(k, _)| k == key)
    }

    /// The request needs a trim, but a field is only cut off by it when the description was
    /// cut at the declared trim, or the field would not have fitted beside what was sent.
    fn cut_off(&self, key: &str, value_len: usize) -> bool {
        self.trimmed
            && (dialect::was_cut(self.desc, self.cut)
                || self.desc.len() + key.len() + value_len + 2 > DESCRIPTION_LIMIT)
    }

    fn not_cut(&self, what: &str) -> Evidence {
        about(
            format!(
                "#{} {what} is missing, not cut off by the trim: the {}-byte description has room for it",
                self.e.seq,
                self.desc.len()
            ),
            &[self.e],
            None,
        )
    }

    /// `value_len`: the length the field's value should have (0 where it varies).
    fn tail_missing(&self, t: &mut Tally, key: &str, value_len: usize) {
        let e = self.e;
        if self.cut_off(key, value_len) {
            t.note(about(
                format!("#{} `{key}` cut off by the trim", e.seq),
                &[e],
                None,
            ));
        } else if self.trimmed {
            t.note(self.not_cut(&format!("`{key}`")));
        } else {
            t.fail(
                format!("#{}: the encoded report has no `{key}`", e.seq),
                about(line(e), &[e], self.excerpt.clone()),
            );
        }
    }

    /// The field the trim cut through: its value may be a prefix of the right one.
    fn cut_short(&self, key: &str, got: &str, want: &str) -> bool {
        self.trimmed && self.last_field_is(key) && got != want && want.starts_with(got)
    }
}

pub fn limit(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    for (e, asked) in health_posts(obs) {
        // What the flow can carry of the request (see `description`).
        let carried = super::xml_carried_run(obs, asked);
        let run = &carried;
        let Some(report) = &e.report else { continue };
        t.judged();
        let desc = report.description.as_deref().unwrap_or("");
        if desc.len() > DESCRIPTION_LIMIT {
            t.fail(
                format!(
                    "#{}: description is {} bytes, over the platform's {DESCRIPTION_LIMIT}",
                    e.seq,
                    desc.len()
                ),
                about(line(e), &[e], Some(clip(desc, 200))),
            );
        } else {
            t.note(about(
                format!("#{} description {} bytes", e.seq, desc.len()),
                &[e],
                None,
            ));
        }
        // A trimmed report must still be readable: the text of the request, or an encoded
        // report that still starts with its result and reason.
        let requested_len = match run.action {
            Action::InProgress => run.description.as_ref().map_or(0, String::len),
            Action::Failure if must_trim(run) => DESCRIPTION_LIMIT + 1,
            _ => 0,
        };
        if requested_len > DESCRIPTION_LIMIT {
            match run.action {
                Action::InProgress => {
                    let wanted = run.description.as_deref().unwrap_or("");
                    if !wanted.starts_with(desc) || desc.is_empty() {
                        t.fail(
                            format!("#{}: the over-long description was not trimmed to a prefix of the text", e.seq),
                            about(line(e), &[e], Some(clip(desc, 200))),
                        );
                    }
                }
                _ => match encoded::parse(desc, Mode::Lenient) {
                    Ok(r) if r.get("result").is_some() && r.get("reason").is_some() => {}
                    _ => t.fail(
                        format!(
                            "#{}: the trimmed report no longer parses with result and reason",
                            e.seq
                        ),
                        about(line(e), &[e], Some(clip(desc, 200))),
                    ),
                },
            }
        }
        let findings: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.is_length())
            .cloned()
            .collect();
        t.findings(&findings, &[e.seq], &format!("report #{}", e.seq));
    }
    t.finish("no health report reached the fake")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_are_located() {
        assert_eq!(first_difference("abc", "abc"), "");
        assert_eq!(
            first_difference("a|b", "a b"),
            " (first difference at character 1: expected '|', got ' ')"
        );
        assert_eq!(
            first_difference("ab", "a"),
            " (first difference at character 1: expected 'b', got the end)"
        );
    }
}
