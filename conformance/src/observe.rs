//! What one scenario run produced (journal, pool file, agent invocations) and the shared
//! reading of it that checks build on: which run a request belongs to, and how the agent's
//! profile classifies each answer (success, retryable, fatal).

use fake_wireserver::journal::{AnswerKind, Delivery, Entry};
use fake_wireserver::{EndpointId, HealthState, SubStatus};
use wirecheck_oracle::ServedIds;
use wirecheck_oracle::kvp::PoolView;

use fake_wireserver::clock::TimeScale;

use crate::agent::{Action, AgentProfile, Forbidden, Reaction};
use crate::exec::{Captured, Exit};
use crate::scenario::{Protocol, Run, Scenario};

/// One agent invocation, on the fake's clock (milliseconds since the fake started).
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub run: Run,
    pub argv: Vec<String>,
    pub start_ms: u64,
    /// When its deadline clock started: its first attempt, or the end of the start-up
    /// allowance (`exec::STARTUP_ALLOWANCE`); the deadline is counted from here.
    pub clock_ms: u64,
    pub end_ms: u64,
    pub exit: Exit,
    pub stdout: Captured,
    pub stderr: Captured,
    /// Its PID on the host, where it started (whose stalls are its own: `runner::lag`).
    pub pid: Option<u32>,
    /// Its connection attempts on a refused host, in order: the fake never sees them, the
    /// sandbox's or the runner's watch does (empty where nothing watched: the case is not judged
    /// when the watch lost some).
    pub refused: Vec<RefusedAttempt>,
}

/// A connection attempt on a refused host: when its SYN came, on the fake's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefusedAttempt {
    pub at_ms: u64,
    pub service: Service,
}

impl RunRecord {
    pub fn duration_ms(&self) -> u64 {
        self.end_ms.saturating_sub(self.start_ms)
    }
}

/// A stretch during which the runner's runtime could not run (it woke `len_ms` late at
/// `end_ms`, on the fake's clock): a time recorded around then may be late by up to `len_ms`
/// (`runner::lag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    pub end_ms: u64,
    pub len_ms: u64,
}

/// How far from a stall's end a recorded time still counts as possibly delayed by it (one
/// watcher tick plus scheduling slack), on the wall clock.
const STALL_REACH_MS: u64 = 20;

/// The longest lag the runner's watcher does not record (`runner::lag`'s threshold), on the
/// wall clock: within every tolerance at the wall clock, not at x50.
pub const UNSEEN_LAG_MS: u64 = 2;

/// The one rule for judging a retry loop against its budget, with no fixed margin: the slack
/// is what was measured or declared. On the fake's clock, from the loop's start:
/// - no new attempt may start after the budget by more than the runner's lag measured around
///   that moment ([`LoopBudget::attempt`]);
/// - the loop's last request must be over by the budget plus its one in-flight request (that
///   request's own duration as the journal shows it, at most its timeout) plus the lag measured
///   around its end ([`LoopBudget::loop_end`]);
/// - the agent must exit by then, or by the budget's end, plus one retry interval (it may
///   notice the budget only when its sleep ends) plus the lag ([`LoopBudget::exit`]). The exit
///   has this declared slack because the agent's own teardown (logging, the KVP write, process
///   exit) is not what the runner measures: the bundled reporter took 97 ms from its last
///   answer to its exit on a machine at load 9.8, while the runner's own lag was 0.
///
/// Stalls only delay what is recorded, so a time beyond its limit by more than the measured lag
/// was beyond it in fact: a failure is certain, whatever the machine did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoopBudget {
    /// When the loop started (its first request, on the fake's clock).
    pub start_ms: u64,
    pub budget_ms: u64,
}

/// A time judged against a [`LoopBudget`]: within it, or over (by how much, past which limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Within {
    Inside,
    Over {
        /// The latest the time could have been: the budget's limit plus the measured lag.
        limit_ms: u64,
        by_ms: u64,
    },
}

impl LoopBudget {
    /// When the budget ends.
    pub fn end_ms(&self) -> u64 {
        self.start_ms + self.budget_ms
    }

