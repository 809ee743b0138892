//! KVP checks: the pool file as the Azure host reads it, and the `PROVISIONING_REPORT` record
//! (docs/protocol.md §7).

use fake_wireserver::journal::Entry;
use wirecheck_oracle::encoded::{Dialect, EncodedReport, Mode};
use wirecheck_oracle::{HealthState, Severity};

use super::dialect::{self, Cut};
use super::{Judgement, Tally, about, clip, note, trimmed};
use crate::agent::Action;
use crate::observe::Observation;
use crate::scenario::Run;

pub fn pool(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    let Some(bytes) = &obs.pool else {
        return Judgement::fail(
            "the agent removed the KVP pool file",
            vec![note(
                "the pool file passed as {kvp_pool} is gone after the run",
                None,
            )],
        );
    };
    if bytes.is_empty() {
        return t.finish("the pool file is empty (kvp.report judges whether it should be)");
    }
    let view = &obs.pool_view;
    t.judged();
    t.findings(&view.findings, &[], "pool file");
    for record in &view.records {
        t.judged();
        let context = format!(
            "record {} at offset {} (key {:?})",
            record.index,
            record.offset,
            clip(&record.key, 80)
        );
        t.findings(&record.findings, &[], &context);
    }
    t.note(note(
        format!("{} bytes, {} records", view.size, view.records.len()),
        Some(
            view.records
                .iter()
                .map(|r| {
                    format!(
                        "{}: {} = {}",
                        r.index,
                        clip(&r.key, 80),
                        clip(&r.value, 120)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    ));
    t.finish("the pool file is empty")
}

/// What the host keeps of `PROVISIONING_REPORT`, one record per key (docs/protocol.md §7.1):
/// a report written as several records under the key reaches it in one piece at most, and of
/// several differing reports it may show any one (the strict reading). Each such finding is a
/// fail; an identical earlier copy is only noted.
fn host_keeps(obs: &Observation, span: &[usize], t: &mut Tally) {
    use wirecheck_oracle::id::kvp::{PROVISIONING_REPORT_MULTIPLE, PROVISIONING_REPORT_SPLIT};
    for f in &obs.pool_view.findings {
        let chunks = || {
            span.iter()
                .filter_map(|&i| obs.pool_view.records.get(i))
                .map(|r| {
                    format!(
                        "record {} ({} bytes): {}",
                        r.index,
                        r.value_bytes,
                        clip(&r.value, 200)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        match f.id.as_str() {
            PROVISIONING_REPORT_SPLIT => t.fail(
                format!("the report is not delivered whole: {}", f.message),
                note("what the host may show, one record of", Some(chunks())),
            ),
            PROVISIONING_REPORT_MULTIPLE if f.severity != Severity::Info => t.fail(
                format!("the host may show another report: {}", f.message),
                note(f.message.clone(), None),
            ),
            PROVISIONING_REPORT_MULTIPLE => t.note(note(f.message.clone(), None)),
            _ => {}
        }
    }
}

pub fn report(obs: &Observation) -> Judgement {
    let mut t = Tally::new();
    let Some(run_idx) = obs.runs.iter().rposition(|r| obs.is_terminal(&r.run)) else {
        return t.finish("no terminal report was requested");
    };
    let run = &obs.runs[run_idx].run;
    let Some(bytes) = &obs.pool else {
        return Judgement::fail("the agent removed the KVP pool file", Vec::new());
    };
    let Some((_, parsed)) = &obs.pool_view.provisioning_report else {
        return Judgement::fail(
            "no PROVISIONING_REPORT record in the pool file",
            vec![note(
                format!(
                    "{} bytes, {} records",
                    bytes.len(),
                    obs.pool_view.records.len()
                ),
                Some(
                    obs.pool_view
                        .records
                        .iter()
                        .map(|r| clip(&r.key, 120))
                        .collect::<Vec<_>>()
                        .join("\n"),
                ),
            )],
        );
    };
    t.judged();
    // All chunks considered: the value is the report's records joined; whether the host gets
    // it whole is judged by `host_keeps`.
    let (span, value) =
        wirecheck_oracle::kvp::provisioning_report_value(bytes, &obs.pool_view).unwrap_or_default();
    let excerpt = Some(clip(&value, 600));
    t.note(note(
        match span.as_slice() {
            [one] => format!("PROVISIONING_REPORT is record {one}"),
            _ => format!(
                "PROVISIONING_REPORT spans records {:?} under one key, joined here",
                span
            ),
        },
        excerpt.clone(),
    ));
    host_keeps(obs, &span, &mut t);

    // What the agent told the wireserver in that run, if anything reached the fake.
    let sent = obs
        .journal
        .iter()
        .filter(|e| obs.is_flow_health(e) && obs.run_of(e) == run_idx)
        .filter_map(|e| e.report.as_ref().map(|r| (e, r)))
        .next_back();
    let (state, _) = obs.expected_state(run);
    let failed = state == HealthState::NotReady;
    let record = Record {
        obs,
        run,
        kvp_cut: kvp_cut(obs, run),
        value,
        excerpt,
        parsed,
    };
    if let Some(problem) = dialect::cut_problem(&record.value, record.kvp_cut, "kvp_cut") {
        t.fail(
            format!("PROVISIONING_REPORT: {problem}"),
            note("PROVISIONING_REPORT", record.excerpt.clone()),
        );
    }
    match sent {
        Some((e, r)) if failed => {
            record.against_description(&mut t, e, r.description.as_deref().unwrap_or(""));
        }
        // Nothing sent (wireserver down), or a Ready whose success report only goes to
        // KVP: judge the record's own content.
        _ => record.own_content(&mut t, failed),
    }
    record.well_formed(&mut t);
    t.finish("no PROVISIONING_REPORT")
}

/// The cut the profile's `[encoded].kvp_cut` implies for the run's record.
fn kvp_cut(obs: &Observation, run: &Run) -> Cut {
    match run.action {
        Action::Failure => dialect::cut_for(run, dialect::declared(obs).and_then(|d| d.kvp_cut)),
        // A success report is short: the cut, if declared, may apply but is never needed.
        _ => match dialect::declared(obs).and_then(|d| d.kvp_cut) {
            Some(n) => Cut::Either(n),
            None => Cut::None,
        },
    }
}

/// The `PROVISIONING_REPORT` record of the last terminal run, with what it is judged against.
struct Record<'a> {
    obs: &'a Observation<'a>,
    run: &'a Run,
    kvp_cut: Cut,
    /// The report's records joined.
    value: String,
    excerpt: Option<String>,
    /// The pool view's (lenient) parse of the record.
    parsed: &'a EncodedReport,
}

impl Record<'_> {
    /// A failure report that reached the fake: the record must be the description sent, or a
    /// declared cut of it.
    fn against_description(&self, t: &mut Tally, e: &Entry, desc: &str) {
        let (obs, run, value, kvp_cut) = (self.obs, self.run, &self.value, self.kvp_cut);
        // The record as the XML flow could carry it (XML 1.0 has no form for most C0
        // controls): compared with what was sent, if its controls are the requested ones.
        let carried = super::xml_carried_record(obs, value, run);
        let carried = carried.as_ref();
        let declared = dialect::declared(obs);
        // Without a declaration the record may be cut to the host's value limit (bytes);
        // a declared cut is the agent's own (characters).
        let host_cut = match kvp_cut {
            Cut::None => {
                value.len() <= wirecheck_oracle::kvp::HOST_VALUE_MAX
                    && desc.len() > carried.len()
                    && desc.starts_with(carried)
            }
            _ => dialect::was_cut(value, kvp_cut) && desc.starts_with(carried),
        };
        // The description cut to the declared trim, the record to the declared KVP cut:
        // two prefixes of one report, so the shorter starts the longer.
        let desc_cut = super::report::cut_report(obs, run, desc)
            && declared.is_some_and(|d| d.description_trim.is_some())
            && !desc.is_empty()
            && carried.starts_with(desc);
        // azure-init trims the outer `"` off its record (§7.3); only its dialect may.
        let quotes_trimmed = declared.is_none_or(|d| d.dialect == Dialect::AzureInit)
            && carried == desc.trim_matches('"');
        if carried == desc || quotes_trimmed {
            t.note(about(
                format!("equal to the description of health report #{}", e.seq),
                &[e],
                None,
            ));
        } else if desc_cut {
            t.note(about(
                format!(
                    "the description of #{} ({} characters, the declared description_trim) starts this record ({} characters)",
                    e.seq,
                    desc.chars().count(),
                    value.chars().count()
                ),
                &[e],
                None,
            ));
            self.goes_on_as_requested(t);
        } else if host_cut {
            t.note(about(
                format!(
                    "the description of #{} cut to {} bytes ({} characters) for the {}",
                    e.seq,
                    value.len(),
                    value.chars().count(),
                    if kvp_cut == Cut::None {
                        "host's value limit"
                    } else {
                        "declared kvp_cut"
                    }
                ),
                &[e],
                None,
            ));
        } else {
            t.fail(
                format!(
                    "PROVISIONING_REPORT differs from the description sent in #{}",
                    e.seq
                ),
                about(
                    "KVP value vs. health description",
                    &[e],
                    Some(format!(
                        "kvp:    {}\nsent:   {}",
                        clip(value, 300),
                        clip(desc, 300)
                    )),
                ),
            );
        }
    }

    /// The record goes on where the description stopped: what it adds must still be the
    /// requested report.
    fn goes_on_as_requested(&self, t: &mut Tally) {
        let record = dialect::parse(self.obs, &self.value, Mode::Lenient).ok();
        if self.obs.scenario.expect.reason_contains.is_none()
            && let Some(problem) = record.as_ref().and_then(|r| {
                request_mismatch(r, self.run, dialect::was_cut(&self.value, self.kvp_cut))
            })
        {
            t.fail(
                format!("PROVISIONING_REPORT: {problem}"),
                note("PROVISIONING_REPORT", self.excerpt.clone()),
            );
        }
    }

    /// The record's own result, reason and VM id, with no description to compare it with.
    fn own_content(&self, t: &mut Tally, failed: bool) {
        let (obs, run, parsed) = (self.obs, self.run, self.parsed);
        let want_result = if failed { "error" } else { "success" };
        match parsed.get("result") {
            Some(r) if r == want_result => {}
            other => t.fail(
                format!(
                    "PROVISIONING_REPORT result is {}, expected {want_result}",
                    other.map_or("missing".to_owned(), |r| format!("{r:?}"))
                ),
                note("PROVISIONING_REPORT", self.excerpt.clone()),
            ),
        }
        if run.action == Action::Failure && obs.scenario.expect.reason_contains.is_none() {
            let wanted = run.reason.as_deref().unwrap_or("");
            match parsed.get("reason") {
                Some(got) if got == wanted || (!got.is_empty() && wanted.starts_with(got)) => {}
                got => t.fail(
                    format!(
                        "PROVISIONING_REPORT reason is {}, expected {:?}",
                        got.map_or("missing".to_owned(), |g| format!("{:?}", clip(g, 120))),
                        clip(wanted, 120)
                    ),
                    note("PROVISIONING_REPORT", self.excerpt.clone()),
                ),
            }
        }
        let got_vm = parsed.get("vm_id");
        let want_vm = super::report::expected_vm_id(obs, None, got_vm);
        if let (Some(got), Some(want)) = (got_vm, want_vm)
            && got != want
        {
            t.fail(
                format!("PROVISIONING_REPORT vm_id is {got:?}, expected {want:?}"),
                note("PROVISIONING_REPORT", self.excerpt.clone()),
            );
        }
    }

    /// The record itself must be a well-formed encoded report (strictly, unless cut), in the
    /// declared dialect and timestamp style.
    fn well_formed(self, t: &mut Tally) {
        let (obs, value, kvp_cut) = (self.obs, &self.value, self.kvp_cut);
        let cut = match kvp_cut {
            Cut::None => {
                super::report::must_trim(self.run)
                    || value.len() + 8 >= wirecheck_oracle::kvp::HOST_VALUE_MAX
            }
            _ => dialect::was_cut(value, kvp_cut),
        };
        let strict = dialect::parse(obs, value, Mode::Strict);
        let readable = strict
            .clone()
            .ok()
            .or_else(|| dialect::parse(obs, value, Mode::Lenient).ok());
        if let Some(r) = &readable
            && let Some(ts) = r.get("timestamp")
            && !(cut && r.fields.last().is_some_and(|(k, _)| k == "timestamp"))
            && let Some(problem) = dialect::timestamp_problem(obs, ts)
        {
            t.fail(
                format!("PROVISIONING_REPORT: {problem}"),
                note("PROVISIONING_REPORT", self.excerpt.clone()),
            );
        }
        match strict {
            Ok(strict) if cut => t.findings(
                &trimmed(&strict.findings, value),
                &[],
                "PROVISIONING_REPORT",
            ),
            Ok(strict) => t.findings(&strict.findings, &[], "PROVISIONING_REPORT"),
            Err(e) if self.parsed.truncated => t.note(note(
                format!("PROVISIONING_REPORT cut inside a quoted field ({e})"),
                None,
            )),
            Err(e) => t.fail(
                format!("PROVISIONING_REPORT does not parse as an encoded report: {e}"),
                note("PROVISIONING_REPORT", self.excerpt),
            ),
        }
    }
}

/// How a failure record's reason and supporting data differ from the request, if they do. A
/// `cut` record may end inside its last field, and lose every field after the cut.
fn request_mismatch(record: &EncodedReport, run: &Run, cut: bool) -> Option<String> {
    let last = record.fields.len().saturating_sub(1);
    let matches = |at: usize, got: &str, wanted: &str| {
        got == wanted || (cut && at == last && wanted.starts_with(got))
    };
    let wanted = run.reason.as_deref().unwrap_or("");
    match record.fields.iter().position(|(k, _)| k == "reason") {
        Some(at) if !matches(at, &record.fields[at].1, wanted) => {
            return Some(format!(
                "reason {:?} is not the requested {:?}",
                clip(&record.fields[at].1, 120),
                clip(wanted, 120)
            ));
        }
        Some(_) => {}
        None if cut => return None,
        None => return Some("no reason".into()),
    }
    let mut from = 0;
    for (k, v) in &run.data {
        match record.fields[from..].iter().position(|(fk, _)| fk == k) {
            Some(off) if !matches(from + off, &record.fields[from + off].1, v) => {
                return Some(format!(
                    "data {k}={:?} is not the requested {:?}",
                    clip(&record.fields[from + off].1, 120),
                    clip(v, 120)
                ));
            }
            Some(off) => from += off + 1,
            // Everything after the cut is gone.
            None if cut => return None,
            None => return Some(format!("requested data {k} is missing or out of order")),
        }
    }
    None
}
