//! Agent profiles: how to launch an agent, what it claims, and how it is expected to react
//! where real agents legitimately differ.
//!
//! One TOML file per agent in `conformance/agents/` (see `provision-report.toml` for a
//! commented example). Unknown keys are errors; every error names the file, line and field.
//! Here the model (`AgentProfile` and its parts) and how it is loaded and found; the file as
//! written in `raw.rs`, its checks in `validate.rs`, `[install]` (the registry of real agents)
//! in `install.rs`, argv templates in `template.rs`, agent time in `clock.rs`.

pub mod clock;
pub mod install;
mod raw;
pub mod template;
mod validate;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use fake_wireserver::clock::TimeScale;
use globset::GlobSet;
use serde::Deserialize;
use toml::Spanned;
use wirecheck_oracle::encoded::Dialect;

use crate::diag::FileError;
pub use fake_wireserver::limits::Limits;
use raw::{NameOnly, ProfileFile};
use template::{Placeholder, RawArg, Template, Values, Word};
use validate::{Validate, encoded_dialect, reactions_from};

/// What the agent is asked to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Ready,
    Failure,
    InProgress,
}

impl Action {
    pub const ALL: [Action; 3] = [Action::Ready, Action::Failure, Action::InProgress];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::Ready => "ready",
            Action::Failure => "failure",
            Action::InProgress => "in-progress",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the agent reaches the fake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Attach {
    /// The agent takes loopback URLs (`{wireserver_url}`, `{imds_url}`).
    #[default]
    Url,
    /// The agent talks to the real addresses through `http_proxy` (the fake's proxy listener).
    Proxy,
    /// The agent runs in a network namespace on the real addresses (`fake-wireserver sandbox`).
    Sandbox,
}

impl Attach {
    pub fn as_str(self) -> &'static str {
        match self {
            Attach::Url => "url",
            Attach::Proxy => "proxy",
            Attach::Sandbox => "sandbox",
        }
    }
}

/// What a failure report's description holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FailureDescription {
    /// An encoded report (`result=error|reason=...`, docs/protocol.md §6): judged field by field.
    #[default]
    Encoded,
    /// WALinuxAgent's exception text `[ClassName] message` (§9.1): its own dialect; it cannot
    /// carry the requested reason, so report.description is informational for it.
    ExceptionText,
}

/// When an agent's run is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Done {
    /// When it exits (every agent that is a one-shot command).
    #[default]
    Exit,
    /// When its terminal report (Ready, or NotReady other than `Provisioning`) was accepted and
    /// `done_grace` seconds passed: the harness then ends its process tree, and that end is
    /// not a failure. For daemons that never exit (WALinuxAgent sleeps after reporting).
    /// Sandbox attach only (the sandbox owns the journal and the agent's PID namespace).
    TerminalReport,
}

impl Done {
    pub fn as_str(self) -> &'static str {
        match self {
            Done::Exit => "exit",
            Done::TerminalReport => "terminal-report",
        }
    }
}

/// Whether the agent sends a provisioning health report at all (`health_report`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum HealthReporting {
    /// It reports what it is asked to (every agent but one that leaves reporting to another).
    #[default]
    Sent,
    /// In this mode it sends no health report at all, whatever it is asked to do: another
    /// agent reports (WALinuxAgent 2.16 with `Provisioning.Agent=cloud-init`, PR #3484). Silence
    /// is the correct outcome: behaviour.terminal and report.shape fail any health report.
    None,
}

impl HealthReporting {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthReporting::Sent => "sent",
            HealthReporting::None => "none",
        }
    }
}

/// Something an agent may or may not implement; scenarios that need an unclaimed capability
/// are skipped for it, with the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// `POST /provisioning/health` (JSON).
    Json,
    /// Goal state + `POST /machine?comp=health` (XML).
    Xml,
    /// NotReady + ProvisioningFailed with an encoded report.
    Failure,
    /// NotReady + Provisioning.
    InProgress,
    /// `PROVISIONING_REPORT` written to the KVP pool file.
    Kvp,
    /// Provisions a simulated VM (`fake-wireserver sandbox --guest`) through its own
    /// provisioning path, choosing its own failure text (sandbox attach only).
    Guest,
}

