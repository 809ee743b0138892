//! Conformance scenario files (`scenarios/*.toml`): a fault plan for the fake (the `[fake]`
//! table, parsed by `fake_wireserver::Scenario`), what the agent is asked to do (`[agent]`),
//! what is expected (`[expect]`) and which checks apply (`checks`).
//!
//! ```toml
//! id = "retry.throttle.403"                  # case id prefix: cases are "<id>.<check>"
//! # flows = ["json", "xml"]                  # default: every flow the fake plans allow
//! title = "403 throttling burst, then success"
//! checks = ["protocol.*", "report.*", "behaviour.*"]
//!
//! [agent]
//! action = "ready"                           # or [[agent.run]] tables, one per invocation
//! # protocol = "xml"                        # one flow only (or top-level flows = [...])
//! budget = 3.0                               # seconds, passed as {budget}
//! retry_interval = 0.2                       # {retry_interval}
//! request_timeout = 1.0                      # {request_timeout}
//!
//! [fake]                                     # contract §3, verbatim
//! # `wireserver.health.*` is the health report of either flow: this file runs on both
//! # (`flows.rs`: instances `retry.throttle.403` and `retry.throttle.403.xml`).
//! [[fake.endpoint]]
//! id = "wireserver.health.*"
//! [[fake.endpoint.step]]
//! kind = "respond"
//! preset = "throttled"
//! times = 3
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;
use wirecheck_oracle::{HealthState, SubStatus};

use crate::agent::{Action, Capability};
use crate::catalog::{self, CheckId};
use crate::diag::{FileError, nth};

pub mod flows;
pub use flows::Protocol;

/// The VM id passed to agents (`{vm_id}`) unless a scenario says otherwise: fixed, so reports
/// are deterministic.
pub const DEFAULT_VM_ID: &str = "0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a";

/// Where `{wireserver_url}` / `{imds_url}` point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// The scenario's fake.
    #[default]
    Fake,
    /// A loopback port nothing listens on: connections are refused.
    Closed,
}

/// Expected end of the whole scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The terminal report was accepted by the wireserver.
    Reported,
    /// It could not be delivered (the agent must say so in its exit status).
    NotReported,
}

/// One agent invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    pub action: Action,
    pub reason: Option<String>,
    /// `KEY=VALUE` supporting data, in order.
    pub data: Vec<(String, String)>,
    pub description: Option<String>,
}

/// What the agent is asked to do, and with which knobs.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentPlan {
    pub runs: Vec<Run>,
    pub protocol: Protocol,
    /// Seconds.
    pub budget: f64,
    pub retry_interval: f64,
    pub request_timeout: f64,
    /// The runner kills an invocation still running after this many seconds.
    pub deadline: f64,
    /// `None`: the agent must read the VM id from IMDS (`{vm_id}` has no value).
    pub vm_id: Option<String>,
    pub wireserver: Target,
    pub imds: Target,
}

/// Expectations a check cannot derive from the journal and the profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expect {
    pub outcome: Option<Outcome>,
    /// The failure report's `reason` must contain this (e.g. an IMDS error the agent reports
    /// on its own).
    pub reason_contains: Option<String>,
    /// The health report's state (when the agent decides it, e.g. IMDS unavailable); validated
    /// to `Ready`, or `NotReady` with a known substatus.
    pub state: Option<HealthState>,
    pub substatus: Option<SubStatus>,
    /// In a guest: the users it must have after the agent provisioned it (`guest.users`).
    pub users: Vec<String>,
}

/// A loaded, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub id: String,
    pub title: String,
    pub description: Option<String>,
    pub file: PathBuf,
    /// File stem, the `scenario` of its cases; `<stem> (<flow>)` when the file runs on more
    /// than one flow.
    pub name: String,
    /// The `id` as the file writes it, shared by the instances of one file on each flow.
    pub family: String,
    pub agent: AgentPlan,
    pub expect: Expect,
    /// Checks that apply, in catalog order.
    pub checks: Vec<CheckId>,
    pub fake: fake_wireserver::Scenario,
    /// `[guest]`: the simulated VM the agent provisions through its own path, which decides
    /// its report (`fake_wireserver::guest`); None: the agent is told what to report.
    pub guest: Option<fake_wireserver::guest::Guest>,
}

impl Scenario {
    /// Capabilities an agent must claim for this scenario to run at all.
    pub fn required_capabilities(&self) -> BTreeSet<Capability> {
        let mut caps = BTreeSet::new();
        caps.insert(self.agent.protocol.capability());
        if self.guest.is_some() {
            caps.insert(Capability::Guest);
        }
        for run in &self.agent.runs {
            match run.action {
                Action::Ready => {}
                Action::Failure => {
                    caps.insert(Capability::Failure);
                }
                // A guest's progress before a terminal run is the agent's to report or not
                // (`runner::as_offered`).
                Action::InProgress if self.guest.is_some() && self.has_terminal_run() => {}
                Action::InProgress => {
                    caps.insert(Capability::InProgress);
                }
            }
        }
        caps
    }

