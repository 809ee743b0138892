//! Agent profiles: how to launch an agent, what it claims, and how it is expected to react
//! where real agents legitimately differ.
//!
//! One TOML file per agent in `conformance/agents/` (see `provision-report.toml` for a
//! commented example). Unknown keys are errors; every error names the file, line and field.

pub mod clock;
pub mod install;
pub mod template;

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
use template::{Placeholder, RawArg, Template, Values, Word};

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
}

impl Capability {
    /// Every capability, in the order `--claims` lists them.
    pub const ALL: [Capability; 5] = [
        Capability::Json,
        Capability::Xml,
        Capability::Failure,
        Capability::InProgress,
        Capability::Kvp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Json => "json",
            Capability::Xml => "xml",
            Capability::Failure => "failure",
            Capability::InProgress => "in-progress",
            Capability::Kvp => "kvp",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Capability::Json => "the JSON health endpoint",
            Capability::Xml => "the XML goal state + health flow",
            Capability::Failure => "failure reports",
            Capability::InProgress => "in-progress reports",
            Capability::Kvp => "the KVP PROVISIONING_REPORT",
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
/// a profile's `[[limitation]]` (`input = "non-latin-1"`).
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
        }
    }

    /// True when `c` belongs to the class.
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
        }
    }

    /// True when some character of `text` belongs to the class.
    pub fn in_text(self, text: &str) -> bool {
        text.chars().any(|c| self.has(c))
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
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: Spanned<String>,
    description: String,
    #[serde(default)]
    attach: Attach,
    commands: CommandsFile,
    #[serde(default)]
    env: BTreeMap<String, Spanned<String>>,
    capabilities: Vec<Capability>,
    reactions: Option<ReactionsFile>,
    #[serde(default)]
    exit: ExitCodes,
    done: Option<Spanned<Done>>,
    done_grace: Option<Spanned<f64>>,
    #[serde(default)]
    sandbox: SandboxFile,
    in_progress_continues_to_ready: Option<Spanned<bool>>,
    #[serde(default)]
    failure_description: FailureDescription,
    health_report: Option<Spanned<HealthReporting>>,
    #[serde(default)]
    clock: clock::ClockKind,
    fastest_clock: Option<Spanned<u32>>,
    #[serde(default, rename = "deviation")]
    deviations: Vec<DeviationFile>,
    #[serde(default, rename = "limitation")]
    limitations: Vec<LimitationFile>,
    encoded: Option<Spanned<EncodedFile>>,
    #[serde(default)]
    snapshot: SnapshotFile,
    #[serde(default)]
    limits: LimitsFile,
    install: Option<install::InstallFile>,
}

