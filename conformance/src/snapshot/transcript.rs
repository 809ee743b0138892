//! The normalized transcript of what an agent emitted in one scenario: the body of a `.snap`
//! file. It holds what a reviewer of an agent's change wants to see (every distinct request,
//! its protocol-relevant headers, each report's parsed fields, the KVP records, the exit) and
//! nothing that differs from run to run of the same agent: values are redacted at the source
//! (`redact`), and attempts are counted only where the scenario decides their number.

use std::fmt::Write as _;

use fake_wireserver::journal::Entry;
use wirecheck_oracle::encoded::{EncodedReport, Mode};
use wirecheck_oracle::health::{HealthState, ReportKind, SubStatus};

use super::redact::{Redaction, Redactor};
use crate::checks::dialect;
use crate::exec::Exit;
use crate::observe::Observation;

/// The headers a transcript keeps by default (lower case): the ones the protocol defines.
pub const DEFAULT_HEADERS: [&str; 10] = [
    "content-type",
    "x-ms-version",
    "x-ms-agent-name",
    "x-ms-guest-agent-name",
    "metadata",
    "user-agent",
    "x-ms-cipher-name",
    "x-ms-guest-agent-public-x509-cert",
    "x-ms-containerid",
    "x-ms-host-config-name",
];

/// Headers whose value is made anew every run (a fresh transport certificate): whether they
/// are there is recorded, not what they hold.
const FRESH_HEADERS: [&str; 1] = ["x-ms-guest-agent-public-x509-cert"];

/// What a profile adds to a transcript (`[snapshot]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SnapshotOptions {
    /// The cases whose transcripts are committed for a bundled profile (`snapshots/agents/`,
    /// `tests/tests/agent_snapshots.rs`): a case glob; `None`: none are.
    pub cases: Option<String>,
    /// Lower case; `None`: [`DEFAULT_HEADERS`].
    pub headers: Option<Vec<String>>,
    pub redact: Vec<Redaction>,
}

impl SnapshotOptions {
    fn keeps(&self, header: &str) -> bool {
        let header = header.to_ascii_lowercase();
        match &self.headers {
            Some(list) => list.contains(&header),
            None => DEFAULT_HEADERS.contains(&header.as_str()),
        }
    }
}

/// One distinct request and how often it came.
struct Distinct {
    text: String,
    attempts: usize,
    /// The last attempt ended the agent's retrying by itself: a success, or an answer the
    /// agent treats as fatal (not its budget or its timers).
    last_settled: bool,
    /// ... and its answer took half the agent's request timeout or more.
    last_settled_slow: bool,
}

/// The transcript of `obs`: text, one item per line, stable for the same agent behaviour.
pub fn transcript(obs: &Observation) -> String {
    let redactor = redactor(obs);
    let mut out = String::new();
    for (ri, run) in obs.runs.iter().enumerate() {
        let _ = writeln!(out, "run {} ({}):", ri + 1, run.run.action.as_str());
        write_run(&mut out, obs, ri, &run.exit, &redactor);
    }
    write_kvp(&mut out, obs, &redactor);
    out
}

/// The profile's redactions, and the ids this case served.
fn redactor(obs: &Observation) -> Redactor {
    let mut redactor = Redactor::new(&obs.profile.snapshot.redact)
        .known(&obs.served.container_id, "<container-id>")
        .known(&obs.served.instance_id, "<instance-id>");
    // The VM id the agent was given, and the one IMDS serves (the same unless the scenario
    // tells them apart).
    if let Some(vm_id) = &obs.scenario.agent.vm_id {
        redactor = redactor.known(vm_id, "<vm-id>");
    }
    if let Some(vm_id) = &obs.imds_vm_id
        && obs.scenario.agent.vm_id.as_ref() != Some(vm_id)
    {
        redactor = redactor.known(vm_id, "<imds-vm-id>");
    }
    redactor
}

