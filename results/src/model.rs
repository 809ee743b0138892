//! The run results model (contract §6): what every writer renders and what
//! `results.json` holds. Field names are a public, versioned interface
//! (`schema_version`, documented in `results/schema/results.schema.json`).

use fake_wireserver::AnswerKind;
use serde::{Deserialize, Serialize};

/// Version of the `results.json` shape. Bump it on any change a consumer
/// would notice (renamed, removed or retyped field, new verdict).
pub const SCHEMA_VERSION: u32 = 1;

/// How a case ended. Graded, so that CI can choose how strict to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The agent did what the protocol and its profile require.
    Pass,
    /// Accepted, but it deviates from the recommended behaviour (fails under `--strict`).
    NonStrict,
    /// The agent did something wrong.
    Fail,
    /// Observed and recorded, neither a pass nor a failure.
    Informational,
    /// The agent's profile says it does not implement this.
    Unimplemented,
    /// Not run (filtered out, or a precondition was missing).
    Skipped,
}

impl Verdict {
    /// Every verdict, in the order reports list them.
    pub const ALL: [Verdict; 6] = [
        Verdict::Pass,
        Verdict::NonStrict,
        Verdict::Fail,
        Verdict::Informational,
        Verdict::Unimplemented,
        Verdict::Skipped,
    ];

    /// Whether the verdict was reached by observing the agent: `pass`, `non-strict`, `fail`,
    /// `informational`. A profile's declaration (`unimplemented`, whether or not the case ran)
    /// and `skipped` say nothing about what the agent did. An agent with no judged case makes
    /// the run end "not judged" (`results::outcome`).
    pub fn is_judged(self) -> bool {
        matches!(
            self,
            Verdict::Pass | Verdict::NonStrict | Verdict::Fail | Verdict::Informational
        )
    }

    /// The serde spelling (`"non-strict"`), also used in reports and CSS classes.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::NonStrict => "non-strict",
            Verdict::Fail => "fail",
            Verdict::Informational => "informational",
            Verdict::Unimplemented => "unimplemented",
            Verdict::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `wirecheck run`: every agent, every case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunResults {
    pub schema_version: u32,
    /// RFC 3339 start time of the run.
    pub started: String,
    pub duration_ms: u64,
    pub wirecheck_version: String,
    /// The commit the wirecheck binary was built from (or `unknown`): with the version, the
    /// exact build. Absent in files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wirecheck_commit: Option<String>,
    /// Set when the run was cut short by a signal (`SIGINT`, `SIGTERM`, `SIGHUP`): the results are
    /// partial; cases not run, or cut off, are `skipped` saying so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// Set when the machine refused the agents' containment (namespaces, mounts): why. Url
    /// agents then ran in wirecheck's own namespaces, where one could reach a neighbour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncontained: Option<String>,
    /// What the run was (its plan, its partition), so `wirecheck merge` can tell the parts of
    /// one run from those of another. Absent in files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunInfo>,
    /// Agents that never got going (in no scenario with a reachable fake did they send a
    /// request or end well): the user's setup, not a verdict. Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub never_started: Vec<NeverStartedAgent>,
    /// Health flows an agent does not claim: the scenarios on them were not offered to it
    /// (neither run nor skipped), counted once here. Absent when every agent claims every flow
    /// the plan has.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unclaimed_flows: Vec<UnclaimedFlow>,
    pub agents: Vec<AgentResults>,
}

/// Scenarios an agent was not offered, and what the plan had of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnclaimedFlow {
    pub agent: String,
    /// Why they were not offered: a flow it does not claim, a guest it does not provision, or
    /// no guest for an agent that runs only in one.
    pub flow: NotOffered,
    /// Scenario instances that were not offered.
    pub scenarios: usize,
    /// Their selected cases.
    pub cases: usize,
}

/// Why an agent was not offered a scenario (the scenario's side of what the agent claims).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NotOffered {
    /// A scenario on the JSON health flow, to an agent that does not claim `json`.
    #[serde(rename = "json")]
    Json,
    /// A scenario on the XML flow, to an agent that does not claim `xml`.
    #[serde(rename = "xml")]
    Xml,
    /// A scenario with a guest, to an agent that does not claim `guest` (it provisions none).
    #[serde(rename = "guest")]
    Guest,
    /// A scenario without a guest, to an agent whose profile runs it only in one.
    #[serde(rename = "without-guest")]
    WithoutGuest,
}

