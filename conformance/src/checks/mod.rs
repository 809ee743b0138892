//! The checks: each judges one aspect of what an agent did in a scenario, from the fake's
//! journal, the oracle's parses and the agent's profile. A case is (scenario, check); its id is
//! `<scenario id>.<check id>`.
//!
//! Checks never use the reporter crate (the oracle is independent, DESIGN.md).

pub(crate) mod behaviour;
pub(crate) mod dialect;
mod guest;
mod kvp;
mod protocol;
mod report;
#[cfg(test)]
pub(crate) mod tests;

pub use report::DESCRIPTION_LIMIT;

use fake_wireserver::journal::Entry;
use wirecheck_oracle::{Finding, Severity};

use crate::agent::Capability;
pub use crate::catalog::CheckId;
use crate::observe::{self, Observation};
use wirecheck_results::{Evidence, Verdict};

/// What runs a check of the catalog ([`CheckId`] names it and says what it means).
#[derive(Debug, Clone, Copy)]
pub struct CheckDef {
    pub id: CheckId,
    /// The capability the agent must claim, else the case is skipped.
    pub needs: Option<Capability>,
    pub run: fn(&Observation) -> Judgement,
}

/// The runnable check of an id: an exhaustive match, so a check added to the catalog does not
/// build until it says what runs it.
pub fn get(id: CheckId) -> CheckDef {
    let (needs, run): (Option<Capability>, fn(&Observation) -> Judgement) = match id {
        CheckId::ProtocolRequest => (None, protocol::request),
        CheckId::ProtocolHeaders => (None, protocol::headers),
        CheckId::ReportShape => (None, report::shape),
        CheckId::ReportState => (None, report::state),
        CheckId::ReportDescription => (None, report::description),
        CheckId::ReportLimit => (None, report::limit),
        CheckId::KvpPool => (None, kvp::pool),
        CheckId::KvpReport => (Some(Capability::Kvp), kvp::report),
        CheckId::BehaviourRetry => (None, behaviour::retry),
        CheckId::BehaviourInterval => (None, behaviour::interval),
        CheckId::BehaviourRate => (None, behaviour::rate),
        CheckId::BehaviourBudget => (None, behaviour::budget),
        CheckId::BehaviourTerminal => (None, behaviour::terminal),
        CheckId::BehaviourExit => (None, behaviour::exit),
        CheckId::BehaviourTimeout => (None, behaviour::timeout),
        CheckId::BehaviourRefresh => (None, behaviour::refresh),
        CheckId::GuestUsers => (Some(Capability::Guest), guest::users),
    };
    CheckDef { id, needs, run }
}

/// `text` as a health report of the scenario's flow can carry it: in the XML flow, every
/// character outside XML 1.0's `Char` production (C0 controls but TAB, CR and LF; U+FFFE,
/// U+FFFF) becomes U+FFFD, since no XML document can hold it, not even as a character
/// reference. The JSON flow carries everything.
pub(crate) fn xml_carried<'a>(obs: &Observation, text: &'a str) -> std::borrow::Cow<'a, str> {
    carried_text(
        obs.scenario.agent.protocol == crate::scenario::Protocol::Xml,
        text,
    )
}

fn carried_text(xml: bool, text: &str) -> std::borrow::Cow<'_, str> {
    let allowed = |c: char| matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..);
    if !xml || text.chars().all(allowed) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| if allowed(c) { c } else { '\u{FFFD}' })
            .collect(),
    )
}

/// A KVP record as the XML flow could carry it, for comparing with the description sent
/// ([`xml_carried`]): only when the characters XML cannot hold that the record has are the
/// requested report's own, in order. The record is not XML: a record holding other such
/// characters than were asked for is wrong whatever the wire made of them.
pub(crate) fn xml_carried_record<'a>(
    obs: &Observation,
    record: &'a str,
    run: &crate::scenario::Run,
) -> std::borrow::Cow<'a, str> {
    let xml = obs.scenario.agent.protocol == crate::scenario::Protocol::Xml;
    carried_record(xml, record, run)
}