    /// Whether a run asks for a terminal report (ready or failure).
    fn has_terminal_run(&self) -> bool {
        self.agent
            .runs
            .iter()
            .any(|r| r.action != Action::InProgress)
    }

    /// `<id>.<check>`.
    pub fn case_id(&self, check: CheckId) -> String {
        format!("{}.{}", self.id, check.as_str())
    }

    /// A rough estimate, in seconds, of how long a conforming agent waits in this scenario
    /// (scripted faults times the retry interval or timeout, or the whole budget when nothing
    /// will ever succeed). The runner's plan for a pair starts from it (`runner::timing`: with
    /// the agent's own fixed waits, or the deadline of a daemon that will not report), and it
    /// starts the longest pairs first.
    pub fn expected_wait(&self) -> f64 {
        use fake_wireserver::EndPolicy;
        let a = &self.agent;
        let runs = a.runs.len() as f64;
        let endless = a.wireserver == Target::Closed
            || self
                .fake
                .endpoints
                .iter()
                .any(|p| p.end != EndPolicy::Default);
        let imds_down = a.imds == Target::Closed
            || self
                .fake
                .plans_for(fake_wireserver::Service::Imds)
                .iter()
                .any(|p| p.end != EndPolicy::Default);
        let mut wait = 0.0;
        if endless {
            wait += a.budget;
        }
        if imds_down {
            wait += a.budget;
        }
        for plan in &self.fake.endpoints {
            for step in &plan.steps {
                let each = step.action.held_seconds(a.request_timeout) + a.retry_interval;
                wait += each * f64::from(step.times);
            }
        }
        if let Some(rl) = &self.fake.rate_limit {
            wait += rl.window * runs.max(2.0);
        }
        wait.min(a.deadline * runs)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.id, self.file.display())
    }
}