impl NotOffered {
    pub const ALL: [NotOffered; 4] = [
        NotOffered::Json,
        NotOffered::Xml,
        NotOffered::Guest,
        NotOffered::WithoutGuest,
    ];

    /// The serialized name (`json`, `xml`, `guest`, `without-guest`).
    pub fn as_str(self) -> &'static str {
        match self {
            NotOffered::Json => "json",
            NotOffered::Xml => "xml",
            NotOffered::Guest => "guest",
            NotOffered::WithoutGuest => "without-guest",
        }
    }

    /// What a reader is shown: the flow, `with a guest` or `without a guest`.
    pub fn label(self) -> &'static str {
        match self {
            NotOffered::Json => "json",
            NotOffered::Xml => "xml",
            NotOffered::Guest => "with a guest",
            NotOffered::WithoutGuest => "without a guest",
        }
    }

    /// The one [`Self::label`] names.
    pub fn from_label(label: &str) -> Option<NotOffered> {
        NotOffered::ALL.into_iter().find(|n| n.label() == label)
    }
}

impl std::fmt::Display for UnclaimedFlow {
    /// `the json flow is not claimed: 30 scenarios (212 cases) not offered`, or `it runs only
    /// in a guest: 41 scenarios without one (312 cases) not offered` (the agent's name is the
    /// caller's to show).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let (scenarios, cases) = (self.scenarios, self.cases);
        let counted = match self.flow {
            NotOffered::Json | NotOffered::Xml => format!(
                "the {} flow is not claimed: {scenarios} scenario{} ({cases} case{})",
                self.flow.label(),
                plural(scenarios),
                plural(cases)
            ),
            NotOffered::Guest => format!(
                "it provisions no guest: {scenarios} scenario{} with one ({cases} case{})",
                plural(scenarios),
                plural(cases)
            ),
            NotOffered::WithoutGuest => format!(
                "it runs only in a guest: {scenarios} scenario{} without one ({cases} case{})",
                plural(scenarios),
                plural(cases)
            ),
        };
        write!(f, "{counted} not offered")
    }
}

/// An agent that never got going, and what its first run showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeverStartedAgent {
    pub agent: String,
    /// What the run said: its command, case folder, exit and stderr tail.
    pub message: String,
}

/// Which run a results.json belongs to, and which part of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInfo {
    /// `--run-id` (e.g. the CI's run number), when given: parts must agree on it.
    pub id: Option<String>,
    /// Fingerprint (16 hex digits) of the whole plan, every partition included: the wirecheck
    /// version, the agents, the case ids, whether snapshots were compared.
    pub plan: String,
    /// Cases in the whole plan, snapshot cases not counted.
    pub plan_cases: usize,
    /// The part this file holds (`--partition K/N`); 1/1 for a whole run or a merge.
    pub partition: PartInfo,
}

/// `--partition K/N` as recorded (1/1: not partitioned).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    pub k: usize,
    pub n: usize,
}

/// All cases run against one agent profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentResults {
    pub agent: String,
    pub cases: Vec<CaseResult>,
}

/// One (scenario, check) pair run against one agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseResult {
    /// Stable hierarchical id, e.g. `wire.health.xml.ready.1`.
    pub id: String,
    pub title: String,
    /// Scenario name (file stem) the case ran under.
    pub scenario: String,
    pub verdict: Verdict,
    /// Why; always `Some` for anything but `Pass`.
    pub reason: Option<String>,
    /// The journal entries, bytes and findings that decided the verdict.
    pub evidence: Vec<Evidence>,
    pub duration_ms: u64,
    pub timeline: Timeline,
    /// Folder of this case's artifacts, relative to the results folder.
    pub artifacts: Option<String>,
    /// How often the case was run, when more than once (absent: once): its timing was left
    /// unjudged by the machine's stalls, so it was run again ([`Attempts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Attempts>,
    /// Set on a `skipped` case that has no verdict about the agent (wirecheck's machinery
    /// failed, or it was interrupted). Not a results.json field: the runner sets it where it
    /// decides, and reading results.json back derives it from `reason`
    /// ([`NotJudged::of_reason`], the one place that wording is parsed).
    #[serde(skip)]
    pub not_judged: Option<NotJudged>,
}