    /// An attempt that reached the fake at `at_ms`, the runner's wake-ups late by up to
    /// `lag_ms` around then (`Observation::uncertainty_ms`).
    pub fn attempt(&self, at_ms: u64, lag_ms: u64) -> Within {
        within(at_ms, self.end_ms() + lag_ms)
    }

    /// The loop's last request over at `end_ms`, its in-flight request having taken
    /// `in_flight_ms`, the runner late by up to `lag_ms` around the end.
    pub fn loop_end(&self, end_ms: u64, in_flight_ms: u64, lag_ms: u64) -> Within {
        within(end_ms, self.end_ms() + in_flight_ms + lag_ms)
    }

    /// The agent's exit at `exit_ms`, its loop's last request over at `loop_end_ms`, one retry
    /// interval `interval_ms`, the runner late by up to `lag_ms` around the exit.
    pub fn exit(&self, exit_ms: u64, loop_end_ms: u64, interval_ms: u64, lag_ms: u64) -> Within {
        within(
            exit_ms,
            self.end_ms().max(loop_end_ms) + interval_ms + lag_ms,
        )
    }
}

fn within(t_ms: u64, limit_ms: u64) -> Within {
    if t_ms <= limit_ms {
        Within::Inside
    } else {
        Within::Over {
            limit_ms,
            by_ms: t_ms - limit_ms,
        }
    }
}

/// The VM id of a report whose agent could not learn it, as azure-init and the bundled
/// reporter write it (docs/protocol.md §6.2).
pub const NIL_VM_ID: &str = "00000000-0000-0000-0000-000000000000";

/// Whether a report's `vm_id` says the agent did not know it: the nil id, cloud-init 25.2+'s
/// `None`, cloud-init 23.2–25.1's `failed to read vm id: ...` (docs/protocol.md §6.2).
pub fn says_vm_id_unknown(vm_id: &str) -> bool {
    vm_id == NIL_VM_ID || vm_id == "None" || vm_id.starts_with("failed to read vm id")
}

/// Everything the checks judge.
#[derive(Debug)]
pub struct Observation<'a> {
    pub scenario: &'a Scenario,
    pub profile: &'a AgentProfile,
    /// Sorted by `seq`.
    pub journal: Vec<Entry>,
    pub served: ServedIds,
    /// The VM id the fake's IMDS serves (what an agent reading IMDS must report).
    pub imds_vm_id: Option<String>,
    /// The pool file after the run (`None`: the agent removed it).
    pub pool: Option<Vec<u8>>,
    pub pool_view: PoolView,
    pub runs: Vec<RunRecord>,
    /// When the runner stalled during the case (empty on a machine that kept time), in agent
    /// time.
    pub stalls: Vec<Stall>,
    /// How long the agent's own processes waited for a CPU: per look of the runner's watcher,
    /// the most one of their threads waited in it, short waits added up, in agent time
    /// (`runner::lag`): CPU-bound work of the agent's (its exit) is late by their sum on a
    /// loaded machine.
    pub agent_waited: Vec<Stall>,
    /// How long the agent's own processes worked, per look of the watcher, in agent time:
    /// their time on a CPU, and their waits for one while they were the load (running half a
    /// CPU or more), which are not a stall of the machine's but their own work held back. An
    /// exit is such work, magnified by agent time ([`Observation::working_ms`]).
    pub agent_working: Vec<Stall>,
    /// How fast the agent's clock and the fake's ran (agent time, `fake_wireserver::clock`).
    pub time_scale: TimeScale,
    /// Agent seconds after which each invocation was killed, from its first request
    /// (`runner::timing`: the scenario's deadline, grown for the profile's fixed timing).
    pub deadline: f64,
    /// In a guest: what its stand-in tools were asked to do, in order (`guest-calls.jsonl`).
    pub guest_calls: Vec<fake_wireserver::guest::ToolCall>,
    /// In a guest: the users it has after the run that the host has not (`None`: its
    /// `/etc/passwd` could not be read after the run, or no guest).
    pub guest_users: Option<Vec<String>>,
}

/// Which service a request went to, for retry bookkeeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Wireserver,
    Imds,
    Other,
}

pub fn service_of(entry: &Entry) -> Service {
    if entry.endpoint.is_wireserver() {
        Service::Wireserver
    } else if entry.endpoint.is_imds() {
        Service::Imds
    } else {
        Service::Other
    }
}