/// A string written as text, or generated: `{ text = "prefix ", repeat = "ab€", times = 3000 }`
/// (long descriptions without a 5 KB line in the file).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Text(String);

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Longest text a scenario hands the agent, in bytes: a failure's `reason`, a `description`,
/// a `vm_id`, one `data` item and all of them together. Each becomes one argument and one
/// environment variable (`WIRECHECK_CASE_REASON=...`), and Linux starts no program with a
/// string over 128 KiB (`MAX_ARG_STRLEN`); 8 KiB are left for a flag or a variable name
/// around it. Refused when the scenario loads, never a failure to start the agent.
pub const MAX_AGENT_TEXT: usize = 120 * 1024;
const AGENT_TEXT_WHY: &str = "it is passed as one argument and one environment variable, and Linux refuses strings over 128 KiB";

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Generated {
            #[serde(default)]
            text: String,
            repeat: String,
            times: u32,
        }
        #[derive(Deserialize)]
        #[serde(
            untagged,
            expecting = "a string, or a table { text = \"...\", repeat = \"...\", times = N }"
        )]
        enum Either {
            Plain(String),
            Generated(Generated),
        }
        Ok(match Either::deserialize(d)? {
            Either::Plain(s) => Text(s),
            Either::Generated(g) => {
                // Checked before allocating: `times = 4000000000` aborted the process.
                let max = crate::bounds::MAX_GENERATED_TEXT;
                let len = g
                    .repeat
                    .len()
                    .checked_mul(g.times as usize)
                    .and_then(|n| n.checked_add(g.text.len()))
                    .filter(|n| *n <= max);
                let Some(len) = len else {
                    return Err(serde::de::Error::custom(format!(
                        "the generated text ({} bytes of `repeat` {} times) is over the {max}-byte limit",
                        g.repeat.len(),
                        g.times
                    )));
                };
                let mut out = String::with_capacity(len);
                out.push_str(&g.text);
                for _ in 0..g.times {
                    out.push_str(&g.repeat);
                }
                Text(out)
            }
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    id: Spanned<String>,
    flows: Option<Spanned<Vec<Protocol>>>,
    title: String,
    description: Option<String>,
    checks: Spanned<Vec<Spanned<String>>>,
    agent: Spanned<AgentFile>,
    #[serde(default)]
    expect: ExpectFile,
    /// The simulated VM the agent provisions (`fake-wireserver sandbox --guest`).
    guest: Option<Spanned<fake_wireserver::guest::Guest>>,
    /// Parsed separately by `fake_wireserver::Scenario::from_toml_section`.
    #[serde(default)]
    #[allow(dead_code)]
    fake: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    action: Option<Action>,
    reason: Option<Spanned<Text>>,
    #[serde(default)]
    data: Vec<Spanned<String>>,
    description: Option<Spanned<Text>>,
    #[serde(default, rename = "run")]
    runs: Vec<Spanned<RunFile>>,
    protocol: Option<Spanned<Protocol>>,
    #[serde(default = "default_budget")]
    budget: Spanned<f64>,
    #[serde(default = "default_retry_interval")]
    retry_interval: Spanned<f64>,
    #[serde(default = "default_request_timeout")]
    request_timeout: Spanned<f64>,
    deadline: Option<Spanned<f64>>,
    vm_id: Option<Spanned<String>>,
    #[serde(default)]
    vm_id_from_imds: bool,
    #[serde(default)]
    wireserver: Target,
    #[serde(default)]
    imds: Target,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunFile {
    action: Action,
    reason: Option<Spanned<Text>>,
    #[serde(default)]
    data: Vec<Spanned<String>>,
    description: Option<Spanned<Text>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectFile {
    outcome: Option<Outcome>,
    reason_contains: Option<String>,
    state: Option<Spanned<String>>,
    substatus: Option<Spanned<String>>,
    users: Option<Spanned<Vec<String>>>,
}

fn default_budget() -> Spanned<f64> {
    Spanned::new(0..0, 3.0)
}
fn default_retry_interval() -> Spanned<f64> {
    Spanned::new(0..0, 0.2)
}
fn default_request_timeout() -> Spanned<f64> {
    Spanned::new(0..0, 1.0)
}

impl Scenario {
    /// Reads and validates a scenario file (including its `[fake]` table): one instance per
    /// flow it runs on ([`flows`]), in its flows' order.
    pub fn load(path: &Path) -> Result<Vec<Scenario>, FileError> {
        let text = fake_wireserver::files::read_regular_text(
            path,
            fake_wireserver::files::MAX_INPUT_FILE_BYTES,
        )
        .map_err(|e| FileError::whole(path, format!("cannot read scenario: {e}")))?;
        Scenario::from_toml_str(&text, path)
    }

    /// Parses and validates a scenario document (raw serde shapes first, then [`Validate`]
    /// part by part); `path` names it in errors. One instance per flow, as [`Scenario::load`].
    pub fn from_toml_str(text: &str, path: &Path) -> Result<Vec<Scenario>, FileError> {
        let file: ScenarioFile = crate::diag::parse_toml(path, text)?;
        let v = Validate { path, text };
        let family = v.id(&file.id)?;
        let declared = v.declared_flows(&file)?;
        let agent = v.agent(file.agent)?;
        let checks = v.checks(&file.checks)?;
        let expect = v.expect(file.expect)?;
        let guest = v.guest(file.guest)?;
        let all_in_progress = agent.runs.iter().all(|r| r.action == Action::InProgress);
        if all_in_progress
            && expect.state.is_some()
            && expect.substatus != Some(SubStatus::Provisioning)
        {
            return Err(FileError::whole(
                path,
                "field `expect.state`: it is the terminal report's, and every run here asks for an in-progress one",
            ));
        }
        if guest.is_none() && !expect.users.is_empty() {
            return Err(FileError::whole(
                path,
                "field `expect.users`: only a scenario with a [guest] has users to expect",
            ));
        }
        let fake = fake_table(path, text)?;
        let flows = flows::flows(declared.as_ref().map(|d| d.flows.as_slice()), &fake, |i| {
            nth("fake.endpoint", i)
        })
        .map_err(|msg| match &declared {
            Some(d) => v.at(d.span.clone(), d.field, msg),
            None => FileError::whole(path, format!("field `fake.endpoint`: {msg}")),
        })?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(flows
            .iter()
            .map(|flow| Scenario {
                id: flows::instance_id(&family, *flow, &flows),
                title: file
                    .title
                    .replace(flows::FLOW_PLACEHOLDER, &flow.as_str().to_uppercase()),
                description: file.description.clone(),
                name: match flows.len() {
                    1 => stem.clone(),
                    _ => format!("{stem} ({})", flow.as_str()),
                },
                family: family.clone(),
                file: path.to_path_buf(),
                agent: AgentPlan {
                    protocol: *flow,
                    ..agent.clone()
                },
                expect: expect.clone(),
                checks: checks.clone(),
                fake: fake.clone(),
                guest: guest.clone(),
            })
            .collect())
    }
}

/// The flows a file declares: top-level `flows = [...]`, or `[agent] protocol` for one.
struct DeclaredFlows {
    flows: Vec<Protocol>,
    span: Range<usize>,
    field: &'static str,
}

/// The checks serde cannot make of a parsed scenario file, one part at a time, each error
/// naming the file, the line and the field.
struct Validate<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Validate<'_> {
    /// `[guest]`: within the guest file's bounds (`Guest::validate`).
    fn guest(
        &self,
        guest: Option<Spanned<fake_wireserver::guest::Guest>>,
    ) -> Result<Option<fake_wireserver::guest::Guest>, FileError> {
        let Some(guest) = guest else {
            return Ok(None);
        };
        guest
            .get_ref()
            .validate()
            .map_err(|msg| self.at(guest.span(), "guest", msg))?;
        Ok(Some(guest.into_inner()))
    }
}

/// One invocation as written, before its rules are checked: where it is and what it is
/// called in errors (`agent` for the one-invocation form, `agent.run[N]` for a table).
struct WrittenRun {
    run: Run,
    span: Range<usize>,
    field: String,
}

impl Validate<'_> {
    fn at(&self, span: Range<usize>, field: &str, message: impl Into<String>) -> FileError {
        FileError::at(self.path, self.text, span, Some(field), message)
    }

    /// `id`: the prefix of every case id; `{flow}` in it stands for each instance's flow.
    fn id(&self, id: &Spanned<String>) -> Result<String, FileError> {
        let text = id.get_ref();
        let bare = text.replace(flows::FLOW_PLACEHOLDER, "json");
        let valid = !bare.is_empty()
            && bare.split('.').all(|part| {
                !part.is_empty()
                    && part.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
                    })
            });
        if !valid {
            return Err(self.at(
                id.span(),
                "id",
                format!(
                    "{text:?} is not a valid case id prefix: dot-separated parts of a-z, 0-9, '-', '_' (and `{{flow}}` for each instance's flow)"
                ),
            ));
        }
        Ok(text.clone())
    }

    /// `flows = [...]` (each flow once, at least one) or `[agent] protocol`, not both; `None`
    /// when the file leaves its flows to its fake plans.
    fn declared_flows(&self, file: &ScenarioFile) -> Result<Option<DeclaredFlows>, FileError> {
        let protocol = file.agent.get_ref().protocol.as_ref();
        match (&file.flows, protocol) {
            (Some(_), Some(p)) => Err(self.at(
                p.span(),
                "agent.protocol",
                "give the flows once: top-level `flows = [...]`, or `[agent] protocol` for one flow, not both",
            )),
            (Some(flows), None) => {
                let list = flows.get_ref();
                let repeated = list.iter().enumerate().find(|(i, f)| list[..*i].contains(f));
                if list.is_empty() || repeated.is_some() {
                    return Err(self.at(
                        flows.span(),
                        "flows",
                        "list each flow the scenario runs on once: \"json\", \"xml\"",
                    ));
                }
                Ok(Some(DeclaredFlows {
                flows: list.clone(),
                span: flows.span(),
                field: "flows",
            }))
            }
            (None, Some(p)) => Ok(Some(DeclaredFlows {
                flows: vec![*p.get_ref()],
                span: p.span(),
                field: "agent.protocol",
            })),
            (None, None) => Ok(None),
        }
    }

    /// `[agent]`: its invocations, timing knobs and VM id.
    fn agent(&self, agent: Spanned<AgentFile>) -> Result<AgentPlan, FileError> {
        let span = agent.span();
        let a = agent.into_inner();
        let mut runs = Vec::new();
        for written in self.written_runs(&a, &span)? {
            self.run_rules(&written)?;
            runs.push(written.run);
        }
        let timing = self.timing(&a, &span)?;
        if a.vm_id_from_imds && a.vm_id.is_some() {
            return Err(self.at(
                span,
                "agent.vm_id",
                "give `vm_id` or `vm_id_from_imds = true`, not both",
            ));
        }
        let vm_id = if a.vm_id_from_imds {
            None
        } else {
            Some(
                self.agent_text(a.vm_id.as_ref(), "agent.vm_id")?
                    .unwrap_or_else(|| DEFAULT_VM_ID.to_owned()),
            )
        };
        Ok(AgentPlan {
            runs,
            // Each instance sets its own flow (`Scenario::from_toml_str`).
            protocol: Protocol::default(),
            budget: timing.budget,
            retry_interval: timing.retry_interval,
            request_timeout: timing.request_timeout,
            deadline: timing.deadline,
            vm_id,
            wireserver: a.wireserver,
            imds: a.imds,
        })
    }

    /// `action` (one invocation) or `[[agent.run]]` tables, not both and not neither.
    fn written_runs(
        &self,
        a: &AgentFile,
        span: &Range<usize>,
    ) -> Result<Vec<WrittenRun>, FileError> {
        match (a.action, a.runs.is_empty()) {
            (Some(action), true) => Ok(vec![WrittenRun {
                run: Run {
                    action,
                    reason: self.agent_text(a.reason.as_ref(), "agent.reason")?,
                    data: self.data(&a.data, "agent.data")?,
                    description: self.agent_text(a.description.as_ref(), "agent.description")?,
                },
                span: span.clone(),
                field: "agent".into(),
            }]),
            (None, false) => {
                if a.reason.is_some() || !a.data.is_empty() || a.description.is_some() {
                    return Err(self.at(
                        span.clone(),
                        "agent",
                        "`reason`, `data` and `description` go into each [[agent.run]] when runs are listed",
                    ));
                }
                a.runs
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let field = nth("agent.run", i);
                        let run = r.get_ref();
                        Ok(WrittenRun {
                            run: Run {
                                action: run.action,
                                reason: self
                                    .agent_text(run.reason.as_ref(), &format!("{field}.reason"))?,
                                data: self.data(&run.data, &format!("{field}.data"))?,
                                description: self.agent_text(
                                    run.description.as_ref(),
                                    &format!("{field}.description"),
                                )?,
                            },
                            span: r.span(),
                            field,
                        })
                    })
                    .collect()
            }
            (Some(_), false) => Err(self.at(
                span.clone(),
                "agent.action",
                "give either `action` (one invocation) or [[agent.run]] tables, not both",
            )),
            (None, true) => Err(self.at(
                span.clone(),
                "agent.action",
                "missing: \"ready\", \"failure\" or \"in-progress\" (or [[agent.run]] tables)",
            )),
        }
    }

    /// `data = ["KEY=VALUE", ...]`, in order; each item, and all of them together, at most
    /// [`MAX_AGENT_TEXT`] bytes.
    fn data(
        &self,
        items: &[Spanned<String>],
        field: &str,
    ) -> Result<Vec<(String, String)>, FileError> {
        let mut total = 0;
        let data = items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                self.within_agent_text(item, &nth(field, i))?;
                // {data} as one environment variable: the items, a line each.
                total += item.get_ref().len() + 1;
                if total > MAX_AGENT_TEXT {
                    return Err(self.at(
                        item.span(),
                        field,
                        format!(
                            "the items up to this one are {total} bytes together, over the {MAX_AGENT_TEXT}-byte limit of one value handed to the agent ({AGENT_TEXT_WHY})"
                        ),
                    ));
                }
                match item.get_ref().split_once('=') {
                    Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
                    _ => Err(self.at(
                        item.span(),
                        &nth(field, i),
                        format!(
                            "{:?} is not KEY=VALUE",
                            crate::tools::text::clip(item.get_ref(), 80)
                        ),
                    )),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(data)
    }

    /// A text the agent is handed (a reason, a description, a VM id), within
    /// [`MAX_AGENT_TEXT`].
    fn agent_text<T: AsRef<str>>(
        &self,
        text: Option<&Spanned<T>>,
        field: &str,
    ) -> Result<Option<String>, FileError> {
        text.map(|t| {
            self.within_agent_text(t, field)?;
            Ok(t.get_ref().as_ref().to_owned())
        })
        .transpose()
    }

    fn within_agent_text<T: AsRef<str>>(
        &self,
        text: &Spanned<T>,
        field: &str,
    ) -> Result<(), FileError> {
        let len = text.get_ref().as_ref().len();
        if len > MAX_AGENT_TEXT {
            return Err(self.at(
                text.span(),
                field,
                format!(
                    "{len} bytes, over the {MAX_AGENT_TEXT}-byte limit of one value handed to the agent ({AGENT_TEXT_WHY})"
                ),
            ));
        }
        Ok(())
    }

    /// What each report kind takes: a failure its reason (and data), an in-progress report
    /// its description.
    fn run_rules(&self, written: &WrittenRun) -> Result<(), FileError> {
        let WrittenRun { run, span, field } = written;
        if run.action == Action::Failure && run.reason.is_none() {
            return Err(self.at(
                span.clone(),
                &format!("{field}.reason"),
                "a failure report needs a `reason`",
            ));
        }
        if run.action != Action::Failure && (run.reason.is_some() || !run.data.is_empty()) {
            return Err(self.at(
                span.clone(),
                field,
                format!(
                    "`reason` and `data` belong to failure reports, not `{}`",
                    run.action
                ),
            ));
        }
        if run.action != Action::InProgress && run.description.is_some() {
            return Err(self.at(
                span.clone(),
                &format!("{field}.description"),
                format!(
                    "only in-progress reports take a description (a `{}` report's description is generated by the agent)",
                    run.action
                ),
            ));
        }
        Ok(())
    }

    /// `budget`, `retry_interval`, `request_timeout`, `deadline`: positive seconds, bounded,
    /// the deadline past the budget.
    fn timing(&self, a: &AgentFile, span: &Range<usize>) -> Result<Timing, FileError> {
        let positive = |v: &Spanned<f64>, field: &str| -> Result<f64, FileError> {
            crate::bounds::positive_seconds(*v.get_ref())
                .map_err(|msg| self.at(v.span(), field, msg))
        };
        let budget = positive(&a.budget, "agent.budget")?;
        let retry_interval = positive(&a.retry_interval, "agent.retry_interval")?;
        let request_timeout = positive(&a.request_timeout, "agent.request_timeout")?;
        let deadline = match &a.deadline {
            Some(d) => positive(d, "agent.deadline")?,
            None => budget + request_timeout + 3.0,
        };
        if deadline <= budget {
            return Err(self.at(
                a.deadline.as_ref().map_or(span.clone(), |d| d.span()),
                "agent.deadline",
                format!("the deadline ({deadline} s) must be longer than the budget ({budget} s)"),
            ));
        }
        Ok(Timing {
            budget,
            retry_interval,
            request_timeout,
            deadline,
        })
    }

    /// `checks = [...]`: ids or globs of the catalog, each matching at least one check; the
    /// selection in catalog order.
    fn checks(&self, checks: &Spanned<Vec<Spanned<String>>>) -> Result<Vec<CheckId>, FileError> {
        let mut selected: BTreeSet<CheckId> = BTreeSet::new();
        for (i, pattern) in checks.get_ref().iter().enumerate() {
            // Named as a type error at the same element is (`checks[2]`).
            let field = nth("checks", i);
            let matched = catalog::matching(pattern.get_ref())
                .map_err(|msg| self.at(pattern.span(), &field, msg))?;
            if matched.is_empty() {
                return Err(self.at(
                    pattern.span(),
                    &field,
                    format!(
                        "{:?} matches no check; known: {}",
                        pattern.get_ref(),
                        CheckId::known()
                    ),
                ));
            }
            selected.extend(matched);
        }
        if selected.is_empty() {
            return Err(self.at(checks.span(), "checks", "list at least one check"));
        }
        Ok(selected.into_iter().collect())
    }

    /// `[expect]`: a state the agent may decide, with its substatus.
    fn expect(&self, e: ExpectFile) -> Result<Expect, FileError> {
        let state = e.state.as_ref();
        let substatus = e.substatus.as_ref();
        let valid = matches!(
            (
                state.map(|s| HealthState::from(s.get_ref().as_str())),
                substatus.map(|s| SubStatus::from(s.get_ref().as_str())),
            ),
            (None | Some(HealthState::Ready), None)
                | (
                    Some(HealthState::NotReady),
                    Some(SubStatus::ProvisioningFailed | SubStatus::Provisioning)
                )
        );
        if !valid {
            let span = state.or(substatus).map_or(0..0, |s| s.span());
            return Err(self.at(
                span,
                "expect.state",
                "expected state = \"Ready\" (no substatus), or state = \"NotReady\" with substatus = \"ProvisioningFailed\" or \"Provisioning\"",
            ));
        }
        Ok(Expect {
            users: e.users.map(Spanned::into_inner).unwrap_or_default(),
            outcome: e.outcome,
            reason_contains: e.reason_contains,
            state: e.state.map(|s| HealthState::from(s.into_inner())),
            substatus: e.substatus.map(|s| SubStatus::from(s.into_inner())),
        })
    }
}