fn carried_record<'a>(
    xml: bool,
    record: &'a str,
    run: &crate::scenario::Run,
) -> std::borrow::Cow<'a, str> {
    let carried = carried_text(xml, record);
    if matches!(carried, std::borrow::Cow::Borrowed(_)) {
        return carried;
    }
    let uncarried = |t: &str| -> Vec<char> {
        t.chars()
            .filter(|c| {
                !matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
            })
            .collect()
    };
    let requested: Vec<char> = run
        .reason
        .iter()
        .chain(run.data.iter().map(|(_, v)| v))
        .chain(run.description.iter())
        .flat_map(|t| uncarried(t))
        .collect();
    let mut wanted = requested.iter();
    let own = uncarried(record)
        .iter()
        .all(|c| wanted.by_ref().any(|r| r == c));
    if own {
        carried
    } else {
        std::borrow::Cow::Borrowed(record)
    }
}

/// A run's reason, data values and description as the flow can carry them ([`xml_carried`]).
pub(crate) fn xml_carried_run(
    obs: &Observation,
    run: &crate::scenario::Run,
) -> crate::scenario::Run {
    let carry = |t: &String| xml_carried(obs, t).into_owned();
    crate::scenario::Run {
        action: run.action,
        reason: run.reason.as_ref().map(carry),
        data: run
            .data
            .iter()
            .map(|(k, v)| (k.clone(), carry(v)))
            .collect(),
        description: run.description.as_ref().map(carry),
    }
}

/// A check's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    pub verdict: Verdict,
    pub reason: Option<String>,
    pub evidence: Vec<Evidence>,
    /// The verdict is `informational` only because the runner's stalls left a timing
    /// uncertain ([`Tally::uncertain`]): the runner tries the case again (`runner::retry`).
    pub stalled: bool,
}

impl Judgement {
    pub fn skipped(reason: impl Into<String>) -> Judgement {
        Judgement {
            verdict: Verdict::Skipped,
            reason: Some(reason.into()),
            evidence: Vec::new(),
            stalled: false,
        }
    }

    pub fn fail(reason: impl Into<String>, evidence: Vec<Evidence>) -> Judgement {
        Judgement {
            verdict: Verdict::Fail,
            reason: Some(reason.into()),
            evidence,
            stalled: false,
        }
    }
}

/// At most this many evidence items per case (the first ones decide; the rest are counted).
const MAX_EVIDENCE: usize = 20;

/// Collects problems and notes while a check walks the observation, then decides: any
/// failure → fail, else a timing left unjudged (by the machine, the case's speed, or the
/// runner's deadline) →
/// informational, else any non-strict → non-strict, else pass.
#[derive(Debug, Default)]
pub struct Tally {
    fails: Vec<(String, Evidence)>,
    /// Timings too close to their limit to call, given how late the runner woke meanwhile.
    uncertain: Vec<(String, Evidence)>,
    /// Timings the case's agent time made too coarse to call (not the machine's doing).
    coarse: Vec<(String, Evidence)>,
    /// Waits the runner's deadline ended before they could be judged.
    cut: Vec<(String, Evidence)>,
    non_strict: Vec<(String, Evidence)>,
    notes: Vec<Evidence>,
    judged: usize,
}

impl Tally {
    pub fn new() -> Tally {
        Tally::default()
    }

    /// Counts one thing that was looked at (for "nothing to judge").
    pub fn judged(&mut self) {
        self.judged += 1;
    }

    pub fn fail(&mut self, reason: impl Into<String>, evidence: Evidence) {
        self.judged += 1;
        self.fails.push((reason.into(), evidence));
    }

    /// A timing that cannot be called either way: the runner's own wake-ups came late around
    /// the moments it compares (`Observation::uncertainty_ms`). Without a sure failure the
    /// case is informational, saying so, never a pass or a fail that depends on the machine.
    pub fn uncertain(&mut self, reason: impl Into<String>, evidence: Evidence) {
        self.judged += 1;
        self.uncertain.push((reason.into(), evidence));
    }