pub fn is_health(entry: &Entry) -> bool {
    entry.endpoint.is_health()
}

/// How the agent's profile says an answer must be treated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    Success,
    /// Retry (within the budget); the text says why.
    Retryable(String),
    /// Give up; the text says why.
    Fatal(String),
}

impl Class {
    pub fn is_success(&self) -> bool {
        matches!(self, Class::Success)
    }
}

impl Observation<'_> {
    /// Seconds the agent must respect as its budget.
    pub fn budget(&self) -> f64 {
        self.profile
            .reactions
            .budget
            .unwrap_or(self.scenario.agent.budget)
    }

    /// Seconds the agent keeps trying `service`: IMDS's own budget when the profile fixes one
    /// (`reactions.imds_budget`), else [`Self::budget`].
    pub fn budget_for(&self, service: Service) -> f64 {
        match (service, self.profile.reactions.imds_budget) {
            (Service::Imds, Some(imds)) => imds,
            _ => self.budget(),
        }
    }

    /// Minimum seconds between a failed attempt and the next one.
    pub fn interval_min(&self) -> f64 {
        self.profile
            .reactions
            .retry_interval_min
            .unwrap_or(self.scenario.agent.retry_interval)
    }

    /// Minimum seconds between a failed attempt `entry` and the next one: the 503 wait or the
    /// IMDS interval when the profile has one, else [`Self::interval_min`].
    pub fn interval_min_after(&self, entry: &Entry) -> f64 {
        let service = match service_of(entry) {
            Service::Imds => fake_wireserver::Service::Imds,
            Service::Wireserver | Service::Other => fake_wireserver::Service::Wireserver,
        };
        crate::obligations::wait_after(
            &self.profile.reactions,
            &self.scenario.agent,
            service,
            entry.answer.status,
        )
        .min
    }

    /// Seconds the agent waits for an answer: its fixed timeout, else the one passed to it.
    pub fn request_timeout(&self) -> f64 {
        self.profile
            .reactions
            .request_timeout
            .unwrap_or(self.scenario.agent.request_timeout)
    }

    /// When the agent was done with request `entry`, as the journal shows it: the answer's end
    /// or its own close of the connection, whichever came first (a kept-alive connection
    /// closes only at its exit); `None` when neither was recorded.
    pub fn request_end_ms(&self, entry: &Entry) -> Option<u64> {
        match (entry.done_ms, entry.client_closed_ms) {
            (Some(done), Some(closed)) => Some(done.min(closed)),
            (done, closed) => done.or(closed),
        }
    }

    /// How long the agent was busy with request `entry` ([`Self::request_end_ms`]), never
    /// longer than its request timeout: what [`LoopBudget`] allows an in-flight request.
    pub fn request_span_ms(&self, entry: &Entry) -> u64 {
        let timeout = (self.request_timeout() * 1000.0).round() as u64;
        self.request_end_ms(entry)
            .map_or(timeout, |end| end.saturating_sub(entry.at_ms))
            .min(timeout)
    }

    /// How late a time the fake recorded at `t_ms` may be because the runner stalled around
    /// then: the longest stall whose stretch (widened by [`STALL_REACH_MS`]) contains it. In
    /// agent time, the lag the watcher cannot see ([`UNSEEN_LAG_MS`] of the wall's) counts
    /// too: scaled, it is no longer below every tolerance.
    pub fn uncertainty_ms(&self, t_ms: u64) -> u64 {
        let scale = self.time_scale.factor();
        let reach = (STALL_REACH_MS as f64 * scale) as u64;
        let stalled = self
            .stalls
            .iter()
            .filter(|s| {
                let from = s.end_ms.saturating_sub(s.len_ms + reach);
                (from..=s.end_ms + reach).contains(&t_ms)
            })
            .map(|s| s.len_ms)
            .max()
            .unwrap_or(0);
        stalled + self.unseen_lag_ms()
    }

    /// How late the journal's arrival time of `entry` may be: none when it is the kernel's
    /// receive stamp (`received_by_kernel`), which no stall of the runner delays; else
    /// [`Self::uncertainty_ms`] around it.
    pub fn arrival_uncertainty_ms(&self, entry: &Entry) -> u64 {
        if entry.received_by_kernel {
            0
        } else {
            self.uncertainty_ms(entry.at_ms)
        }
    }

    /// The lag the runner cannot see ([`UNSEEN_LAG_MS`]) on the agent's clock: none at the wall
    /// clock, where the stalls it measured are all there is.
    pub fn unseen_lag_ms(&self) -> u64 {
        if self.time_scale.is_wall() {
            0
        } else {
            (UNSEEN_LAG_MS as f64 * self.time_scale.factor()) as u64
        }
    }

    /// How long the agent's processes waited for a CPU ([`Observation::agent_waited`]), added
    /// up over the looks that ended after `from_ms` and by `to_ms` (widened by one look's
    /// reach).
    pub fn agent_waited_ms(&self, from_ms: u64, to_ms: u64) -> u64 {
        self.added_up(&self.agent_waited, from_ms, to_ms)
    }

    /// How long the agent's processes worked between `from_ms` and `to_ms`
    /// ([`Observation::agent_working`]): CPU-bound work of theirs such as an exit (under load a
    /// Python exit runs part of each look and waits the rest), and what a spinning agent does
    /// too. So it is only ever part of an exit's excuse, bounded by the agent's own start-up
    /// (`checks::behaviour`).
    pub fn working_ms(&self, from_ms: u64, to_ms: u64) -> u64 {
        self.added_up(&self.agent_working, from_ms, to_ms)
    }

    /// The lengths of the looks in `looks` that ended after `from_ms` and by `to_ms` (widened
    /// by one look's reach), added up.
    fn added_up(&self, looks: &[Stall], from_ms: u64, to_ms: u64) -> u64 {
        let reach = (STALL_REACH_MS as f64 * self.time_scale.factor()) as u64;
        looks
            .iter()
            .filter(|w| w.end_ms > from_ms && w.end_ms <= to_ms + reach)
            .map(|w| w.len_ms)
            .sum()
    }

    /// The health endpoint of the flow the scenario tests (`agent.protocol`).
    pub fn flow_endpoint(&self) -> EndpointId {
        match self.scenario.agent.protocol {
            Protocol::Json => EndpointId::WireserverHealthJson,
            Protocol::Xml => EndpointId::WireserverHealthXml,
        }
    }

    /// A health report on the flow the scenario tests. Only these count as the agent's
    /// report: a report on the other flow is not what the scenario asked for (an agent
    /// that claims `xml` but posts JSON must not pass an XML scenario).
    pub fn is_flow_health(&self, entry: &Entry) -> bool {
        entry.endpoint == self.flow_endpoint()
    }

    /// Index of the run a journal entry belongs to. Runs are sequential, and every request of
    /// run `i` arrives before run `i` ends, so an entry belongs to the first run that had not
    /// ended when it arrived. (The runner's clock starts just before the fake's, so its run
    /// times are never earlier than the fake's view of them; see `runner`.)
    pub fn run_of(&self, entry: &Entry) -> usize {
        let last = self.runs.len().saturating_sub(1);
        self.runs
            .iter()
            .position(|r| entry.at_ms <= r.end_ms)
            .unwrap_or(last)
            .min(last)
    }

    /// The entries of one run, in order.
    /// Whether `entry` is a request the runner cut off: never complete (`http.incomplete`:
    /// the connection closed inside it), and the connection closed when the runner ended the
    /// run (killed at its deadline, stopped when done, or interrupted): from the runner's
    /// measured lag and one watcher tick before the run's end until the next run starts.
    /// Killing an agent mid-send is the runner's doing: such a request is not judged as one
    /// the agent got wrong (cloud-init, which never gives up on a 503, is ended by the
    /// deadline, now and then inside a request). There is no upper tolerance: the run's end is
    /// taken before the kill, and the kill, the agent's death and the fake seeing the
    /// connection close take what a loaded machine makes them take (at x50, 20 ms of the wall's
    /// is 1 s of agent time: the project CI at dae5fdf). After the end no agent process is left to send
    /// anything, so a close seen then is the kill's.
    pub fn cut_by_the_runner(&self, entry: &Entry) -> bool {
        let incomplete = entry
            .findings
            .iter()
            .any(|f| f.id == fake_wireserver::inspect::RequestId::HttpIncomplete.as_str());
        let reach = (STALL_REACH_MS as f64 * self.time_scale.factor()) as u64;
        incomplete
            && self.runs.iter().enumerate().any(|(i, r)| {
                let next_start = self.runs.get(i + 1).map_or(u64::MAX, |n| n.start_ms);
                matches!(
                    r.exit,
                    Exit::KilledAtDeadline | Exit::StoppedWhenDone | Exit::Interrupted(_)
                ) && entry.at_ms + self.uncertainty_ms(r.end_ms) + reach >= r.end_ms
                    && entry.at_ms < next_start
            })
    }

    pub fn entries_of_run(&self, run: usize) -> Vec<&Entry> {
        self.journal
            .iter()
            .filter(|e| self.run_of(e) == run)
            .collect()
    }

    /// The report state (and substatus) a run must produce: what its action asks for, unless
    /// the scenario expects the agent to decide otherwise (`[expect] state`, validated to one
    /// of these combinations when the scenario loads).
    pub fn expected_state(&self, run: &Run) -> (HealthState, Option<SubStatus>) {
        // The expected state is the terminal report's: an in-progress run before it (an agent
        // that reports progress while it provisions a guest) stays in progress.
        if run.action != Action::InProgress
            && let Some(state) = &self.scenario.expect.state
        {
            return match (state, &self.scenario.expect.substatus) {
                (HealthState::NotReady, Some(SubStatus::Provisioning)) => {
                    (HealthState::NotReady, Some(SubStatus::Provisioning))
                }
                (HealthState::NotReady, _) => {
                    (HealthState::NotReady, Some(SubStatus::ProvisioningFailed))
                }
                _ => (HealthState::Ready, None),
            };
        }
        match run.action {
            Action::Ready => (HealthState::Ready, None),
            Action::Failure => (HealthState::NotReady, Some(SubStatus::ProvisioningFailed)),
            Action::InProgress => (HealthState::NotReady, Some(SubStatus::Provisioning)),
        }
    }

    /// What a failure report's reason must contain, when the agent chooses its own: the
    /// scenario's `[expect] reason_contains`, and for a guest scenario what the profile declares
    /// for it too (`[guest.reasons]`). `Err`: a guest scenario the profile declares nothing for.
    pub fn expected_reason_parts(&self) -> Result<Vec<&str>, String> {
        let mut parts: Vec<&str> = self
            .scenario
            .expect
            .reason_contains
            .as_deref()
            .into_iter()
            .collect();
        if self.scenario.guest.is_none() {
            return Ok(parts);
        }
        match self.profile.guest.reasons.get(&self.scenario.family) {
            Some(part) => parts.push(part),
            None => {
                return Err(format!(
                    "{} chooses its own failure text in a guest, and its profile declares none for {} ([guest.reasons])",
                    self.profile.name, self.scenario.family
                ));
            }
        }
        Ok(parts)
    }

    /// The VM id a report must carry: the scenario's; else the one the fake's IMDS serves.
    /// `None`: nothing to hold the report to.
    pub fn expected_vm_id(&self) -> Option<&str> {
        self.scenario
            .agent
            .vm_id
            .as_deref()
            .or(self.imds_vm_id.as_deref())
    }

    /// Whether the agent may say it does not know the VM id ([`says_vm_id_unknown`]) in
    /// `report` (for the KVP record, `None`: by its last run): it was to read the id from IMDS,
    /// asked in that run before the report, and never got a usable instance document
    /// (docs/protocol.md §6.2). One that had not asked must have it from elsewhere (a
    /// guest's DMI).
    pub fn may_not_know_vm_id(&self, report: Option<&Entry>) -> bool {
        if self.scenario.agent.vm_id.is_some() {
            return false;
        }
        let run = report.map_or(self.runs.len().saturating_sub(1), |r| self.run_of(r));
        let mut asked = self
            .journal
            .iter()
            .filter(|e| e.endpoint == EndpointId::ImdsInstance && self.run_of(e) == run)
            .filter(|e| report.is_none_or(|r| e.seq < r.seq))
            .peekable();
        asked.peek().is_some() && asked.all(|e| !self.classify(e).is_success())
    }

    /// Whether a run's report ends provisioning (Ready or failure), as opposed to in-progress.
    pub fn is_terminal(&self, run: &Run) -> bool {
        self.expected_state(run).1 != Some(SubStatus::Provisioning)
    }

    /// How the profile classifies the answer to `entry`.
    pub fn classify(&self, entry: &Entry) -> Class {
        let timeout_ms = (self.request_timeout() * 1000.0) as u64;
        let r = &self.profile.reactions;
        let transport = |what: String| match r.transport_errors {
            Reaction::Retry => Class::Retryable(what),
            Reaction::Fatal => Class::Fatal(what),
        };
        let took = entry.done_ms.map(|d| d.saturating_sub(entry.at_ms));
        match entry.answer.kind.delivery() {
            Delivery::Never => return transport(format!("no answer ({})", entry.answer.kind)),
            Delivery::Broken(what) => return transport(what.into()),
            Delivery::AfterWait | Delivery::OverTime
                if took.is_some_and(|t| t > timeout_ms + 100) =>
            {
                return transport(format!(
                    "reply took {} ms, longer than the {} ms request timeout",
                    took.unwrap_or_default(),
                    timeout_ms
                ));
            }
            Delivery::AfterWait | Delivery::OverTime | Delivery::AtOnce => {}
        }
        let Some(status) = entry.answer.status else {
            return transport(format!("no status ({})", entry.answer.kind));
        };
        if (200..300).contains(&status) {
            if entry.endpoint == EndpointId::WireserverGoalstate
                && self.scripted_body_is_broken_goal_state(entry)
            {
                return Class::Retryable("a malformed goal state".into());
            }
            if entry.endpoint == EndpointId::ImdsInstance
                && self.scripted_body_is_unusable_instance(entry)
            {
                let what = "an IMDS 200 without a usable instance document".to_owned();
                return match r.imds_unusable_body {
                    Reaction::Retry => Class::Retryable(what),
                    Reaction::Fatal => Class::Fatal(what),
                };
            }
            return Class::Success;
        }
        let imds = service_of(entry) == Service::Imds;
        let status_403 = match (imds, r.imds_status_403) {
            (true, Some(f)) => f,
            _ => r.status_403,
        };
        let retryable = match (imds, &r.imds_retryable) {
            (true, Some(set)) => set,
            _ => &r.retryable,
        };
        if status == 403 {
            let throttle_body = self.is_throttle_reply(entry);
            return match (status_403, throttle_body) {
                (Forbidden::Throttling, _) | (Forbidden::ThrottleBody, true) => {
                    Class::Retryable("403 throttling".into())
                }
                (Forbidden::ThrottleBody, false) => {
                    Class::Fatal("403 without the platform throttle body".into())
                }
                (Forbidden::Fatal, _) => Class::Fatal("403 (fatal for this agent)".into()),
            };
        }
        if retryable.contains(&status) {
            Class::Retryable(format!("status {status}"))
        } else {
            Class::Fatal(format!("status {status}"))
        }
    }

    /// True when the 403 answer carried the platform's throttle body: from the `[rate_limit]`
    /// (IMDS's own limit answers 429, not this), or a scripted step with the `throttled`
    /// preset / a `RequestRateLimitExceeded` body.
    pub fn is_throttle_reply(&self, entry: &Entry) -> bool {
        if entry.answer.kind == AnswerKind::Throttled {
            return entry.answer.status == Some(403);
        }
        use fake_wireserver::Preset;
        let reply = self.scripted_reply(entry);
        reply.is_some_and(|reply| {
            let body_says = reply.body.as_ref().is_some_and(|b| {
                String::from_utf8_lossy(b.bytes()).contains("RequestRateLimitExceeded")
            });
            body_says || (reply.preset == Some(Preset::Throttled) && reply.body.is_none())
        })
    }

    /// A scripted 2xx goal state whose body is not a complete `<GoalState>` document: the
    /// agent cannot use it, so it must fetch the goal state again.
    fn scripted_body_is_broken_goal_state(&self, entry: &Entry) -> bool {
        self.scripted_reply(entry)
            .and_then(|reply| reply.body.as_ref())
            .is_some_and(|body| !String::from_utf8_lossy(body.bytes()).contains("</GoalState>"))
    }

    /// A scripted 2xx IMDS instance answer the agent cannot read: the whole document
    /// (`/metadata/instance`) without a `compute.vmId`, the compute leaf without a `vmId`, any
    /// other JSON leaf that is not JSON (empty, HTML, cut short). A `format=text` leaf's plain
    /// text is what was asked. Unreadable, it is a retry decision.
    fn scripted_body_is_unusable_instance(&self, entry: &Entry) -> bool {
        let Some(reply) = self.scripted_reply(entry) else {
            return false;
        };
        // Origin form, or the absolute form a request through the proxy has.
        let (target, query) = entry.target.split_once('?').unwrap_or((&entry.target, ""));
        if query.split('&').any(|pair| pair == "format=text") {
            return false;
        }
        let path = match target.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
            None => target,
        };
        let body = reply.body.as_ref().map_or(&[][..], |b| b.bytes());
        let Ok(document) = serde_json::from_slice::<serde_json::Value>(body) else {
            return true;
        };
        let vm_id = match path.trim_end_matches('/') {
            "/metadata/instance" => "/compute/vmId",
            "/metadata/instance/compute" => "/vmId",
            _ => return false,
        };
        !document.pointer(vm_id).is_some_and(|v| v.is_string())
    }

    /// The scripted reply that answered `entry`, if a step with a reply did.
    fn scripted_reply(&self, entry: &Entry) -> Option<&fake_wireserver::Reply> {
        let step = entry.answer.step.as_ref()?;
        let plan = self
            .scenario
            .fake
            .endpoints
            .iter()
            .find(|p| p.id == step.endpoint)?;
        plan.steps.get(step.index)?.action.reply()
    }

    /// Whether the answer was scripted (a fault the scenario injected), or a rate limit's
    /// refusal (the `[rate_limit]`'s 403, IMDS's own 429).
    pub fn is_injected(&self, entry: &Entry) -> bool {
        entry.answer.step.is_some() || entry.answer.kind == AnswerKind::Throttled
    }
}