impl Capability {
    /// Every capability, in the order `--claims` lists them.
    pub const ALL: [Capability; 6] = [
        Capability::Json,
        Capability::Xml,
        Capability::Failure,
        Capability::InProgress,
        Capability::Kvp,
        Capability::Guest,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Json => "json",
            Capability::Xml => "xml",
            Capability::Failure => "failure",
            Capability::InProgress => "in-progress",
            Capability::Kvp => "kvp",
            Capability::Guest => "guest",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Capability::Json => "the JSON health endpoint",
            Capability::Xml => "the XML goal state + health flow",
            Capability::Failure => "failure reports",
            Capability::InProgress => "in-progress reports",
            Capability::Kvp => "the KVP PROVISIONING_REPORT",
            Capability::Guest => "provisioning a guest",
        }
    }
}

/// How the agent treats a 403.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Forbidden {
    /// Every 403 is throttling: retried (WALinuxAgent).
    Throttling,
    /// Retried only when the body is the platform's throttle reply (`RequestRateLimitExceeded`).
    ThrottleBody,
    /// Never retried (azure-init).
    Fatal,
}

fn retry() -> Reaction {
    Reaction::Retry
}

/// Retry or give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reaction {
    Retry,
    Fatal,
}

/// What one budget covers (`budget_scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetScope {
    /// One budget for the whole exchange, from its first wireserver request (the recommended
    /// policy, docs/protocol.md §8.2).
    #[default]
    Flow,
    /// Each request's retries get a budget of their own, from its first attempt (cloud-init:
    /// `http_with_retries` per call, sources/helpers/azure.py:230-274): the health report's
    /// loop starts at its first POST, not at the goal state fetched before it.
    Request,
}

/// The expected reactions where agents legitimately differ (docs/protocol.md §8).
#[derive(Debug, Clone, PartialEq)]
pub struct Reactions {
    /// HTTP statuses the agent retries (403 is decided by `status_403`).
    pub retryable: BTreeSet<u16>,
    pub transport_errors: Reaction,
    pub status_403: Forbidden,
    /// XML flow: after a 410 on the health POST, the goal state is fetched again first.
    pub refresh_goal_state_on_410: bool,
    /// Seconds; `None`: the `retry_interval` the scenario passes to the agent.
    pub retry_interval_min: Option<f64>,
    /// Seconds: the longest sleep between attempts when the agent backs off (afterburn: 1, 2,
    /// 4, 5, 5 ... s). Only sizes a case's deadline; `None`: `retry_interval_min`.
    pub retry_interval_max: Option<f64>,
    /// Seconds; `None`: the `budget` the scenario passes to the agent.
    pub budget: Option<f64>,
    /// Seconds an unanswered request is waited for, when the agent's is fixed (cloud-init
    /// 22.4.2: 60 s read timeout); `None`: the `request_timeout` the scenario passes.
    pub request_timeout: Option<f64>,
    /// Requests per second under throttling; `None`: one per `retry_interval_min`.
    pub max_rate: Option<f64>,
    /// IMDS statuses retried, when they differ from `retryable`.
    pub imds_retryable: Option<BTreeSet<u16>>,
    /// IMDS 403 handling, when it differs from `status_403`.
    pub imds_status_403: Option<Forbidden>,
    /// Seconds between IMDS attempts, when they differ from `retry_interval_min` (cloud-init
    /// 25.1: 1 s for IMDS, 5 s for the wireserver).
    pub imds_retry_interval_min: Option<f64>,
    /// Seconds the agent keeps trying IMDS before it gives up on it, when fixed (cloud-init:
    /// 300 s, DataSourceAzure.py); `None`: within the `budget` the scenario passes.
    pub imds_budget: Option<f64>,
    /// What the agent does with an IMDS 2xx whose body is not the instance document (the
    /// recommended policy: retry it like a 500, after the interval).
    pub imds_unusable_body: Reaction,
    /// Seconds the agent waits after a 503 without `Retry-After` (the fake sends none), when
    /// that differs from its interval (cloud-init 25.1+ honours `Retry-After`, default 1 s).
    pub retry_interval_503: Option<f64>,
    /// Seconds the agent waits after a throttling answer (403, 429, 503), when that differs
    /// from its longest backoff (WALinuxAgent: 1 s, `restutil.py` THROTTLE_DELAY_IN_SECONDS).
    pub retry_interval_throttled: Option<f64>,
    /// What one budget covers (`budget_scope`).
    pub budget_scope: BudgetScope,
    /// Statuses whose `Retry-After` the agent sleeps before it retries, whatever is left of
    /// its budget (`honours_retry_after`; cloud-init 25.1+: a 503's, url_helper.py:433-439);
    /// empty: it retries at its own interval (the recommended policy, docs/protocol.md §8.2).
    /// A case grows by each such scripted `Retry-After`.
    pub honours_retry_after: Vec<u16>,
    /// Statuses the agent retries without end, past its budget, though it gives up on the
    /// rest (`never_gives_up_on`; cloud-init 25.1+: readurl retries a 503 without limit,
    /// url_helper.py:604-612). A scenario answering only those forever then ends when the
    /// budget and its wind-down are over ([`crate::runner::timing`]), without the allowance
    /// for an exit that never comes; behaviour.budget fails it for still running there, as
    /// its profile's deviation may declare.
    pub never_gives_up_on: Vec<u16>,
    /// `false`: the agent never stops trying on its own (a daemon that starts its loop over
    /// when its budget runs out: WALinuxAgent). A scenario that never lets its report through
    /// then runs to a horizon ([`crate::runner::timing`]) instead of to its budget, and
    /// behaviour.budget fails it for running on, as its profile's deviation may declare.
    pub gives_up: bool,
    /// A loop bounded by counts, not by a clock (`tries`, `sequence_tries`): afterburn.
    pub tries: Option<Tries>,
}