/// Run `ri`: its distinct requests with their attempts, its last report and its exit.
fn write_run(
    out: &mut String,
    obs: &Observation,
    ri: usize,
    exit_of_run: &Exit,
    redactor: &Redactor,
) {
    let entries = obs.entries_of_run(ri);
    // A daemon's requests after its terminal report depend on when it was stopped.
    let until = match obs.profile.done {
        crate::agent::Done::TerminalReport => entries
            .iter()
            .position(|e| obs.is_flow_health(e) && is_terminal(e))
            .map_or(entries.len(), |i| i + 1),
        _ => entries.len(),
    };
    let distinct = distinct_requests(obs, &entries[..until], redactor);
    // The count is the scenario's (its scripted faults) when the agent stopped retrying
    // on an answer (a success, or one it treats as fatal) and ended by itself (or reached
    // its terminal report, for a daemon), and no timer of the scenario's moves the
    // goalposts; otherwise its budget, its timers, the deadline or the scenario's triggers
    // decide it.
    let ended = matches!(exit_of_run, Exit::Code(_))
        || (obs.profile.done == crate::agent::Done::TerminalReport && until < entries.len())
        || (obs.profile.done == crate::agent::Done::TerminalReport
            && matches!(exit_of_run, Exit::StoppedWhenDone));
    let counted = ended && timing_free(obs);
    for d in &distinct {
        let attempts = if counted && d.last_settled {
            d.attempts.to_string()
        } else {
            "1 or more (timing decides how many)".to_owned()
        };
        // The request's first line, then its attempts, then the rest.
        let (first, rest) = d.text.split_once('\n').unwrap_or((&d.text, ""));
        let _ = writeln!(out, "  - {first}  (attempts: {attempts})");
        out.push_str(rest);
    }
    if until < entries.len() {
        let _ = writeln!(
            out,
            "  (after its terminal report: requests not recorded, their number is the stop's)"
        );
    }
    let terminal = entries[..until]
        .iter()
        .rev()
        .find(|e| obs.is_flow_health(e) && e.report.is_some());
    match terminal.and_then(|e| e.report.as_ref()) {
        Some(r) => {
            let _ = writeln!(
                out,
                "  last report: {}/{}",
                r.state.as_ref().map_or("-", HealthState::as_str),
                r.substatus.as_ref().map_or("-", SubStatus::as_str)
            );
        }
        None => out.push_str("  last report: none\n"),
    }
    let _ = writeln!(out, "  exit: {}", exit(exit_of_run));
}

/// The run's requests as distinct texts, each with how often the agent sent it.
fn distinct_requests(obs: &Observation, entries: &[&Entry], redactor: &Redactor) -> Vec<Distinct> {
    let options = &obs.profile.snapshot;
    let mut distinct: Vec<Distinct> = Vec::new();
    // An answer this slow may have reached the agent after its own request timeout.
    let slow_ms = (obs.request_timeout() * 500.0) as u64;
    let texts: Vec<String> = entries
        .iter()
        .map(|e| request(obs, e, options, redactor))
        .collect();
    let moved_on = moved_on_at(entries, &texts);
    for ((entry, text), moved_on) in entries.iter().zip(texts).zip(moved_on) {
        // Its waits for a CPU after it moved on did not delay its reading of this answer.
        let waited_until = (entry.at_ms + 2 * slow_ms).min(moved_on.unwrap_or(u64::MAX));
        let settled = !matches!(obs.classify(entry), crate::observe::Class::Retryable(_));
        // Slow as the agent saw it: the fake's own time to answer, plus how late the
        // runner stalled around the request (the fake may have read it late, after the
        // agent had given up on it), plus how long the agent waited for a CPU within its
        // timeout.
        // Its own waits for a CPU meanwhile count too: a worker held off the CPU reads the
        // answer late.
        let slow = entry.done_ms.is_none_or(|d| {
            d.saturating_sub(entry.at_ms)
                + obs.uncertainty_ms(entry.at_ms)
                + obs.agent_waited_ms(entry.at_ms, waited_until)
                >= slow_ms
        });
        match distinct.iter_mut().find(|d| d.text == text) {
            // A resend after a settled answer that was slow is not the scenario's doing
            // (it scripts only retryable answers) but the agent's timer: a success that
            // reached it after its request timeout on a loaded machine. It is not counted,
            // so the transcript is the quiet machine's. (A resend after a prompt one is
            // the agent's own flow, e.g. WALinuxAgent fetching the goal state twice.)
            Some(d) if d.last_settled_slow => {}
            Some(d) => {
                d.attempts += 1;
                d.last_settled = settled;
                d.last_settled_slow = settled && slow;
            }
            None => distinct.push(Distinct {
                text,
                attempts: 1,
                last_settled: settled,
                last_settled_slow: settled && slow,
            }),
        }
    }
    distinct
}