    /// A timing the case's speed (agent time, N times the wall clock) makes too coarse to
    /// call: informational, saying so, and not a stall (the same speed again would not judge
    /// it either, so the runner does not run it again).
    pub fn unjudged_at_speed(&mut self, reason: impl Into<String>, evidence: Evidence) {
        self.judged += 1;
        self.coarse.push((reason.into(), evidence));
    }

    /// A wait the runner's deadline ended before its limit was over, with nothing else to
    /// judge it by: informational, and not a stall (a run again would end it the same way).
    pub fn cut_short(&mut self, reason: impl Into<String>, evidence: Evidence) {
        self.judged += 1;
        self.cut.push((reason.into(), evidence));
    }

    pub fn non_strict(&mut self, reason: impl Into<String>, evidence: Evidence) {
        self.judged += 1;
        self.non_strict.push((reason.into(), evidence));
    }

    /// Evidence that supports a pass (what was looked at).
    pub fn note(&mut self, evidence: Evidence) {
        self.notes.push(evidence);
    }

    /// Oracle findings: error → fail, warning → non-strict, info → note (see [`relaxed`] for
    /// the ones reported as notes).
    pub fn findings(&mut self, findings: &[Finding], seqs: &[u64], context: &str) {
        for f in findings {
            let f = &relaxed(f);
            let evidence = Evidence {
                note: format!("{context}: {f}"),
                journal_seq: seqs.to_vec(),
                excerpt: None,
            };
            match f.severity {
                Severity::Error => self.fail(format!("{context}: {}", f.message), evidence),
                Severity::Warning => self.non_strict(format!("{context}: {}", f.message), evidence),
                Severity::Info => self.note(evidence),
            }
        }
    }

    pub fn has_failures(&self) -> bool {
        !self.fails.is_empty()
    }

    /// The decision; `nothing` is the skip reason when nothing was judged.
    pub fn finish(self, nothing: &str) -> Judgement {
        let summarize = |items: &[(String, Evidence)]| {
            let first = items[0].0.clone();
            match items.len() {
                1 => first,
                n => format!("{first} (and {} more)", n - 1),
            }
        };
        let stalled = self.fails.is_empty() && !self.uncertain.is_empty();
        let (verdict, reason) = if !self.fails.is_empty() {
            (Verdict::Fail, Some(summarize(&self.fails)))
        } else if !self.uncertain.is_empty() {
            (
                Verdict::Informational,
                Some(format!(
                    "not judged, the machine was too loaded to judge timing: {}",
                    summarize(&self.uncertain)
                )),
            )
        } else if !self.coarse.is_empty() {
            (
                Verdict::Informational,
                Some(format!(
                    "not judged at this speed: {}",
                    summarize(&self.coarse)
                )),
            )
        } else if !self.cut.is_empty() {
            (
                Verdict::Informational,
                Some(format!(
                    "not judged, the deadline came first: {}",
                    summarize(&self.cut)
                )),
            )
        } else if !self.non_strict.is_empty() {
            (Verdict::NonStrict, Some(summarize(&self.non_strict)))
        } else if self.judged == 0 {
            return Judgement {
                verdict: Verdict::Skipped,
                reason: Some(format!("nothing to judge: {nothing}")),
                evidence: self.notes.into_iter().take(MAX_EVIDENCE).collect(),
                stalled: false,
            };
        } else {
            (Verdict::Pass, None)
        };
        let mut evidence: Vec<Evidence> = self
            .fails
            .into_iter()
            .chain(self.uncertain)
            .chain(self.coarse)
            .chain(self.cut)
            .chain(self.non_strict)
            .map(|(_, e)| e)
            .chain(self.notes)
            .collect();
        if evidence.len() > MAX_EVIDENCE {
            let dropped = evidence.len() - MAX_EVIDENCE;
            evidence.truncate(MAX_EVIDENCE);
            evidence.push(Evidence {
                note: format!("{dropped} more items left out"),
                journal_seq: Vec::new(),
                excerpt: None,
            });
        }
        Judgement {
            verdict,
            reason,
            evidence,
            stalled,
        }
    }
}