/// An agent whose loops end after a fixed count of attempts rather than at a time budget
/// (afterburn's `retry::Retry`): each request is tried `per_request` times, the whole goal
/// state + health exchange `sequences` times, with sleeps doubling from `retry_interval_min`
/// up to `retry_interval_max` between tries. behaviour.budget then counts attempts, which
/// agent time cannot stretch, and the runner sizes an endless scenario from the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tries {
    pub per_request: u32,
    pub sequences: u32,
}

/// The UTC timestamp style of an agent's encoded reports (docs/protocol.md §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum TimestampStyle {
    /// `2026-11-29T14:30:57.000662+00:00` (cloud-init 24.4+, azure-init).
    #[serde(rename = "+00:00")]
    Utc,
    /// `2023-05-01T12:34:56.789012`, no offset (cloud-init 23.2–24.3).
    #[serde(rename = "naive")]
    Naive,
}

impl TimestampStyle {
    pub fn as_str(self) -> &'static str {
        match self {
            TimestampStyle::Utc => "+00:00",
            TimestampStyle::Naive => "naive",
        }
    }
}

/// How an agent writes its encoded reports, declared in the profile's `[encoded]` table: the
/// checks judge the agent by this dialect instead of guessing it from the report, and know
/// where it cuts (docs/protocol.md §6.1, §6.2, §6.5 step 7, §7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodedDialect {
    /// Quote character and field order (the oracle's two dialects).
    pub dialect: Dialect,
    pub timestamp: TimestampStyle,
    /// Characters of the encoded report kept in the health description (cut before XML
    /// escaping; cloud-init: 512). `None`: only the platform's 4096-byte limit applies.
    pub description_trim: Option<usize>,
    /// Characters of the encoded report kept in the KVP `PROVISIONING_REPORT` value (cut,
    /// never split; cloud-init: 1023). `None`: the host's 1022-byte value limit.
    pub kvp_cut: Option<usize>,
}

/// Exit statuses that mean "reported" and "not reported"; an empty list means "not judged".
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExitCodes {
    #[serde(default)]
    pub reported: Vec<i32>,
    #[serde(default)]
    pub failed: Vec<i32>,
}