/// The attempts of a case run more than once (cargo-nextest's retries, judged instead of
/// passed): an attempt whose timing the machine's stalls made uncertain is run again, up to a
/// bound, until one is judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempts {
    /// Attempts run in all (at least 2).
    pub count: u32,
    /// Of those, the ones whose timing the stalls left unjudged. Equal to `count`: every attempt
    /// stalled, and the verdict is `informational`.
    pub stalled: u32,
    /// The verdicts of the judged attempts, in order.
    pub judged: Vec<Verdict>,
    /// The judged attempts disagree: the agent's behaviour changed between runs. The case's
    /// verdict is then the worst of them, never hidden by a later pass.
    pub flaky: bool,
}

impl Attempts {
    /// Every attempt stalled: the case could not be judged on this machine.
    pub fn all_stalled(&self) -> bool {
        self.stalled >= self.count
    }
}

impl CaseResult {
    /// Attempts run (1 when `attempts` is absent).
    pub fn attempt_count(&self) -> u32 {
        self.attempts.as_ref().map_or(1, |a| a.count)
    }

    /// The judged attempts' verdicts differed.
    pub fn is_flaky(&self) -> bool {
        self.attempts.as_ref().is_some_and(|a| a.flaky)
    }

    /// Informational because every attempt's timing was left unjudged by the machine.
    pub fn is_stalled(&self) -> bool {
        self.attempts.as_ref().is_some_and(Attempts::all_stalled)
    }
}

/// Why a case has no verdict about the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotJudged {
    /// wirecheck's own machinery failed (`harness error: ...`): `run`, `merge` and `prop` exit 2.
    Harness,
    /// wirecheck was interrupted before or while the case ran.
    Interrupted,
}

impl NotJudged {
    /// The kind of a `skipped` case's reason as results.json has it (`wirecheck merge` reads
    /// results another process wrote); `None` for a case that was judged or did not apply.
    pub fn of_reason(verdict: Verdict, reason: Option<&str>) -> Option<NotJudged> {
        let reason = reason?;
        if verdict != Verdict::Skipped {
            return None;
        }
        if crate::reason::is_harness_error(reason) {
            Some(NotJudged::Harness)
        } else if crate::reason::is_unjudged(reason) {
            Some(NotJudged::Interrupted)
        } else {
            None
        }
    }
}

/// One piece of evidence behind a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub note: String,
    /// Journal `seq` numbers this evidence refers to.
    pub journal_seq: Vec<u64>,
    /// The bytes that matter (a header line, a body excerpt, a KVP record), as text.
    pub excerpt: Option<String>,
}

/// What happened on the wire over time, for the report's timeline.
/// All times are milliseconds on one clock (the fake's, started with the case).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// The wall-clock budget the agent is expected to respect, if the check has one.
    pub budget_ms: Option<u64>,
    /// When the runner would have stopped the agent.
    pub deadline_ms: u64,
    /// When the agent process exited (`None`: killed at the deadline or never started).
    pub agent_exit_ms: Option<u64>,
    pub events: Vec<TimelineEvent>,
    /// How each agent invocation of the scenario ended, with the end of its stderr. Optional:
    /// absent (not `[]`) when nothing ran, so files written before it existed read the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<RunEnd>,
    /// Agent time: the agent's clock and the fake's ran this many times faster than the wall
    /// clock, and every time here is the agent's. Absent: the wall clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_scale: Option<u32>,
}

/// How one agent invocation ended, and the last lines it wrote to stderr.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    /// What happened, for people: `exit status 1`, `killed by signal 9`, `could not be
    /// started: ...`, `still running at the deadline (process group killed)`.
    pub exit: String,
    /// The exit status when it exited on its own (`None`: a signal, the deadline, never started).
    pub exit_code: Option<i32>,
    /// The last [`RunEnd::TAIL_LINES`] lines of its stderr, at most [`RunEnd::TAIL_BYTES`]
    /// bytes (cut on a character boundary), as text; `""` when it wrote nothing.
    pub stderr_tail: String,
    /// How many bytes it wrote to stderr in all (the tail may be a small part of it).
    pub stderr_bytes: u64,
}