/// The agent's timing knobs, validated.
struct Timing {
    budget: f64,
    retry_interval: f64,
    request_timeout: f64,
    deadline: f64,
}

/// The `[fake]` table, parsed by the fake's own reader with the document's line numbers; an
/// empty plan without one.
fn fake_table(path: &Path, text: &str) -> Result<fake_wireserver::Scenario, FileError> {
    let origin = path.display().to_string();
    let fake = fake_wireserver::Scenario::from_toml_section(text, &origin, "fake")
        .map_err(|e| fake_error(path, e))?;
    Ok(fake.unwrap_or_else(|| {
        let mut s = fake_wireserver::Scenario::new();
        s.origin = origin;
        s
    }))
}

/// The fake's errors carry `origin:line:column: field: message`; keep them as a [`FileError`].
fn fake_error(path: &Path, e: fake_wireserver::ScenarioError) -> FileError {
    match e {
        fake_wireserver::ScenarioError::Invalid {
            line,
            column,
            field,
            message,
            ..
        } => FileError {
            file: path.to_path_buf(),
            line: (line > 0).then_some(line),
            column: (line > 0).then_some(column),
            // The fake names fields from the document root (`fake.endpoint[1]...`).
            field: Some(if field.starts_with("fake") {
                field
            } else {
                format!("fake.{field}")
            }),
            message,
        },
        other => FileError::whole(path, other.to_string()),
    }
}