/// The verdict a known deviation turns a failing case into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviationVerdict {
    NonStrict,
    Unimplemented,
}

/// A known deviation of a real agent: shown, never hidden.
#[derive(Debug, Clone)]
pub struct Deviation {
    pub cases: String,
    pub matcher: GlobSet,
    pub verdict: DeviationVerdict,
    pub reason: String,
}

/// A class of generated input (`wirecheck prop`) an agent knowingly does not handle, named in
/// a profile's `[[limitation]]` (`input = "non-latin-1"`): characters of a text, or answers of
/// a fault schedule (`input = "gone"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InputClass {
    /// A character above U+007F.
    NonAscii,
    /// A character above U+00FF.
    #[serde(rename = "non-latin-1")]
    NonLatin1,
    /// A character above U+FFFF (a surrogate pair in UTF-16).
    NonBmp,
    /// A C0 control character, DEL or a C1 control (CR, LF and TAB included).
    Control,
    /// A control character XML 1.0 cannot carry (C0 other than TAB, CR, LF).
    XmlInvalid,
    /// CR or LF.
    LineBreak,
    /// A schedule's 410 Gone (`schedule.*` properties).
    Gone,
    /// A schedule's answer with a `Retry-After`.
    RetryAfter,
    /// A schedule's plain 400.
    BadRequest,
    /// A schedule's 403 without the throttle body.
    PlainForbidden,
    /// A schedule's request that is never answered.
    Hang,
    /// A schedule's 200 whose body is not the document asked for (goal state, IMDS).
    Unusable,
    /// A schedule's reply cut short (the connection closed inside it).
    Partial,
}

impl InputClass {
    pub fn as_str(self) -> &'static str {
        match self {
            InputClass::NonAscii => "non-ascii",
            InputClass::NonLatin1 => "non-latin-1",
            InputClass::NonBmp => "non-bmp",
            InputClass::Control => "control",
            InputClass::XmlInvalid => "xml-invalid",
            InputClass::LineBreak => "line-break",
            InputClass::Gone => "gone",
            InputClass::RetryAfter => "retry-after",
            InputClass::BadRequest => "bad-request",
            InputClass::PlainForbidden => "plain-forbidden",
            InputClass::Hang => "hang",
            InputClass::Unusable => "unusable",
            InputClass::Partial => "partial",
        }
    }

    /// True for a class of a schedule's answers, false for one of characters.
    pub fn is_answer(self) -> bool {
        matches!(
            self,
            InputClass::Gone
                | InputClass::RetryAfter
                | InputClass::BadRequest
                | InputClass::PlainForbidden
                | InputClass::Hang
                | InputClass::Unusable
                | InputClass::Partial
        )
    }

    /// True when `c` belongs to the class (never, for a class of answers).
    pub fn has(self, c: char) -> bool {
        match self {
            InputClass::NonAscii => !c.is_ascii(),
            InputClass::NonLatin1 => u32::from(c) > 0xFF,
            InputClass::NonBmp => u32::from(c) > 0xFFFF,
            InputClass::Control => c.is_control(),
            InputClass::XmlInvalid => {
                (c < '\u{20}' && !matches!(c, '\t' | '\n' | '\r'))
                    || c == '\u{FFFE}'
                    || c == '\u{FFFF}'
            }
            InputClass::LineBreak => matches!(c, '\r' | '\n'),
            InputClass::Gone
            | InputClass::RetryAfter
            | InputClass::BadRequest
            | InputClass::PlainForbidden
            | InputClass::Hang
            | InputClass::Unusable
            | InputClass::Partial => false,
        }
    }

    /// True when some character of `text` belongs to the class.
    pub fn in_text(self, text: &str) -> bool {
        text.chars().any(|c| self.has(c))
    }
}

/// The endpoint a generated schedule answers for (`wirecheck prop`, `schedule.*`): its key in
/// an input's JSON form, and a `[[limitation]]`'s `endpoint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// The health report (either flow's).
    #[default]
    Health,
    /// `GET /machine/?comp=goalstate` (XML flow).
    #[serde(rename = "goalstate")]
    GoalState,
    /// The IMDS instance document.
    Imds,
}