/// `[limits]`: each a whole number in the unit its name says (`Limits::RANGES`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    processes: Option<Spanned<i64>>,
    memory_mib: Option<Spanned<i64>>,
    file_size_mib: Option<Spanned<i64>>,
    open_files: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotFile {
    cases: Option<Spanned<String>>,
    headers: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    redact: Vec<Spanned<RedactFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RedactFile {
    field: Option<String>,
    pattern: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EncodedFile {
    quote: Spanned<String>,
    order: Spanned<String>,
    timestamp: TimestampStyle,
    description_trim: Option<Spanned<usize>>,
    kvp_cut: Option<Spanned<usize>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxFile {
    #[serde(default)]
    private_dirs: Option<Spanned<Vec<PathBuf>>>,
    startup: Option<Spanned<f64>>,
}

/// Default `done_grace`: long enough for a last request after the report (WALA's IMDS GET).
pub const DEFAULT_DONE_GRACE: f64 = 2.0;

/// Only the `name` of a profile, for its span.
#[derive(Debug, Deserialize)]
struct NameOnly {
    name: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandsFile {
    ready: Option<Spanned<Vec<RawArg>>>,
    failure: Option<Spanned<Vec<RawArg>>>,
    #[serde(rename = "in-progress")]
    in_progress: Option<Spanned<Vec<RawArg>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReactionsFile {
    retryable: Spanned<Vec<u16>>,
    transport_errors: Reaction,
    status_403: Forbidden,
    #[serde(default)]
    refresh_goal_state_on_410: bool,
    retry_interval_min: Option<Spanned<f64>>,
    retry_interval_max: Option<Spanned<f64>>,
    budget: Option<Spanned<f64>>,
    request_timeout: Option<Spanned<f64>>,
    max_rate: Option<Spanned<f64>>,
    imds_retryable: Option<Spanned<Vec<u16>>>,
    imds_status_403: Option<Forbidden>,
    imds_retry_interval_min: Option<Spanned<f64>>,
    imds_budget: Option<Spanned<f64>>,
    #[serde(default = "retry")]
    imds_unusable_body: Reaction,
    retry_interval_503: Option<Spanned<f64>>,
    retry_interval_throttled: Option<Spanned<f64>>,
    #[serde(default)]
    budget_scope: BudgetScope,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitationFile {
    property: Spanned<String>,
    input: InputClass,
    checks: Spanned<String>,
    verdict: DeviationVerdict,
    reason: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviationFile {
    cases: Spanned<String>,
    verdict: DeviationVerdict,
    reason: Spanned<String>,
}

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
        }
    }
}

/// The checks serde cannot make of a parsed profile, one part at a time, each error naming
/// the file, the line and the field (indexes from 1: `deviation[1].cases`).
struct Validate<'a> {
    path: &'a Path,
    text: &'a str,
}

/// `done`, `done_grace`, `in_progress_continues_to_ready`, `health_report`: how a daemon's
/// run ends.
struct Daemon {
    done: Done,
    done_grace: f64,
    in_progress_continues_to_ready: bool,
    health_report: HealthReporting,
}

impl Validate<'_> {
    fn at(&self, span: std::ops::Range<usize>, field: &str, message: String) -> FileError {
        FileError::at(self.path, self.text, span, Some(field), message)
    }

    /// `fastest_clock`: the fastest agent time the agent keeps up with (the default
    /// [`TimeScale::MAX`]).
    fn fastest_clock(&self, raw: Option<&Spanned<u32>>) -> Result<TimeScale, FileError> {
        let Some(raw) = raw else {
            return Ok(TimeScale::new(TimeScale::MAX).unwrap_or(TimeScale::WALL));
        };
        TimeScale::new(*raw.get_ref()).map_err(|e| self.at(raw.span(), "fastest_clock", e))
    }

    /// `name`: a folder's name in the results and snapshots.
    fn name(&self, name: &Spanned<String>) -> Result<String, FileError> {
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
    fn commands(
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
    fn env(
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
    fn capabilities(
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

    /// `[[deviation]]`: a case glob and a reason.
    fn deviations(&self, deviations: &[DeviationFile]) -> Result<Vec<Deviation>, FileError> {
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
    fn limitations(&self, limitations: &[LimitationFile]) -> Result<Vec<Limitation>, FileError> {
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
    fn reason(&self, reason: &Spanned<String>, table: &str, kind: &str) -> Result<(), FileError> {
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
    fn snapshot(&self, file: &SnapshotFile) -> Result<crate::snapshot::SnapshotOptions, FileError> {
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
    fn daemon(
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

    fn seconds_up_to_60(&self, v: &Spanned<f64>, field: &str) -> Result<f64, FileError> {
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
    fn sandbox(
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
    fn limits(&self, file: &LimitsFile) -> Result<Limits, FileError> {
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
fn reactions_from(
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

/// `[encoded]` → [`EncodedDialect`]: quote and order must name one of the two dialects (§6.1,
/// §6.2), and the cuts must fit the limits they stand for.
fn encoded_dialect(
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
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "demo"
description = "demo agent"

[commands]
ready = ["demo", "ready", "--url", "{wireserver_url}", ["--vm-id", "{vm_id}"]]

capabilities_placeholder = 1
"#;

    fn load(text: &str) -> Result<AgentProfile, FileError> {
        AgentProfile::from_toml_str(text, Path::new("agents/demo.toml"))
    }

    fn valid() -> String {
        r#"name = "demo"
description = "demo agent"
capabilities = ["json", "kvp"]

[commands]
ready = ["demo", "ready", "--url", "{wireserver_url}", ["--vm-id", "{vm_id}"]]

[reactions]
retryable = [429, 503]
transport_errors = "retry"
status_403 = "fatal"

[[deviation]]
cases = "retry.*"
verdict = "non-strict"
reason = "known"
"#
        .to_owned()
    }

    #[test]
    fn a_valid_profile_loads() {
        let p = load(&valid()).unwrap();
        assert_eq!(p.name, "demo");
        assert!(p.claims(Capability::Json) && !p.claims(Capability::Xml));
        assert_eq!(p.commands[&Action::Ready].line, Some(6));
        assert_eq!(p.deviation_for("retry.x.y").unwrap().reason, "known");
        assert!(p.deviation_for("wire.x").is_none());
    }

    #[test]
    fn array_tables_are_named_from_one_on_their_own_line() {
        let second = "\n[[deviation]]\ncases = \"[\"\nverdict = \"non-strict\"\nreason = \"r\"\n";
        let err = load(&format!("{}{second}", valid())).unwrap_err();
        assert_eq!(
            (err.line, err.field.as_deref()),
            (Some(19), Some("deviation[2].cases")),
            "{err}"
        );
        let second = "\n[[deviation]]\ncases = \"x.*\"\nverdict = \"lenient\"\nreason = \"r\"\n";
        let err = load(&format!("{}{second}", valid())).unwrap_err();
        assert_eq!(
            (err.line, err.field.as_deref()),
            (Some(20), Some("deviation[2].verdict")),
            "{err}"
        );
        assert!(err.message.contains("unknown variant `lenient`"), "{err}");
        let second = "\n[[deviation]]\ncases = \"x.*\"\nverdict = \"non-strict\"\nreason = \"\"\n";
        let err = load(&format!("{}{second}", valid())).unwrap_err();
        assert_eq!(
            (err.line, err.field.as_deref()),
            (Some(21), Some("deviation[2].reason")),
            "{err}"
        );
        // An unknown key names its table.
        let err = load(&valid().replace(
            "status_403 = \"fatal\"",
            "status_403 = \"fatal\"\nretryable_statuses = [1]",
        ))
        .unwrap_err();
        assert_eq!(
            (err.line, err.field.as_deref()),
            (Some(12), Some("reactions")),
            "{err}"
        );
        assert!(
            err.message
                .starts_with("unknown field `retryable_statuses`"),
            "{err}"
        );
    }

    #[test]
    fn a_profile_without_reactions_gets_the_recommended_policy() {
        let text = valid().replace(
            "[reactions]\nretryable = [429, 503]\ntransport_errors = \"retry\"\nstatus_403 = \"fatal\"\n",
            "",
        );
        assert!(!text.contains("[reactions]"));
        let p = load(&text).unwrap();
        assert_eq!(p.reactions, Reactions::recommended());
        // A [reactions] table given is still read whole.
        let p = load(&valid()).unwrap();
        assert_eq!(p.reactions.status_403, Forbidden::Fatal);
        assert!(load(&valid().replace("transport_errors = \"retry\"\n", "")).is_err());
    }

    #[test]
    fn a_profile_file_is_named_after_its_agent_wherever_it_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("my-agent.toml");
        std::fs::write(&other, valid()).unwrap();
        // By path as well as by name: the name keys results, artifacts and snapshots.
        for err in [
            AgentProfile::load(&other).unwrap_err(),
            find_profile(dir.path(), "my-agent").unwrap_err(),
            find_profile(Path::new("/nonexistent"), &other.display().to_string()).unwrap_err(),
        ] {
            assert_eq!(err.field.as_deref(), Some("name"), "{err}");
            assert_eq!(err.line, Some(1), "{err}");
            assert!(err.to_string().contains("my-agent.toml"), "{err}");
            assert!(err.to_string().contains("\"demo\""), "{err}");
        }
        let same = dir.path().join("demo.toml");
        std::fs::write(&same, valid()).unwrap();
        assert_eq!(AgentProfile::load(&same).unwrap().name, "demo");
    }

    #[test]
    fn unknown_fields_name_file_line_and_field() {
        let err = load(MINIMAL).unwrap_err().to_string();
        assert!(
            // The key is in [commands], which the message names as its table.
            err.starts_with(
                "agents/demo.toml:8:1: field `commands`: unknown field `capabilities_placeholder`"
            ),
            "{err}"
        );
    }

    #[test]
    fn unset_placeholders_outside_groups_are_rejected() {
        let text = valid().replace(r#"["--vm-id", "{vm_id}"]"#, r#""--vm-id", "{vm_id}""#);
        let err = load(&text).unwrap_err();
        assert_eq!(err.line, Some(6));
        assert_eq!(err.field.as_deref(), Some("commands.ready"));
        assert!(err.message.contains("optional group"), "{err}");
    }

    #[test]
    fn retryable_403_is_rejected_with_a_hint() {
        let err = load(&valid().replace("[429, 503]", "[403]")).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("reactions.retryable"));
        assert!(err.message.contains("status_403"), "{err}");
    }

    fn daemon(extra: &str) -> String {
        valid().replace(
            "capabilities = [\"json\", \"kvp\"]",
            &format!("capabilities = [\"json\", \"kvp\"]\n{extra}"),
        )
    }

    #[test]
    fn a_name_that_would_lead_out_of_a_folder_is_refused() {
        let err = load(&valid().replace("name = \"demo\"", "name = \"..\"")).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("name"), "{err}");
    }

    #[test]
    fn snapshot_options_load_and_bad_ones_name_their_field() {
        let text = format!(
            "{}\n[snapshot]\nheaders = [\"Content-Type\"]\nredact = [{{ field = \"host\" }}, {{ pattern = \"build-*\" }}]\n",
            valid()
        );
        let p = load(&text).unwrap();
        assert_eq!(p.snapshot.headers, Some(vec!["content-type".to_owned()]));
        assert_eq!(p.snapshot.redact.len(), 2);
        let bad = format!(
            "{}\n[snapshot]\nredact = [{{ field = \"a\", pattern = \"b\" }}]\n",
            valid()
        );
        let err = load(&bad).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("snapshot.redact[1]"), "{err}");
        let bad = format!(
            "{}\n[snapshot]\nredact = [{{ pattern = \"{}\" }}]\n",
            valid(),
            "*".repeat(200)
        );
        let err = load(&bad).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("snapshot.redact[1]"), "{err}");
    }

    #[test]
    fn daemon_fields_load_and_default() {
        let p = load(&valid()).unwrap();
        assert_eq!((p.done, p.done_grace), (Done::Exit, DEFAULT_DONE_GRACE));
        assert_eq!(p.failure_description, FailureDescription::Encoded);
        assert!(p.sandbox_private_dirs.is_empty() && !p.in_progress_continues_to_ready);
        let text = daemon(
            "attach = \"sandbox\"\ndone = \"terminal-report\"\ndone_grace = 1.5\nfailure_description = \"exception-text\"\n[sandbox]\nprivate_dirs = [\"/var/log\"]\nstartup = 8.0\n",
        );
        let p = load(&text).unwrap();
        assert_eq!((p.done, p.done_grace), (Done::TerminalReport, 1.5));
        assert_eq!(p.failure_description, FailureDescription::ExceptionText);
        assert_eq!(p.sandbox_private_dirs, [PathBuf::from("/var/log")]);
        assert_eq!(p.sandbox_startup, 8.0);
        assert_eq!(p.health_report, HealthReporting::Sent);
        let p = load(&daemon("health_report = \"none\"\n")).unwrap();
        assert_eq!(p.health_report, HealthReporting::None);
    }

    #[test]
    fn daemon_fields_are_validated_with_file_line_and_field() {
        for (extra, field, says) in [
            (
                "done = \"terminal-report\"\n",
                "done",
                "needs attach = \"sandbox\"",
            ),
            (
                "attach = \"sandbox\"\ndone_grace = 1.0\n",
                "done_grace",
                "only meaningful",
            ),
            (
                "attach = \"sandbox\"\ndone = \"terminal-report\"\ndone_grace = 90.0\n",
                "done_grace",
                "between 0 and 60",
            ),
            (
                "attach = \"sandbox\"\n[sandbox]\nprivate_dirs = [\"var/log\"]\n",
                "sandbox.private_dirs",
                "not an absolute folder",
            ),
            (
                "attach = \"sandbox\"\n[sandbox]\nprivate_dirs = [\"/var/../etc\"]\n",
                "sandbox.private_dirs",
                "not an absolute folder",
            ),
            (
                "[sandbox]\nprivate_dirs = [\"/var/log\"]\n",
                "sandbox.private_dirs",
                "only used",
            ),
            ("[sandbox]\nstartup = 3.0\n", "sandbox.startup", "only used"),
            (
                "attach = \"sandbox\"\nin_progress_continues_to_ready = true\n",
                "in_progress_continues_to_ready",
                "needs `commands.in-progress`",
            ),
        ] {
            let err = load(&daemon(extra)).unwrap_err();
            assert_eq!(err.field.as_deref(), Some(field), "{extra}: {err}");
            assert!(err.message.contains(says), "{extra}: {err}");
            assert!(err.line.is_some(), "{extra}: {err}");
        }
        let err = load(&daemon("failure_description = \"prose\"\n")).unwrap_err();
        assert!(err.to_string().contains("exception-text"), "{err}");
        let err = load(&daemon("health_report = \"quiet\"\n")).unwrap_err();
        assert!(err.to_string().contains("none"), "{err}");
        // No report to go on from.
        let text = daemon(
            "attach = \"sandbox\"\nhealth_report = \"none\"\nin_progress_continues_to_ready = true\n",
        )
        .replace("[commands]\n", "[commands]\nin-progress = [\"demo\"]\n");
        let err = load(&text).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("health_report"), "{err}");
        assert!(
            err.message.contains("in_progress_continues_to_ready"),
            "{err}"
        );
    }

    #[test]
    fn limits_load_default_and_name_their_field_when_out_of_range() {
        assert_eq!(load(&valid()).unwrap().limits, Limits::DEFAULT);
        let p = load(&format!(
            "{}\n[limits]\nprocesses = 64\nmemory_mib = 256\nfile_size_mib = 8\nopen_files = 128\n",
            valid()
        ))
        .unwrap();
        assert_eq!(
            p.limits,
            Limits {
                processes: 64,
                memory: 256 << 20,
                file_size: 8 << 20,
                open_files: 128,
            }
        );
        assert_eq!(
            load(&format!("{}\n[limits]\nmemory_mib = 512\n", valid()))
                .unwrap()
                .limits,
            Limits {
                memory: 512 << 20,
                ..Limits::DEFAULT
            }
        );
        for (line, field, says) in [
            (
                "processes = 4",
                "limits.processes",
                "from 16 to 32768, got 4",
            ),
            ("processes = -1", "limits.processes", "got -1"),
            (
                "memory_mib = 0",
                "limits.memory_mib",
                "from 64 to 1048576, got 0",
            ),
            (
                "file_size_mib = 9999999",
                "limits.file_size_mib",
                "got 9999999",
            ),
            ("open_files = 10", "limits.open_files", "from 64 to 1048576"),
        ] {
            let err = load(&format!("{}\n[limits]\n{line}\n", valid())).unwrap_err();
            assert_eq!(err.field.as_deref(), Some(field), "{line}: {err}");
            assert!(err.message.contains(says), "{line}: {err}");
            assert!(err.line.is_some(), "{line}: {err}");
        }
        let err = load(&format!("{}\n[limits]\nthreads = 9\n", valid())).unwrap_err();
        assert!(err.to_string().contains("threads"), "{err}");
        let err = load(&format!("{}\n[limits]\nprocesses = \"many\"\n", valid())).unwrap_err();
        assert!(err.to_string().contains("limits.processes"), "{err}");
    }

    #[test]
    fn ad_hoc_agents_claim_everything_unless_told() {
        let here = Path::new(".");
        let p = AgentProfile::ad_hoc("python3 agent.py {action}", &[], here).unwrap();
        assert_eq!(p.commands.len(), 3);
        assert!(p.claims(Capability::InProgress));
        assert!(p.claims(Capability::Kvp));
        let p = AgentProfile::ad_hoc(
            "python3 agent.py {action}",
            &[Capability::Json, Capability::Failure],
            here,
        )
        .unwrap();
        assert!(p.claims(Capability::Json) && p.claims(Capability::Failure));
        assert!(!p.claims(Capability::Kvp) && !p.claims(Capability::Xml));
        assert!(
            AgentProfile::ad_hoc("a {nope}", &[], here)
                .unwrap_err()
                .contains("unknown placeholder")
        );
    }

    /// The ready command's words as written (no groups in these templates).
    fn ready_words(p: &AgentProfile) -> Vec<String> {
        p.commands[&Action::Ready]
            .template
            .args
            .iter()
            .map(|a| match a {
                template::Arg::Word(w) => w.source().to_owned(),
                template::Arg::Group(_) => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn ad_hoc_paths_that_exist_here_are_made_absolute() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("my_agent.py"), "").unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/agent"), "").unwrap();
        std::fs::write(dir.path().join("python3"), "").unwrap();
        let p = AgentProfile::ad_hoc(
            "python3 my_agent.py {action} --url {wireserver_url} missing.py --x=my_agent.py",
            &[],
            dir.path(),
        )
        .unwrap();
        let words: Vec<String> = ready_words(&p);
        let abs = dir.path().join("my_agent.py").display().to_string();
        // A bare program name stays a PATH lookup even when a file of that name is here.
        assert_eq!(
            words,
            [
                "python3",
                abs.as_str(),
                "{action}",
                "--url",
                "{wireserver_url}",
                "missing.py",
                "--x=my_agent.py"
            ]
        );
        // A folder, and an interpreter's module, are not paths to rewrite.
        std::fs::create_dir(dir.path().join("mypkg")).unwrap();
        std::fs::write(dir.path().join("code"), "").unwrap();
        let p = AgentProfile::ad_hoc("python3 -m mypkg mypkg -c code {action}", &[], dir.path())
            .unwrap();
        let args: Vec<String> = ready_words(&p);
        assert_eq!(
            args,
            ["python3", "-m", "mypkg", "mypkg", "-c", "code", "{action}"]
        );
        let p = AgentProfile::ad_hoc("bin/agent {action}", &[], dir.path()).unwrap();
        assert_eq!(
            p.commands[&Action::Ready].template.program().source(),
            dir.path().join("bin/agent").display().to_string()
        );
    }

    #[test]
    fn limitations_are_read_and_bad_ones_named() {
        let base = r#"name = "l"
description = "l"
capabilities = ["json", "failure"]
[commands]
failure = ["true"]
[reactions]
retryable = [503]
transport_errors = "retry"
status_403 = "fatal"
"#;
        let with = |l: &str| {
            AgentProfile::from_toml_str(&format!("{base}[[limitation]]\n{l}"), Path::new("l.toml"))
        };
        let p = with("property = \"failure.*\"\ninput = \"non-bmp\"\nchecks = \"report.*\"\nverdict = \"unimplemented\"\nreason = \"UCS-2\"\n").unwrap();
        let l = &p.limitations[0];
        assert_eq!(
            (l.input, l.checks.as_str()),
            (InputClass::NonBmp, "report.*")
        );
        // The checks a limitation covers are said, never "all of them" by default.
        let e = with("property = \"failure.*\"\ninput = \"non-bmp\"\nverdict = \"unimplemented\"\nreason = \"UCS-2\"\n").unwrap_err();
        assert!(e.to_string().contains("checks"), "{e}");
        assert!(
            l.covers("failure.json", "report.description")
                && !l.covers("in-progress.json", "report.description")
        );
        assert!(InputClass::NonBmp.in_text("a😀") && !InputClass::NonBmp.in_text("aĀ"));
        assert!(
            InputClass::XmlInvalid.in_text("\u{1}") && !InputClass::XmlInvalid.in_text("\t\r\n")
        );
        let e = with("property = \"failure.*\"\ninput = \"non-bmp\"\nverdict = \"non-strict\"\nreason = \" \"\nchecks = \"*\"\n").unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(14), Some("limitation[1].reason")),
            "{e}"
        );
        let e = with("property = \"failure.*\"\ninput = \"emoji\"\nverdict = \"non-strict\"\nreason = \"r\"\nchecks = \"*\"\n").unwrap_err();
        assert!(e.to_string().contains("emoji") && e.line == Some(12), "{e}");
    }
}