/// The oracle flags an `agent=` that is neither `Cloud-Init/…` nor `Azure-Init/…`, and a
/// dialect it cannot tell when no field needed quoting. Neither is a deviation for an agent
/// with a name of its own (the quoting itself is still judged strictly), so both are notes.
fn relaxed(f: &Finding) -> Finding {
    if f.is_style_only() && f.severity != Severity::Info {
        Finding {
            id: f.id.clone(),
            severity: Severity::Info,
            message: format!("{} (informational: the agent names itself)", f.message),
        }
    } else {
        f.clone()
    }
}

/// A report cut to a length limit loses its tail: missing or misplaced fields after the cut
/// are notes, not deviations (docs/protocol.md §6.5 step 7).
pub fn trimmed(findings: &[Finding], description: &str) -> Vec<Finding> {
    // The field the trim cut through: the description's last one (its value is a prefix).
    let last_key = description
        .rsplit('|')
        .next()
        .and_then(|f| f.split_once('='))
        .map(|(k, _)| k);
    findings
        .iter()
        .map(|f| {
            if f.is_cut_by_trim(last_key) && f.severity != Severity::Info {
                Finding {
                    id: f.id.clone(),
                    severity: Severity::Info,
                    message: format!("{} (the report was trimmed to a length limit)", f.message),
                }
            } else {
                f.clone()
            }
        })
        .collect()
}

/// Evidence about journal entries.
pub fn about(note: impl Into<String>, entries: &[&Entry], excerpt: Option<String>) -> Evidence {
    Evidence {
        note: note.into(),
        journal_seq: entries.iter().map(|e| e.seq).collect(),
        excerpt,
    }
}

/// Evidence without journal entries.
/// The last lines of a run's stderr (`RunEnd::tail`), as the excerpt of a verdict on a run
/// that delivered no report: why an agent failed is usually there.
pub fn stderr_tail(run: &observe::RunRecord) -> Option<String> {
    let tail = wirecheck_results::RunEnd::tail(&run.stderr.text());
    (!tail.trim().is_empty()).then(|| format!("stderr, last lines:\n{tail}"))
}

pub fn note(note: impl Into<String>, excerpt: Option<String>) -> Evidence {
    Evidence {
        note: note.into(),
        journal_seq: Vec::new(),
        excerpt,
    }
}

/// The request line plus the named headers, as an excerpt.
pub fn request_excerpt(entry: &Entry, headers: &[&str]) -> String {
    let mut out = format!("{} {}", entry.method, entry.target);
    for (name, value) in &entry.headers {
        if headers.iter().any(|h| h.eq_ignore_ascii_case(name)) {
            out.push_str(&format!("\n{name}: {value}"));
        }
    }
    out
}

/// At most `max` characters of a text, with an ellipsis when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}… ({} bytes in all)", text.len())
    }
}

/// `#3 +120 ms POST /provisioning/health → 503`.
pub fn line(entry: &Entry) -> String {
    observe::describe(entry)
}

#[cfg(test)]
mod catalog_tests {
    use super::*;

    #[test]
    fn tally_grades_fail_over_non_strict_over_pass() {
        let mut t = Tally::new();
        t.judged();
        assert_eq!(t.finish("x").verdict, Verdict::Pass);
        let mut t = Tally::new();
        t.non_strict("meh", note("a", None));
        t.fail("bad", note("b", None));
        t.fail("worse", note("c", None));
        let j = t.finish("x");
        assert_eq!(j.verdict, Verdict::Fail);
        assert_eq!(j.reason.as_deref(), Some("bad (and 1 more)"));
        assert_eq!(j.evidence.len(), 3);
        let j = Tally::new().finish("no requests");
        assert_eq!(j.verdict, Verdict::Skipped);
        assert_eq!(j.reason.as_deref(), Some("nothing to judge: no requests"));
    }
}