impl Target {
    pub const ALL: [Target; 3] = [Target::Health, Target::GoalState, Target::Imds];

    /// The input's JSON key for this target's answers.
    pub fn key(self) -> &'static str {
        match self {
            Target::Health => "schedule",
            Target::GoalState => "goalstate",
            Target::Imds => "imds",
        }
    }

    /// What it answers, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Target::Health => "the health report",
            Target::GoalState => "the goal state",
            Target::Imds => "IMDS",
        }
    }
}

/// A known limitation for property runs (`[[limitation]]`): generated inputs of one class may
/// fail these checks of these properties; such a failure gets `verdict`, with the smallest
/// input that shows it as evidence.
#[derive(Debug, Clone)]
pub struct Limitation {
    /// Glob over property names (`failure.xml`).
    pub properties: String,
    pub property_matcher: GlobSet,
    pub input: InputClass,
    /// For a class of answers: the endpoint whose schedule holds them (the health report's by
    /// default).
    pub endpoint: Target,
    /// Glob over check ids (`behaviour.terminal`); `*` by default.
    pub checks: String,
    pub check_matcher: GlobSet,
    pub verdict: DeviationVerdict,
    pub reason: String,
}

impl Limitation {
    /// True when a failure of `check` in `property` is covered (for an input of the class).
    pub fn covers(&self, property: &str, check: &str) -> bool {
        self.property_matcher.is_match(property) && self.check_matcher.is_match(check)
    }
}

/// One action's command.
#[derive(Debug, Clone)]
pub struct Command {
    pub template: Template,
    /// `commands.ready`, for error messages.
    pub field: String,
    /// 1-based line of the field in the profile (None for ad-hoc agents).
    pub line: Option<usize>,
}

/// Where a profile came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File(PathBuf),
    /// `--agent-cmd`.
    AdHoc,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "{}", p.display()),
            Source::AdHoc => f.write_str("--agent-cmd"),
        }
    }
}

/// A loaded, validated agent profile.
#[derive(Debug, Clone)]
pub struct AgentProfile {
    pub name: String,
    pub description: String,
    pub source: Source,
    pub attach: Attach,
    pub commands: BTreeMap<Action, Command>,
    /// Extra environment, values rendered like template words.
    pub env: Vec<(String, Word)>,
    pub capabilities: BTreeSet<Capability>,
    pub reactions: Reactions,
    pub exit: ExitCodes,
    /// When a run is over (`done`, `done_grace`).
    pub done: Done,
    /// Seconds after the terminal report before the harness ends the agent (`done_grace`).
    pub done_grace: f64,
    /// Sandbox attach: folders given a private, empty scratch copy inside the sandbox (a case
    /// folder bind-mounted over each), for agents with fixed paths (`/var/log`).
    pub sandbox_private_dirs: Vec<PathBuf>,
    /// Sandbox attach: seconds added to every case's deadline for the agent's start-up
    /// (interpreter, key generation) before its first request (`[sandbox] startup`).
    pub sandbox_startup: f64,
    /// The `in-progress` command goes on to Ready by itself (WALinuxAgent with
    /// `Provisioning.Agent=cloud-init`): a scenario asking for in-progress then ready runs it
    /// once, and its reports are judged as the two runs (`in_progress_continues_to_ready`).
    pub in_progress_continues_to_ready: bool,
    /// What its failure descriptions hold (`failure_description`).
    pub failure_description: FailureDescription,
    /// Whether it sends a health report at all (`health_report`).
    pub health_report: HealthReporting,
    /// Whether its clock can run in agent time (`clock`), and the run's fixed speed.
    pub clock: clock::AgentClockPolicy,
    pub deviations: Vec<Deviation>,
    /// `[[limitation]]`: inputs of property runs the agent knowingly does not handle.
    pub limitations: Vec<Limitation>,
    /// `[encoded]`: the agent's encoded-report dialect, when declared.
    pub encoded: Option<EncodedDialect>,
    /// Plain words with unset placeholders expand to "" instead of failing (ad-hoc agents).
    pub lenient_placeholders: bool,
    /// `[snapshot]`: the headers its transcripts keep and its own redactions.
    pub snapshot: crate::snapshot::SnapshotOptions,
    /// `[limits]`: what each invocation's process tree may use (defaults where not given).
    pub limits: Limits,
    /// `[install]`: where a real agent comes from (`None`: the bundled reporter, an ad-hoc
    /// agent, or one the user installs).
    pub install: Option<install::Install>,
    /// `[guest]`: how it provisions a guest, when it claims `guest`.
    pub guest: GuestPolicy,
}