impl RunEnd {
    pub const TAIL_LINES: usize = 12;
    pub const TAIL_BYTES: usize = 1024;

    /// The bounded tail of `text`: its last [`Self::TAIL_LINES`] lines, then at most
    /// [`Self::TAIL_BYTES`] bytes of them (the end kept, cut on a character boundary).
    pub fn tail(text: &str) -> String {
        let text = text.trim_end_matches(['\n', '\r']);
        // The newline before the last TAIL_LINES lines, counted from the end.
        let start = text
            .rmatch_indices('\n')
            .nth(Self::TAIL_LINES - 1)
            .map_or(0, |(index, _)| index + 1);
        let mut tail = &text[start..];
        if tail.len() > Self::TAIL_BYTES {
            let mut cut = tail.len() - Self::TAIL_BYTES;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail = &tail[cut..];
        }
        tail.to_string()
    }
}

/// One request the fake received and how it was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEvent {
    /// When the request head arrived.
    pub at_ms: u64,
    /// When the answer finished or the fault was applied (`None`: never, e.g. a hang).
    pub done_ms: Option<u64>,
    /// Never answered (a hang): when the agent closed the connection, i.e. gave up waiting
    /// (`None`: answered, or still open when the agent was done).
    #[serde(default)]
    pub closed_ms: Option<u64>,
    /// Endpoint id (docs/fake-wireserver.md, "Endpoint ids").
    pub endpoint: String,
    /// Short request line, e.g. `POST /provisioning/health`.
    pub label: String,
    /// The HTTP status, with the scripted behaviour in parentheses when there
    /// was one (`"201"`, `"503"`, `"403 (throttled)"`, `"201 (delay)"`,
    /// `"200 (partial)"`), or the transport behaviour (`"hang"`, `"reset"`,
    /// `"close"`, `"malformed"`).
    pub answer: String,
    /// The answer was an injected fault (scripted step), not normal behaviour.
    pub fault: bool,
}

/// How many cases ended with each verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct VerdictCounts {
    pub pass: usize,
    pub non_strict: usize,
    pub fail: usize,
    pub informational: usize,
    pub unimplemented: usize,
    pub skipped: usize,
}

impl VerdictCounts {
    pub fn add(&mut self, verdict: Verdict) {
        *self.slot(verdict) += 1;
    }

    pub fn get(&self, verdict: Verdict) -> usize {
        match verdict {
            Verdict::Pass => self.pass,
            Verdict::NonStrict => self.non_strict,
            Verdict::Fail => self.fail,
            Verdict::Informational => self.informational,
            Verdict::Unimplemented => self.unimplemented,
            Verdict::Skipped => self.skipped,
        }
    }

    pub fn total(&self) -> usize {
        Verdict::ALL.iter().map(|v| self.get(*v)).sum()
    }

    fn slot(&mut self, verdict: Verdict) -> &mut usize {
        match verdict {
            Verdict::Pass => &mut self.pass,
            Verdict::NonStrict => &mut self.non_strict,
            Verdict::Fail => &mut self.fail,
            Verdict::Informational => &mut self.informational,
            Verdict::Unimplemented => &mut self.unimplemented,
            Verdict::Skipped => &mut self.skipped,
        }
    }
}

impl std::fmt::Display for VerdictCounts {
    /// `3 pass, 1 fail` (verdicts with a zero count left out; `0 cases` when empty).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = Verdict::ALL
            .iter()
            .filter(|v| self.get(**v) > 0)
            .map(|v| format!("{} {}", self.get(*v), v))
            .collect();
        if parts.is_empty() {
            f.write_str("0 cases")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

impl AgentResults {
    pub fn counts(&self) -> VerdictCounts {
        let mut counts = VerdictCounts::default();
        for case in &self.cases {
            counts.add(case.verdict);
        }
        counts
    }
}

/// The cases whose attempts a summary must show: `(agent, case)`, in the run's order.
#[derive(Debug, Default)]
pub struct Unsteady<'a> {
    /// Judged differently by their attempts.
    pub flaky: Vec<(&'a str, &'a CaseResult)>,
    /// Stalled on every attempt: informational, not judged on this machine.
    pub stalled: Vec<(&'a str, &'a CaseResult)>,
}

impl Unsteady<'_> {
    pub fn is_empty(&self) -> bool {
        self.flaky.is_empty() && self.stalled.is_empty()
    }
}