/// Loads every `*.toml` directly in `dir` (not recursively: sub-folders hold other things),
/// sorted by file name, or the one scenario file `dir` names (a schedule `wirecheck prop`
/// shrank, replayed as it was written). Ids must be unique.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, FileError> {
    if dir.is_file() {
        return Scenario::load(dir);
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|e| FileError::whole(dir, format!("cannot read the scenarios folder: {e}")))?;
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry
            .map_err(|e| FileError::whole(dir, format!("cannot read the scenarios folder: {e}")))?;
        let path = entry.path();
        if path.is_file() && path.extension().is_some_and(|e| e == "toml") {
            paths.push(path);
        }
    }
    paths.sort();
    if paths.is_empty() {
        return Err(FileError::whole(
            dir,
            "no scenario files (*.toml) in this folder",
        ));
    }
    let mut scenarios: Vec<Scenario> = Vec::with_capacity(paths.len());
    for path in paths {
        for scenario in Scenario::load(&path)? {
            push_unique(&mut scenarios, scenario)?;
        }
    }
    Ok(scenarios)
}

/// Adds `scenario` unless another file's instance already has its id: case ids must be
/// unique across files and flows.
pub fn push_unique(scenarios: &mut Vec<Scenario>, scenario: Scenario) -> Result<(), FileError> {
    if let Some(other) = scenarios.iter().find(|s| s.id == scenario.id) {
        return Err(FileError::whole(
            &scenario.file,
            format!(
                "field `id`: {:?} is already used by {}; case ids must be unique (a file on more than one flow adds `.<flow>` to its id for every flow but the first)",
                scenario.id,
                other.file.display()
            ),
        ));
    }
    scenarios.push(scenario);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first flow's instance.
    fn load(text: &str) -> Result<Scenario, FileError> {
        Scenario::from_toml_str(text, Path::new("scenarios/t.toml")).map(|mut v| v.remove(0))
    }

    fn instances(text: &str) -> Result<Vec<Scenario>, FileError> {
        Scenario::from_toml_str(text, Path::new("scenarios/t.toml"))
    }

    const HEALTH_500: &str = "[[fake.endpoint]]\nid = \"wireserver.health.*\"\n[[fake.endpoint.step]]\nkind = \"respond\"\nstatus = 500\n";

    #[test]
    fn a_file_runs_once_per_flow_its_faults_apply_to() {
        let all = instances(&format!("{BASE}{HEALTH_500}")).unwrap();
        let got: Vec<(&str, Protocol, &str, &str)> = all
            .iter()
            .map(|s| {
                (
                    s.id.as_str(),
                    s.agent.protocol,
                    s.name.as_str(),
                    s.family.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "wire.health.json.ready",
                    Protocol::Json,
                    "t (json)",
                    "wire.health.json.ready"
                ),
                (
                    "wire.health.json.ready.xml",
                    Protocol::Xml,
                    "t (xml)",
                    "wire.health.json.ready"
                ),
            ]
        );
        assert_eq!(all[0].fake, all[1].fake);
        // A goal-state fault is the XML flow's only; `protocol` names one flow.
        let goal = BASE.to_owned()
            + "[[fake.endpoint]]\nid = \"wireserver.goalstate\"\n[[fake.endpoint.step]]\nkind = \"hang\"\n";
        let one = instances(&goal).unwrap();
        assert_eq!(
            (one.len(), one[0].agent.protocol, one[0].name.as_str()),
            (1, Protocol::Xml, "t")
        );
        let json = instances(&BASE.replace("budget = 2.5", "protocol = \"json\"")).unwrap();
        assert_eq!(
            (json.len(), json[0].id.as_str()),
            (1, "wire.health.json.ready")
        );
    }

    #[test]
    fn declared_flows_set_the_order_and_name_each_instance() {
        let text = BASE.replace(
            "id = \"wire.health.json.ready\"",
            "id = \"gone.{flow}\"\nflows = [\"xml\", \"json\"]",
        );
        let ids: Vec<String> = instances(&text)
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(ids, ["gone.xml", "gone.json"]);
        let text = BASE.replace(
            "id = \"wire.health.json.ready\"",
            "id = \"u\"\nflows = [\"xml\", \"json\"]",
        );
        let ids: Vec<String> = instances(&text)
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(ids, ["u", "u.json"]);
    }

    #[test]
    fn flows_given_twice_or_ruled_out_by_a_fault_are_refused_with_the_line() {
        let both = BASE.replace(
            "id = \"wire.health.json.ready\"",
            "id = \"x\"\nflows = [\"json\"]",
        ) + "protocol = \"xml\"\n";
        let e = instances(&both).unwrap_err();
        assert_eq!(
            (e.field.as_deref(), e.line),
            (Some("agent.protocol"), Some(9)),
            "{e}"
        );
        let repeated = BASE.replace(
            "id = \"wire.health.json.ready\"",
            "id = \"x\"\nflows = [\"json\", \"json\"]",
        );
        let e = instances(&repeated).unwrap_err();
        assert_eq!(
            (e.field.as_deref(), e.line),
            (Some("flows"), Some(2)),
            "{e}"
        );
        let ruled_out = BASE.replace("budget = 2.5", "protocol = \"json\"")
            + "[[fake.endpoint]]\nid = \"wireserver.goalstate\"\n[[fake.endpoint.step]]\nkind = \"hang\"\n";
        let e = instances(&ruled_out).unwrap_err();
        assert!(
            e.to_string().contains("field `agent.protocol`: the json flow is listed, but fake.endpoint[1] (wireserver.goalstate) only answers the xml flow"),
            "{e}"
        );
    }

    const BASE: &str = r#"id = "wire.health.json.ready"
title = "Ready over JSON"
checks = ["protocol.*", "behaviour.exit"]

[agent]
action = "ready"
budget = 2.5
"#;

    /// `[guest]`: the guest file's keys, checked where the scenario is read; a guest scenario
    /// needs an agent that provisions one.
    #[test]
    fn a_guest_table_loads_and_its_mistakes_name_the_line() {
        let s = load(&format!(
            "{BASE}[guest]\novf_env = \"<x/>\"\n[guest.fail.useradd]\nexit = 9\n"
        ))
        .unwrap();
        let guest = s.guest.as_ref().unwrap();
        assert_eq!(guest.ovf_env.as_deref(), Some("<x/>"));
        assert_eq!(guest.fail[&fake_wireserver::guest::Tool::Useradd].exit, 9);
        assert!(s.required_capabilities().contains(&Capability::Guest));
        assert!(load(BASE).unwrap().guest.is_none());
        let err = load(&format!("{BASE}[guest]\nvm_id = \"not-a-uuid\"\n")).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("guest"), "{err}");
        assert!(err.message.contains("vm_id: expected a UUID"), "{err}");
        assert!(err.line.is_some(), "{err}");
        let err = load(&format!("{BASE}[guest.fail.rm]\nexit = 1\n")).unwrap_err();
        assert!(err.to_string().contains("rm"), "{err}");
    }

    #[test]
    fn a_minimal_scenario_loads_with_defaults() {
        let s = load(BASE).unwrap();
        assert_eq!(s.id, "wire.health.json.ready");
        assert_eq!(s.name, "t (json)");
        assert_eq!(s.agent.runs.len(), 1);
        assert_eq!(s.agent.budget, 2.5);
        assert_eq!(s.agent.vm_id.as_deref(), Some(DEFAULT_VM_ID));
        let ids: Vec<&str> = s.checks.iter().map(|c| c.as_str()).collect();
        assert!(ids.contains(&"protocol.headers") && ids.contains(&"behaviour.exit"));
        assert!(!ids.contains(&"kvp.pool"));
        assert_eq!(
            s.case_id(s.checks[0]),
            format!("wire.health.json.ready.{}", ids[0])
        );
    }

    #[test]
    fn generated_text_and_runs() {
        let s = load(
            r#"id = "a.b"
title = "t"
checks = ["report.state"]
[agent]
[[agent.run]]
action = "in-progress"
description = { text = "x", repeat = "ab", times = 3 }
[[agent.run]]
action = "ready"
"#,
        )
        .unwrap();
        assert_eq!(s.agent.runs[0].description.as_deref(), Some("xababab"));
        assert_eq!(s.agent.runs[1].action, Action::Ready);
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = load(&format!("{BASE}retries = 3\n")).unwrap_err();
        assert_eq!(e.line, Some(8));
        assert!(e.message.contains("unknown field `retries`"), "{e}");

        let e = load(&BASE.replace("budget = 2.5", "budget = -1.0")).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(7), Some("agent.budget"))
        );

        let e = load(&BASE.replace("\"behaviour.exit\"", "\"behaviour.nope\"")).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("checks[2]")));
        assert!(e.message.contains("matches no check"), "{e}");

        let e = load(&BASE.replace("action = \"ready\"", "action = \"failure\"")).unwrap_err();
        assert!(e.message.contains("needs a `reason`"), "{e}");
    }

    const RUNS: &str = r#"id = "a.b"