/// `[guest]`: an agent that provisions a simulated VM and chooses its own failure text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestPolicy {
    /// Its commands run only in a guest (`only`): scenarios without one are not offered to it.
    pub only: bool,
    /// What its failure text says for each guest scenario (by scenario id, without the flow):
    /// the text its report's reason must contain (`[guest.reasons]`).
    pub reasons: BTreeMap<String, String>,
}

/// Default `done_grace`: long enough for a last request after the report (WALA's IMDS GET).
pub const DEFAULT_DONE_GRACE: f64 = 2.0;

impl AgentProfile {
    /// Reads and validates a profile file.
    pub fn load(path: &Path) -> Result<AgentProfile, FileError> {
        let text = fake_wireserver::files::read_regular_text(
            path,
            fake_wireserver::files::MAX_INPUT_FILE_BYTES,
        )
        .map_err(|e| FileError::whole(path, format!("cannot read agent profile: {e}")))?;
        let profile = AgentProfile::from_toml_str(&text, path)?;
        // The name keys `--agent NAME` (NAME.toml), the results, the artifacts and the
        // snapshots: a profile whose file says otherwise could not be found by its name, and
        // two such files would share one agent's artifacts and snapshots.
        if let Some(stem) = path.file_stem().and_then(|s| s.to_str())
            && path.extension().is_some_and(|e| e == "toml")
            && stem != profile.name
        {
            let span = toml::from_str::<NameOnly>(&text)
                .map(|n| n.name.span())
                .unwrap_or(0..0);
            return Err(FileError::at(
                path,
                &text,
                span,
                Some("name"),
                format!(
                    "{:?} is not the file's name ({stem}.toml): rename the file to {}.toml or set name = {stem:?}",
                    profile.name, profile.name
                ),
            ));
        }
        Ok(profile)
    }

    /// Parses a profile (the raw serde model, then [`Validate`] part by part); `path` names it
    /// in errors.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<AgentProfile, FileError> {
        let file: ProfileFile = crate::diag::parse_toml(path, text)?;
        let v = Validate { path, text };
        let name = v.name(&file.name)?;
        let commands = v.commands(&file.commands, file.attach)?;
        let env = v.env(&file.env)?;
        let capabilities = v.capabilities(&file.capabilities, &commands)?;
        let reactions = match &file.reactions {
            // No [reactions]: judged by the recommended policy, like the ad-hoc agent.
            None => Reactions::recommended(),
            Some(r) => reactions_from(r, &|s, f, m| v.at(s, f, m))?,
        };
        let deviations = v.deviations(&file.deviations)?;
        let limitations = v.limitations(&file.limitations)?;
        let encoded = match &file.encoded {
            Some(e) => Some(encoded_dialect(e.get_ref(), &|s, f, m| v.at(s, f, m))?),
            None => None,
        };
        let snapshot = v.snapshot(&file.snapshot)?;
        let daemon = v.daemon(&file, &commands)?;
        let (sandbox_startup, sandbox_private_dirs) = v.sandbox(&file.sandbox, file.attach)?;
        let limits = v.limits(&file.limits)?;
        let fastest = v.fastest_clock(file.fastest_clock.as_ref())?;
        let install = match &file.install {
            Some(raw) => Some(raw.install(&|s, f, m| v.at(s, f, m))?),
            None => None,
        };
        let guest = v.guest(file.guest.as_ref(), &capabilities, file.attach)?;