/// For each request, when the agent first sent a different one after it (`None`: it never
/// did): by then it had moved on (WALinuxAgent asks for the hosting configuration the goal
/// state names). One pass from the end: the next different text after a repeat is the repeat's.
fn moved_on_at(entries: &[&Entry], texts: &[String]) -> Vec<Option<u64>> {
    let mut next = vec![None; texts.len()];
    for i in (0..texts.len().saturating_sub(1)).rev() {
        next[i] = if texts[i + 1] != texts[i] {
            Some(entries[i + 1].at_ms)
        } else {
            next[i + 1]
        };
    }
    next
}

/// The KVP records, sorted: agents write events from threads (cloud-init's reporting queue),
/// so the order of the records is the scheduler's, not the agent's format.
fn write_kvp(out: &mut String, obs: &Observation, redactor: &Redactor) {
    out.push_str("kvp:\n");
    if obs.pool_view.records.is_empty() {
        out.push_str("  (no records)\n");
    }
    let mut records: Vec<String> = obs
        .pool_view
        .records
        .iter()
        .map(|record| {
            let mut item = format!("  - key: {}\n", redactor.text(&event_key(&record.key)));
            value(obs, &mut item, "    ", &record.value, redactor);
            item
        })
        .collect();
    records.sort();
    for item in records {
        out.push_str(&item);
    }
}

/// A KVP key with cloud-init 26.1's VM id field (`CLOUD_INIT|<incarnation>|<type>|<name>|<vm_id>|
/// <uuid>[|<slice>]`) as `<vm-id>` whatever it holds: until cloud-init has read the VM id, its
/// handler's background thread writes the zero GUID or the raw DMI system-uuid (byte-swapped on
/// a Gen1 machine), depending on when it gets to the event (reporting/handlers.py:261-275).
/// Older keys (five fields, six with a slice) are kept.
fn event_key(key: &str) -> std::borrow::Cow<'_, str> {
    let mut parts: Vec<&str> = key.split('|').collect();
    let sliced = parts
        .last()
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
    let fields = parts.len() - usize::from(sliced);
    if parts[0] != "CLOUD_INIT" || fields != 6 {
        return std::borrow::Cow::Borrowed(key);
    }
    parts[4] = "<vm-id>";
    std::borrow::Cow::Owned(parts.join("|"))
}

/// Whether the scenario's own answers do not depend on time: no trigger (which changes what
/// is served after a delay) and no rate limit (which throttles by the clock).
pub fn timing_free(obs: &Observation) -> bool {
    obs.scenario.fake.triggers.is_empty() && obs.scenario.fake.rate_limit.is_none()
}

/// Whether two transcripts differ only in exit statuses: every request, header, body, report
/// and KVP record is the same, and where a run's end differs both are exit statuses (an agent
/// that got its report's answer after its own deadline on a loaded machine exits "not
/// reported"; a kill, a signal or a run that never started is never the machine's).
pub fn differs_only_in_exit_status(accepted: &str, new: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (accepted.lines().collect(), new.lines().collect());
    // A run's end, at the run's indentation (deeper lines are bodies).
    let status = |line: &str| line.starts_with("  exit: status ");
    a.len() == b.len()
        && a != b
        && a.iter()
            .zip(&b)
            .all(|(x, y)| x == y || (status(x) && status(y)))
}

fn is_terminal(entry: &Entry) -> bool {
    entry.answer.status.is_some_and(|s| (200..300).contains(&s))
        && entry.report.as_ref().is_some_and(|r| r.is_terminal())
}

fn exit(exit: &Exit) -> String {
    match exit {
        Exit::Code(c) => format!("status {c}"),
        Exit::Signal(s) => format!("signal {s}"),
        Exit::KilledAtDeadline => "killed at the deadline".into(),
        Exit::StoppedWhenDone => "stopped after its terminal report".into(),
        Exit::Interrupted(_) => "interrupted".into(),
        Exit::SpawnFailed(_) => "could not be started".into(),
        Exit::ContainmentFailed(_) => "could not be contained".into(),
    }
}