title = "t"
checks = ["report.state"]
[agent]
[[agent.run]]
action = "in-progress"
description = "d"
[[agent.run]]
action = "failure"
data = ["K=V", "nokey"]
"#;

    #[test]
    fn errors_name_the_run_from_one_and_its_line() {
        // A bad data item: the run and the item, counted from 1, on the item's line.
        let e = load(&RUNS.replace(
            "action = \"failure\"",
            "action = \"failure\"\nreason = \"r\"",
        ))
        .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(11), Some("agent.run[2].data[2]")),
            "{e}"
        );
        assert!(e.message.contains("\"nokey\" is not KEY=VALUE"), "{e}");

        // A rule of the report kind: the run's own table, not the [agent] header.
        let e = load(&RUNS.replace(", \"nokey\"", "")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("agent.run[2].reason"), "{e}");
        assert!(e.message.contains("needs a `reason`"), "{e}");
        assert_eq!(e.line, Some(8), "the run's own table: {e}");

        // A type error inside the second table: serde's path, 1-based.
        let e = load(&RUNS.replace("action = \"failure\"", "action = 7")).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(9), Some("agent.run[2].action")),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("scenarios/t.toml:9:10: field `agent.run[2].action`: wanted string"),
            "{e}"
        );

        // An unknown key names the table it is in.
        let e = load(&RUNS.replace("description = \"d\"", "descripton = \"d\"")).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(7), Some("agent.run[1]")),
            "{e}"
        );
        assert!(e.message.starts_with("unknown field `descripton`"), "{e}");
    }

    #[test]
    fn one_invocation_errors_name_the_agent_table() {
        let e = load(&BASE.replace("action = \"ready\"", "action = \"failure\"")).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(5), Some("agent.reason")),
            "{e}"
        );
        let e = load(&BASE.replace(
            "action = \"ready\"",
            "action = \"ready\"\ndescription = \"d\"",
        ))
        .unwrap_err();
        assert_eq!(e.field.as_deref(), Some("agent.description"), "{e}");
        let e = load(&BASE.replace("budget = 2.5", "budget = \"soon\"")).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(7), Some("agent.budget")),
            "{e}"
        );
    }

    #[test]
    fn a_check_typo_lists_the_valid_ids() {
        let e = load(&BASE.replace("\"behaviour.exit\"", "\"behavior.exit\"")).unwrap_err();
        assert_eq!((e.line, e.field.as_deref()), (Some(3), Some("checks[2]")));
        assert!(
            e.message
                .starts_with("\"behavior.exit\" matches no check; known: protocol.request, "),
            "{e}"
        );
        for id in crate::catalog::CheckId::ALL {
            assert!(e.message.contains(id.as_str()), "{id}: {e}");
        }
    }

    #[test]
    fn fake_table_errors_keep_the_document_line() {
        let text = format!(
            "{BASE}\n[fake]\n[[fake.endpoint]]\nid = \"wireserver.health.json\"\n[[fake.endpoint.step]]\nkind = \"explode\"\n"
        );
        let e = load(&text).unwrap_err();
        assert_eq!(e.line, Some(13), "{e}");
        assert!(
            e.field.as_deref().unwrap().starts_with("fake.endpoint"),
            "{e}"
        );
    }
}