        Ok(AgentProfile {
            name,
            description: file.description,
            source: Source::File(path.to_path_buf()),
            attach: file.attach,
            commands,
            env,
            capabilities,
            reactions,
            exit: file.exit,
            done: daemon.done,
            done_grace: daemon.done_grace,
            sandbox_private_dirs,
            sandbox_startup,
            snapshot,
            in_progress_continues_to_ready: daemon.in_progress_continues_to_ready,
            failure_description: file.failure_description,
            health_report: daemon.health_report,
            clock: clock::AgentClockPolicy {
                kind: file.clock,
                fixed: None,
                fastest,
            },
            deviations,
            limitations,
            encoded,
            lenient_placeholders: false,
            limits,
            install,
            guest,
        })
    }

    /// An ad-hoc agent from `--agent-cmd`: one command line for every action, `{action}`
    /// naming it (`ready`, `failure`, `in-progress`). It claims `claims` (`--claims`; none
    /// given: every capability) and is judged against the recommended policy (PROTOCOL.md
    /// §8.2), the same as the bundled reporter.
    ///
    /// Agents run in their case folder, so a relative path in the command line (`python3
    /// my_agent.py`, `./agent`) would name a file there, which never exists: a word that
    /// names a regular file relative to `cwd` (where wirecheck was started) is made absolute.
    /// A bare program name stays a name looked up next to wirecheck and on PATH, and the word
    /// after `-m` or `-c` (an interpreter's module or code) is never a path.
    pub fn ad_hoc(
        command_line: &str,
        claims: &[Capability],
        cwd: &Path,
    ) -> Result<AgentProfile, String> {
        let args =
            template::split_command_line(command_line).map_err(|e| format!("--agent-cmd: {e}"))?;
        // Words that name a file here are made absolute, in groups too, but for the argument
        // of `-m` / `-c` (a module, a script's text).
        let mut previous = String::new();
        let mut absolute = |w: &String, program: bool| {
            let after_flag = matches!(previous.as_str(), "-m" | "-c");
            previous = w.clone();
            if after_flag {
                w.clone()
            } else {
                absolute_if_here(w, program, cwd)
            }
        };
        let words: Vec<RawArg> = args
            .iter()
            .enumerate()
            .map(|(i, arg)| match arg {
                RawArg::Word(w) => RawArg::Word(absolute(w, i == 0)),
                RawArg::Group(ws) => RawArg::Group(ws.iter().map(|w| absolute(w, false)).collect()),
            })
            .collect();
        let template = Template::parse(&words).map_err(|e| format!("--agent-cmd: {e}"))?;
        let commands = Action::ALL
            .into_iter()
            .map(|a| {
                (
                    a,
                    Command {
                        template: template.clone(),
                        field: "--agent-cmd".into(),
                        line: None,
                    },
                )
            })
            .collect();
        Ok(AgentProfile {
            name: "agent-cmd".into(),
            description: format!("ad-hoc agent: {command_line}"),
            source: Source::AdHoc,
            attach: Attach::Url,
            commands,
            env: Vec::new(),
            capabilities: if claims.is_empty() {
                [
                    Capability::Json,
                    Capability::Xml,
                    Capability::Failure,
                    Capability::InProgress,
                    Capability::Kvp,
                ]
                .into_iter()
                .collect()
            } else {
                claims.iter().copied().collect()
            },
            reactions: Reactions::recommended(),
            exit: ExitCodes {
                reported: vec![0],
                failed: vec![],
            },
            done: Done::Exit,
            done_grace: DEFAULT_DONE_GRACE,
            sandbox_private_dirs: Vec::new(),
            sandbox_startup: 0.0,
            snapshot: crate::snapshot::SnapshotOptions::default(),
            in_progress_continues_to_ready: false,
            failure_description: FailureDescription::Encoded,
            health_report: HealthReporting::Sent,
            clock: clock::AgentClockPolicy::default(),
            deviations: Vec::new(),
            limitations: Vec::new(),
            encoded: None,
            lenient_placeholders: true,
            limits: Limits::DEFAULT,
            install: None,
            guest: GuestPolicy::default(),
        })
    }

    pub fn claims(&self, cap: Capability) -> bool {
        self.capabilities.contains(&cap)
    }

    /// The first deviation whose glob matches a case id.
    pub fn deviation_for(&self, case_id: &str) -> Option<&Deviation> {
        self.deviations.iter().find(|d| d.matcher.is_match(case_id))
    }

    /// Values of `[env]` for one invocation (entries whose placeholders have no value are left
    /// out).
    pub fn render_env(&self, values: &Values) -> Vec<(String, String)> {
        self.env
            .iter()
            .filter_map(|(k, w)| values.render(w).map(|v| (k.clone(), v)))
            .collect()
    }
}