/// One request as a transcript item: `METHOD endpoint`, its kept headers, its body.
fn request(
    obs: &Observation,
    entry: &Entry,
    options: &SnapshotOptions,
    redactor: &Redactor,
) -> String {
    let mut out = format!(
        "{} {} {}\n",
        entry.method,
        entry.endpoint,
        redactor.field(Some("target"), &entry.target)
    );
    for (name, value) in &entry.headers {
        if options.keeps(name) {
            let lower = name.to_ascii_lowercase();
            let value = if FRESH_HEADERS.contains(&lower.as_str()) {
                "<present>".to_owned()
            } else {
                redactor.field(Some(name), value)
            };
            let _ = writeln!(out, "      {lower}: {value}");
        }
    }
    if entry.body_len == 0 {
        return out;
    }
    match &entry.report {
        Some(report) => {
            let layout = match report.kind {
                ReportKind::Xml => format!("xml, {}", xml_layout(&entry.body)),
                ReportKind::Json => "json".to_owned(),
            };
            let _ = writeln!(out, "      body: health report ({layout})");
            if report.kind == ReportKind::Json {
                match serde_json::from_str::<serde_json::Value>(&entry.body) {
                    Ok(mut v) => {
                        // The description is shown parsed below.
                        if let Some(d) = v.pointer_mut("/details/description")
                            && d.is_string()
                        {
                            *d = serde_json::Value::String("<description: below>".into());
                        }
                        redact_json(&mut v, None, redactor);
                        let _ = writeln!(out, "        canonical: {}", canonical(&v));
                    }
                    Err(_) => out.push_str("        canonical: (not JSON)\n"),
                }
            }
            let fields = [
                ("state", report.state.as_ref().map(HealthState::as_str)),
                (
                    "substatus",
                    report.substatus.as_ref().map(SubStatus::as_str),
                ),
                ("incarnation", report.goal_state_incarnation.as_deref()),
                ("container_id", report.container_id.as_deref()),
                ("instance_id", report.instance_id.as_deref()),
            ];
            for (name, v) in fields {
                if let Some(v) = v {
                    let _ = writeln!(out, "        {name}: {}", redactor.field(Some(name), v));
                }
            }
            if let Some(description) = &report.description {
                out.push_str("        description:\n");
                value(obs, &mut out, "          ", description, redactor);
            }
        }
        // Not a report (telemetry, status blobs): its content is not this snapshot's.
        None => out.push_str("      body: (not a report; content not recorded)\n"),
    }
    out
}

/// A description or KVP value: an encoded report as its fields, in order, with its dialect;
/// else the text.
fn value(obs: &Observation, out: &mut String, indent: &str, text: &str, redactor: &Redactor) {
    let looks_encoded = text.trim_start().starts_with("result=");
    let parsed: Option<EncodedReport> = looks_encoded
        .then(|| dialect::parse(obs, text, Mode::Lenient).ok())
        .flatten();
    match parsed {
        Some(report) => {
            let dialect = report.dialect.map_or("unknown", |d| match d {
                wirecheck_oracle::encoded::Dialect::CloudInit => "cloud-init",
                wirecheck_oracle::encoded::Dialect::AzureInit => "azure-init",
            });
            let _ = writeln!(
                out,
                "{indent}encoded ({dialect} dialect{}):",
                if report.truncated { ", cut" } else { "" }
            );
            for (k, v) in &report.fields {
                let _ = writeln!(
                    out,
                    "{indent}  {}: {}",
                    redactor.text(k),
                    redactor.field(Some(k), v)
                );
            }
        }
        None => {
            let _ = writeln!(out, "{indent}text: {}", redactor.text(text));
        }
    }
}

/// How an XML report is laid out: declaration, line endings, indentation.
fn xml_layout(body: &str) -> String {
    let declaration = if body.trim_start().starts_with("<?xml") {
        "declaration"
    } else {
        "no declaration"
    };
    let endings = if body.contains("\r\n") {
        "CRLF"
    } else if body.trim_end().contains('\n') {
        "LF"
    } else {
        "one line"
    };
    let indent = body
        .lines()
        .skip(1)
        .map(|l| {
            l.chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect::<String>()
        })
        .find(|w| !w.is_empty())
        .map_or("no indentation".to_owned(), |w| {
            if w.starts_with('\t') {
                "tab indentation".to_owned()
            } else {
                format!("{}-space indentation", w.len())
            }
        });
    format!("{declaration}, {endings}, {indent}")
}

fn redact_json(v: &mut serde_json::Value, key: Option<&str>, redactor: &Redactor) {
    match v {
        serde_json::Value::String(s) => *s = redactor.field(key, s),
        serde_json::Value::Array(items) => {
            for item in items {
                redact_json(item, key, redactor);
            }
        }
        serde_json::Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                redact_json(item, Some(k), redactor);
            }
        }
        _ => {}
    }
}