/// `POST /provisioning/health`: method and the target's path and query.
pub fn request_line(entry: &Entry) -> String {
    format!("{} {}", entry.method, entry.target)
}

/// What the fake answered, short: `201`, `403 (throttled)`, `hang`.
pub fn answer_label(entry: &Entry) -> String {
    match (entry.answer.kind, entry.answer.status) {
        (AnswerKind::Respond | AnswerKind::Default, Some(s)) => s.to_string(),
        (kind, Some(s)) => format!("{s} ({kind})"),
        (kind, None) => kind.to_string(),
    }
}

/// One line describing an entry for evidence: `#3 +120 ms POST /provisioning/health → 503`.
pub fn describe(entry: &Entry) -> String {
    format!(
        "#{} +{} ms {} → {}",
        entry.seq,
        entry.at_ms,
        request_line(entry),
        answer_label(entry)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_rule_allows_only_the_measured_lag_and_the_in_flight_request() {
        let rule = LoopBudget {
            start_ms: 100,
            budget_ms: 2000,
        };
        assert_eq!(rule.attempt(2100, 0), Within::Inside);
        assert_eq!(
            rule.attempt(2101, 0),
            Within::Over {
                limit_ms: 2100,
                by_ms: 1
            }
        );
        assert_eq!(rule.attempt(2135, 35), Within::Inside);
        assert_eq!(
            rule.attempt(2136, 35),
            Within::Over {
                limit_ms: 2135,
                by_ms: 1
            }
        );
        // The exit: one interval (200 ms) after the budget or the loop's end, plus the lag.
        assert_eq!(rule.exit(2300, 2050, 200, 0), Within::Inside);
        assert_eq!(
            rule.exit(2301, 2050, 200, 0),
            Within::Over {
                limit_ms: 2300,
                by_ms: 1
            }
        );
        assert_eq!(rule.exit(2650, 2400, 200, 50), Within::Inside);
        assert_eq!(rule.loop_end(2400, 300, 0), Within::Inside);
        assert_eq!(rule.loop_end(2420, 300, 20), Within::Inside);
        assert_eq!(
            rule.loop_end(2421, 300, 20),
            Within::Over {
                limit_ms: 2420,
                by_ms: 1
            }
        );
    }
}