impl Reactions {
    /// docs/protocol.md §8.2: 404, 410, 429, 500, 503 and transport errors retried, 403 only with
    /// the platform throttle body, the XML flow refreshes the goal state on 410; IMDS as
    /// cloud-init does it (§8): 404, 410, 429, 500 retried, 403 fatal.
    pub fn recommended() -> Reactions {
        Reactions {
            retryable: [404, 410, 429, 500, 503].into_iter().collect(),
            transport_errors: Reaction::Retry,
            status_403: Forbidden::ThrottleBody,
            refresh_goal_state_on_410: true,
            retry_interval_min: None,
            retry_interval_max: None,
            budget: None,
            request_timeout: None,
            max_rate: None,
            imds_retryable: Some([404, 410, 429, 500].into_iter().collect()),
            imds_status_403: Some(Forbidden::Fatal),
            imds_retry_interval_min: None,
            imds_budget: None,
            imds_unusable_body: Reaction::Retry,
            retry_interval_503: None,
            retry_interval_throttled: None,
            budget_scope: BudgetScope::Flow,
            honours_retry_after: Vec::new(),
            never_gives_up_on: Vec::new(),
            gives_up: true,
            tries: None,
        }
    }
}

/// `word`, made absolute when it is a relative path to a regular file in `cwd` (for the
/// program: only a path with a `/`, a bare name being looked up on PATH). Placeholders,
/// options, `KEY=VALUE` words and folders are left alone.
fn absolute_if_here(word: &str, program: bool, cwd: &Path) -> String {
    let path = Path::new(word);
    let candidate = !word.is_empty()
        && !path.is_absolute()
        && !word.contains('{')
        && !word.starts_with('-')
        && !word.contains('=')
        && (!program || word.contains('/'));
    if candidate && cwd.join(path).metadata().is_ok_and(|m| m.is_file()) {
        // `./agent.sh` becomes `<cwd>/agent.sh` (components() drops the `.`).
        return cwd
            .join(path)
            .components()
            .collect::<PathBuf>()
            .display()
            .to_string();
    }
    word.to_owned()
}

/// Finds profile `name`: a path to a `.toml` file, or `<agents_dir>/<name>.toml`.
pub fn find_profile(agents_dir: &Path, name: &str) -> Result<AgentProfile, FileError> {
    let looks_like_path = name.ends_with(".toml") || name.contains('/');
    let path = if looks_like_path {
        PathBuf::from(name)
    } else {
        agents_dir.join(format!("{name}.toml"))
    };
    // Anything there is read (and refused unless it is a regular file, saying what it is).
    if !path.exists() {
        let known = list_profiles(agents_dir)
            .map(|names| names.join(", "))
            .unwrap_or_default();
        return Err(FileError::whole(
            &path,
            format!(
                "no agent profile named {name:?} (known in {}: {})",
                agents_dir.display(),
                if known.is_empty() { "none" } else { &known }
            ),
        ));
    }
    let profile = AgentProfile::load(&path)?;
    if !looks_like_path && profile.name != name {
        return Err(FileError::whole(
            &path,
            format!(
                "field `name`: the file is {name}.toml but declares name = {:?}; they must match",
                profile.name
            ),
        ));
    }
    Ok(profile)
}

/// Names of the profiles in a folder (file stems of `*.toml`), sorted.
pub fn list_profiles(agents_dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(agents_dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "toml")
            && let Some(stem) = path.file_stem()
        {
            names.push(stem.to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests;