/// Compact JSON with every object's keys sorted.
fn canonical(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        serde_json::Value::String(k.clone()),
                        canonical(&map[k])
                    )
                })
                .collect();
            format!("{{{}}}", items.join(","))
        }
        serde_json::Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(canonical).collect::<Vec<_>>().join(",")
            )
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::tests::{health, profile, run, scenario};

    fn transcript_of(journal: Vec<Entry>) -> String {
        transcript_with_stalls(journal, Vec::new())
    }

    fn transcript_with_stalls(journal: Vec<Entry>, stalls: Vec<crate::observe::Stall>) -> String {
        transcript_with(journal, stalls, Vec::new())
    }

    fn transcript_with(
        journal: Vec<Entry>,
        stalls: Vec<crate::observe::Stall>,
        agent_waited: Vec<crate::observe::Stall>,
    ) -> String {
        let (scenario, profile) = (scenario(""), profile());
        let obs = Observation {
            scenario: &scenario,
            profile: &profile,
            journal,
            served: Default::default(),
            imds_vm_id: None,
            pool: Some(Vec::new()),
            pool_view: wirecheck_oracle::kvp::decode_pool(&[]),
            runs: vec![run(0, 3000, Exit::Code(0))],
            stalls,
            agent_waited,
            agent_working: Vec::new(),
            time_scale: Default::default(),
            deadline: scenario.agent.deadline,
            guest_calls: Vec::new(),
            guest_users: None,
        };
        transcript(&obs)
    }

    /// A prompt answer the fake recorded during a runner stall may have been read after the
    /// agent gave up on the request (seen: a goal state GET journaled 1.4 s late on a loaded
    /// machine, answered in 1 ms, sent again): the resend is the stall's, not the agent's flow.
    #[test]
    fn a_resend_after_an_answer_recorded_in_a_stall_is_not_counted() {
        let once = transcript_of(vec![health(1, 0, 201)]);
        let stall = crate::observe::Stall {
            end_ms: 10,
            len_ms: 1400,
        };
        let stalled =
            transcript_with_stalls(vec![health(1, 0, 201), health(2, 300, 201)], vec![stall]);
        assert_eq!(stalled, once);
        // Without the stall the same journal is the agent's own second request.
        let twice = transcript_of(vec![health(1, 0, 201), health(2, 300, 201)]);
        assert!(twice.contains("(attempts: 2)"), "{twice}");
    }

    /// Attempts are counted up to the first settled answer: a resend after a success (the 200
    /// came after the agent's request timeout on a loaded machine) leaves the transcript as it
    /// is on a quiet machine.
    #[test]
    fn a_resend_after_a_settled_answer_leaves_the_transcript_as_it_was() {
        let scripted = transcript_of(vec![
            health(1, 0, 503),
            health(2, 300, 503),
            health(3, 600, 201),
        ]);
        assert!(scripted.contains("(attempts: 3)"), "{scripted}");
        let once = transcript_of(vec![health(1, 0, 201)]);
        assert!(once.contains("(attempts: 1)"), "{once}");
        // A 201 the fake took 900 ms to finish (the agent's timeout is 1 s), then a resend.
        let mut slow = health(1, 0, 201);
        slow.done_ms = Some(900);
        let late = transcript_of(vec![slow.clone(), health(2, 1100, 201)]);
        assert_eq!(late, once);
        // A prompt answer, then the same request again: the agent's own flow, counted.
        let twice = transcript_of(vec![health(1, 0, 201), health(2, 300, 201)]);
        assert!(twice.contains("(attempts: 2)"), "{twice}");
        let mut slow_last = health(3, 600, 201);
        slow_last.done_ms = Some(1500);
        let scripted_then_late = transcript_of(vec![
            health(1, 0, 503),
            health(2, 300, 503),
            slow_last,
            health(4, 1700, 201),
        ]);
        assert_eq!(scripted_then_late, scripted);
    }

    /// Only exit statuses may differ; a resend, another request, a missing line, a kill or a
    /// body's "exit:" is what the agent emitted.
    #[test]
    fn only_exit_statuses_may_differ() {
        let accepted = transcript_of(vec![health(1, 0, 201)]);
        assert!(accepted.contains("\n  exit: status 0\n"), "{accepted}");
        let exited_1 = accepted.replace("exit: status 0", "exit: status 1");
        assert!(differs_only_in_exit_status(&accepted, &exited_1));
        assert!(!differs_only_in_exit_status(&accepted, &accepted));
        let killed = accepted.replace("exit: status 0", "exit: killed at the deadline");
        assert!(!differs_only_in_exit_status(&accepted, &killed));
        let resent = transcript_of(vec![health(1, 0, 201), health(2, 300, 201)]);
        assert!(!differs_only_in_exit_status(&accepted, &resent));
        let cut: String = accepted.lines().skip(1).map(|l| format!("{l}\n")).collect();
        assert!(!differs_only_in_exit_status(&accepted, &cut));
        let body = |n| format!("{accepted}    exit: status {n}\n");
        assert!(!differs_only_in_exit_status(&body(1), &body(2)));
    }

    /// A prompt answer to an agent its machine held off the CPU for about its timeout may have
    /// been read after it gave up: the resend is not counted, as for a runner stall.
    #[test]
    fn a_resend_after_the_agent_waited_for_a_cpu_is_not_counted() {
        let once = transcript_of(vec![health(1, 0, 201)]);
        let journal = || vec![health(1, 0, 201), health(2, 1100, 201)];
        let held = |len_ms| {
            transcript_with(
                journal(),
                vec![],
                vec![crate::observe::Stall {
                    end_ms: 600,
                    len_ms,
                }],
            )
        };
        assert_eq!(held(600), once);
        // Waits short of half the timeout leave the resend the agent's own.
        assert!(held(100).contains("(attempts: 2)"));
        // Waits after it moved on to another request (WALinuxAgent's goal state, then the
        // hosting configuration it names) did not keep it from the answer: a later fetch is
        // its own flow, however loaded the machine was then.
        let moved_on = transcript_with(
            vec![
                health(1, 0, 201),
                crate::checks::tests::imds(2, 50, 200),
                health(3, 1100, 201),
            ],
            vec![],
            vec![crate::observe::Stall {
                end_ms: 700,
                len_ms: 600,
            }],
        );
        assert!(moved_on.contains("(attempts: 2)"), "{moved_on}");
    }

    #[test]
    fn the_vm_id_field_of_cloud_init_26_event_keys_is_one_placeholder() {
        let uuid = "9a8b7c6d-0000-4000-8000-000000000001";
        for vm in [
            "00000000-0000-0000-0000-000000000000",
            "0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a",
        ] {
            assert_eq!(
                event_key(&format!("CLOUD_INIT|1733|start|azure-ds|{vm}|{uuid}")),
                format!("CLOUD_INIT|1733|start|azure-ds|<vm-id>|{uuid}")
            );
            assert_eq!(
                event_key(&format!("CLOUD_INIT|1733|diagnostic|n|{vm}|{uuid}|3")),
                format!("CLOUD_INIT|1733|diagnostic|n|<vm-id>|{uuid}|3")
            );
        }
        // 25.x and older: no VM id field.
        for key in [
            format!("CLOUD_INIT|1733|start|azure-ds|{uuid}"),
            format!("CLOUD_INIT|1733|diagnostic|n|{uuid}|3"),
            "PROVISIONING_REPORT".to_owned(),
        ] {
            assert_eq!(event_key(&key), key);
        }
    }

    #[test]
    fn json_is_canonical_whatever_the_key_order() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"b":1,"a":{"d":2,"c":[1,{"y":0,"x":1}]}}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str(r#"{"a":{"c":[1,{"x":1,"y":0}],"d":2},"b":1}"#).unwrap();
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(
            canonical(&a),
            r#"{"a":{"c":[1,{"x":1,"y":0}],"d":2},"b":1}"#
        );
    }

    #[test]
    fn xml_layouts_are_told_apart() {
        assert_eq!(
            xml_layout("<?xml version=\"1.0\"?>\n<Health>\n  <A/>\n</Health>\n"),
            "declaration, LF, 2-space indentation"
        );
        assert_eq!(
            xml_layout("<Health>\r\n\t<A/>\r\n</Health>"),
            "no declaration, CRLF, tab indentation"
        );
        assert_eq!(
            xml_layout("<Health><A/></Health>"),
            "no declaration, one line, no indentation"
        );
    }

    /// The first different request after each: a repeat shares its successor's, the last none.
    #[test]
    fn each_request_knows_when_the_agent_moved_on() {
        use crate::checks::tests::health;
        let entries: Vec<Entry> = (0..5).map(|i| health(i + 1, i * 100, 200)).collect();
        let entries: Vec<&Entry> = entries.iter().collect();
        let texts: Vec<String> = ["a", "a", "b", "a", "a"].map(String::from).to_vec();
        assert_eq!(
            moved_on_at(&entries, &texts),
            [Some(200), Some(200), Some(300), None, None]
        );
        assert!(moved_on_at(&[], &[]).is_empty());
    }
}