impl RunResults {
    /// The flaky cases and those every attempt of which stalled.
    pub fn unsteady(&self) -> Unsteady<'_> {
        let mut u = Unsteady::default();
        for a in &self.agents {
            for c in &a.cases {
                if c.is_flaky() {
                    u.flaky.push((&a.agent, c));
                } else if c.is_stalled() {
                    u.stalled.push((&a.agent, c));
                }
            }
        }
        u
    }

    /// An empty run stamped with the current schema version.
    pub fn new(started: impl Into<String>, wirecheck_version: impl Into<String>) -> RunResults {
        RunResults {
            schema_version: SCHEMA_VERSION,
            started: started.into(),
            duration_ms: 0,
            wirecheck_version: wirecheck_version.into(),
            wirecheck_commit: None,
            interrupted: None,
            uncontained: None,
            run: None,
            never_started: Vec::new(),
            unclaimed_flows: Vec::new(),
            agents: Vec::new(),
        }
    }

    /// An empty run stamped with a build: the version and the commit it was built from (the
    /// runner passes its own, `conformance::build_info`; this crate knows no build of its own).
    pub fn of_build(started: impl Into<String>, version: &str, commit: &str) -> RunResults {
        RunResults {
            wirecheck_commit: Some(commit.to_owned()),
            ..RunResults::new(started, version)
        }
    }

    /// The build that wrote the file, as `--version` names it: `0.1.0 (commit <hash>)`, or the
    /// bare version for a file without a commit.
    pub fn build(&self) -> String {
        match &self.wirecheck_commit {
            Some(commit) => format!("{} (commit {commit})", self.wirecheck_version),
            None => self.wirecheck_version.clone(),
        }
    }

    /// Counts over every agent.
    pub fn counts(&self) -> VerdictCounts {
        let mut counts = VerdictCounts::default();
        for case in self.agents.iter().flat_map(|a| &a.cases) {
            counts.add(case.verdict);
        }
        counts
    }

    /// Process exit code for `wirecheck run`: 1 if any case failed, or (with
    /// `strict`) any case is non-strict; else 0.
    pub fn exit_code(&self, strict: bool) -> i32 {
        let counts = self.counts();
        if counts.fail > 0 || (strict && counts.non_strict > 0) {
            1
        } else {
            0
        }
    }
}

impl TimelineEvent {
    /// How the report colours this answer: a transport fault anywhere in it
    /// (`"hang"`, `"200 (partial)"`) wins, else the family of its leading status
    /// (`"403 (throttled)"` is a client error, `"201 (delay)"` a success).
    pub fn answer_class(&self) -> AnswerClass {
        let words = self
            .answer
            .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
            .filter(|w| !w.is_empty());
        let mut status = None;
        for (index, word) in words.enumerate() {
            // Transport behaviours: the agent got no usable HTTP answer, whatever the status
            // line said. The label names them as the journal does.
            if word
                .parse::<AnswerKind>()
                .is_ok_and(AnswerKind::is_transport_fault)
            {
                return AnswerClass::Transport;
            }
            if index == 0 {
                status = word.parse::<u16>().ok();
            }
        }
        match status {
            Some(200..=299) => AnswerClass::Success,
            Some(300..=399) => AnswerClass::Redirect,
            Some(400..=499) => AnswerClass::ClientError,
            Some(_) => AnswerClass::ServerError,
            None => AnswerClass::Transport,
        }
    }
}

/// Colour family of an answer in the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerClass {
    Success,
    Redirect,
    ClientError,
    ServerError,
    /// Not an HTTP status: hang, reset, close, malformed, partial, ...
    Transport,
}

impl AnswerClass {
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerClass::Success => "ok",
            AnswerClass::Redirect => "redirect",
            AnswerClass::ClientError => "client-error",
            AnswerClass::ServerError => "server-error",
            AnswerClass::Transport => "transport",
        }
    }
}
